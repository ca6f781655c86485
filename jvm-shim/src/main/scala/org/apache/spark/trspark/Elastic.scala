package org.apache.spark.trspark

import org.apache.spark.{SparkConf, SparkContext}
import org.apache.spark.internal.Logging
import org.apache.spark.scheduler.TaskSchedulerImpl
import org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend
import org.apache.spark.scheduler.dynalloc.TRMonitorAccess

/**
 * trspark under Spark's dynamic allocation. With shuffle tracking, Spark keeps an idle executor
 * while it holds shuffle data (up to `spark.dynamicAllocation.shuffleTracking.timeout`); the
 * engine releases one earlier once every output it holds that may still be read is saved
 * elsewhere (`ReleaseExecutor` with `idle`, `trspark/engine/tr/elastic.py`). Here: the settings
 * the engine gets from dynamic allocation's, and the removal itself, done the way
 * `ExecutorAllocationManager` removes an idle executor.
 */
object Elastic extends Logging {
  val IdleKey: String = TRConf.Prefix + "release.idle"
  val MinKey: String = TRConf.Prefix + "release.minExecutors"

  /** Dynamic allocation with shuffle tracking (and no external shuffle service keeping the data). */
  def tracksShuffles(conf: SparkConf): Boolean =
    conf.getBoolean("spark.dynamicAllocation.enabled", defaultValue = false) &&
      conf.getBoolean("spark.dynamicAllocation.shuffleTracking.enabled", defaultValue = true) &&
      !conf.getBoolean("spark.shuffle.service.enabled", defaultValue = false)

  /**
   * Fill `spark.trspark.release.idle` and `release.minExecutors` from dynamic allocation's idle
   * timeout and floor, unless the user set them: the engine then lets an executor whose outputs
   * are saved go when dynamic allocation would let one without shuffle data go.
   */
  def configure(conf: SparkConf): Unit = {
    // Read after the fill-in below; a value that does not parse is the Python check's to refuse.
    def idleSeconds: Option[Double] = conf.getOption(IdleKey).flatMap(TRConf.seconds)
    if (tracksShuffles(conf)) {
      if (!conf.contains(IdleKey)) {
        val idleMs = conf.getTimeAsMs("spark.dynamicAllocation.executorIdleTimeout", "60s")
        conf.set(IdleKey, (idleMs / 1000.0).toString)
      }
      if (!conf.contains(MinKey)) conf.set(MinKey, conf.getInt("spark.dynamicAllocation.minExecutors", 0).toString)
      idleSeconds match {
        case Some(0.0) =>
          logInfo(s"trspark: dynamic allocation with shuffle tracking: early release of idle executors is off ($IdleKey=0)")
        case idle =>
          logInfo(s"trspark: dynamic allocation with shuffle tracking: idle executors whose outputs are saved go after " +
            s"${idle.fold(conf.get(IdleKey))(v => s"$v s")} (at least ${conf.get(MinKey)} executors stay)")
      }
    } else if (conf.contains(IdleKey) && !idleSeconds.contains(0.0)) {
      logWarning(s"trspark: $IdleKey=${conf.get(IdleKey)} has no effect: executors are released early only under " +
        "dynamic allocation with shuffle tracking (spark.dynamicAllocation.enabled=true, " +
        "spark.dynamicAllocation.shuffleTracking.enabled=true, spark.shuffle.service.enabled=false)")
    }
  }

  /**
   * May `executorId` go now as dynamic allocation would let it: it is idle for Spark (no task runs
   * there, no active job reads its shuffle data: dynamic allocation's own test, and the task
   * scheduler has no task on it), it holds no cached RDD blocks (the engine saves shuffle outputs
   * only; dynamic allocation removes such an executor itself after `cachedExecutorIdleTimeout`),
   * and the executors left still meet dynamic allocation's target (as
   * `ExecutorAllocationManager.removeExecutors` checks; the default resource profile).
   */
  def idle(sc: SparkContext, executorId: String): Boolean = sc.executorAllocationManager.exists { eam =>
    // Under the allocation manager's lock, as it reads and changes its target and removals itself.
    eam.synchronized(idleNow(sc, eam, executorId))
  }

  private def idleNow(sc: SparkContext, eam: org.apache.spark.ExecutorAllocationManager, executorId: String): Boolean = {
    val busy = sc.taskScheduler match {
      case scheduler: TaskSchedulerImpl => scheduler.isExecutorBusy(executorId)
      case _ => true
    }
    val monitor = eam.executorMonitor
    val target = eam.numExecutorsTargetPerResourceProfileId.getOrElse(0, 0)
    val left = monitor.executorCount - monitor.pendingRemovalCount - 1
    !busy && left >= target && TRMonitorAccess.isIdle(monitor, executorId) &&
      !TRMonitorAccess.holdsCachedBlocks(monitor, executorId)
  }

  /**
   * Remove `executorId` as `ExecutorAllocationManager.removeExecutors` does: through the
   * scheduler backend, without lowering the target (dynamic allocation keeps its own) and
   * without `force`, so an executor that took a task meanwhile is kept. True when it goes; dynamic
   * allocation's monitor then counts it as pending removal, as for its own removals. The test of
   * [[idle]] is made again here, under the allocation manager's lock and in the same step as the
   * kill, as `removeExecutors` does: moving the outputs took time, and dynamic allocation may have
   * removed another executor meanwhile.
   */
  def remove(sc: SparkContext, executorId: String): Boolean = (sc.schedulerBackend, sc.executorAllocationManager) match {
    case (backend: CoarseGrainedSchedulerBackend, Some(eam)) => eam.synchronized {
      idleNow(sc, eam, executorId) && {
        val killed = backend.killExecutors(Seq(executorId), adjustTargetNumExecutors = false, countFailures = false,
          force = false)
        if (killed.contains(executorId)) eam.executorMonitor.executorsKilled(Seq(executorId))
        killed.contains(executorId)
      }
    }
    case _ => false
  }
}
