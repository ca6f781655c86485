package org.apache.spark.trspark

import org.apache.spark.{FetchFailed, SparkContext, SparkException, TaskFailedReason, TaskState}
import org.apache.spark.deploy.LocalSparkCluster
import org.apache.spark.internal.Logging
import org.apache.spark.scheduler._
import org.apache.spark.scheduler.cluster.StandaloneSchedulerBackend
import org.apache.spark.util.ShutdownHookManager

/**
 * Master URLs whose task scheduler knows about evictions:
 *
 *  - `local-trcluster[N,C,M]`: Spark's `local-cluster[N,C,M]` (N executor JVMs on this host);
 *  - `spark-tr://host:port[,host:port]`: a standalone master, as `spark://host:port`.
 *
 * Both run Spark's standalone scheduler backend under a [[TRTaskScheduler]]. (The name must
 * start with `local` or `spark` to get past spark-submit; Spark's own patterns do not match
 * these, so Spark asks the registered `ExternalClusterManager`s.)
 */
class TRClusterManager extends ExternalClusterManager with Logging {
  private val LocalTrCluster = """local-trcluster\[\s*([0-9]+)\s*,\s*([0-9]+)\s*,\s*([0-9]+)\s*]""".r

  override def canCreate(masterURL: String): Boolean =
    masterURL.startsWith("local-trcluster") || masterURL.startsWith("spark-tr://")

  override def createTaskScheduler(sc: SparkContext, masterURL: String): TaskScheduler = new TRTaskScheduler(sc)

  override def createSchedulerBackend(sc: SparkContext, masterURL: String,
      scheduler: TaskScheduler): SchedulerBackend = {
    val impl = scheduler.asInstanceOf[TaskSchedulerImpl]
    masterURL match {
      case LocalTrCluster(workers, cores, memory) =>
        val cluster = LocalSparkCluster(workers.toInt, cores.toInt, memory.toInt, sc.conf)
        val backend = new StandaloneSchedulerBackend(impl, sc, cluster.start())
        backend.shutdownCallback = (_: StandaloneSchedulerBackend) => cluster.stop()
        backend
      case url if url.startsWith("spark-tr://") =>
        val masters = url.stripPrefix("spark-tr://").split(",").map("spark://" + _)
        new StandaloneSchedulerBackend(impl, sc, masters)
      case other =>
        throw new SparkException(s"trspark: cannot parse master URL '$other'; allowed: " +
          "local-trcluster[N,cores,MB] | spark-tr://host:port")
    }
  }

  override def initialize(scheduler: TaskScheduler, backend: SchedulerBackend): Unit =
    scheduler.asInstanceOf[TaskSchedulerImpl].initialize(backend)
}

/**
 * A `TaskSchedulerImpl` that (1) treats a signal-killed or vanished executor as an eviction, not
 * the application's fault, so evictions never count towards `spark.task.maxFailures`; and (2)
 * lets the trspark driver re-point backed-up map outputs synchronously, before the
 * DAGScheduler unregisters them (executor loss) or resubmits their map tasks (fetch failure).
 *
 * What counts as an eviction (the application keeps the blame for everything else, e.g. an
 * executor exiting with an error code of its own such as OOM = 52):
 *  - `ExecutorExited` with exit code >= 128 (killed by signal 9 SIGKILL, 15 SIGTERM, 30 SIGPWR);
 *  - `ExecutorProcessLost` (the RPC connection vanished: the VM or process is gone).
 *
 * trspark's part of each hook runs under a [[Guard]]: Spark's own handling follows whatever it does.
 */
class TRTaskScheduler(sc: SparkContext) extends TaskSchedulerImpl(sc) with HintedScheduling with TaskDuplication {

  override protected def takesCopies(executorId: String): Boolean = takesTasks(executorId)

  override def executorLost(executorId: String, reason: ExecutorLossReason): Unit = {
    val rewritten = TRTaskScheduler.asEviction(reason)
    // In the driver's shutdown its own cluster stops the executors: no eviction to report.
    if ((rewritten ne reason) && !ShutdownHookManager.inShutdown()) {
      logInfo(s"trspark: executor $executorId lost by eviction ($reason)")
    }
    Guard.run("TRTaskScheduler.executorLost")(TRDriverPlugin.active.foreach(_.outputsLost(executorId, "executor lost", dead = true)))
    super.executorLost(executorId, TRTaskScheduler.asDecommission(rewritten))
  }

  override def handleFailedTask(manager: TaskSetManager, tid: Long, state: TaskState.TaskState,
      reason: TaskFailedReason): Unit = {
    Guard.run("TRTaskScheduler.handleFailedTask")(reason match {
      case f: FetchFailed if f.bmAddress != null =>
        val reducer = TRSchedulerAccess.executorOf(manager, tid).getOrElse("")
        TRDriverPlugin.active.foreach(_.fetchFailed(f, reducer, wait = true))
      case _ =>
    })
    super.handleFailedTask(manager, tid, state, reason)
  }
}

object TRTaskScheduler {
  /**
   * An eviction or a release, told to Spark as a decommissioning. For any other loss reason,
   * the stage running on the lost executor marks its finished map tasks there as lost and
   * re-runs them (`TaskSetManager.executorLost`), even those whose outputs the plugin has just
   * re-pointed to a copy; only for a decommissioning does it look where each output is now, and
   * re-run only those on the lost executor's host: an output copied to the remote store or to a
   * peer on another host is not re-run, one copied to a peer on the same host still is (Spark
   * compares hosts, not executors).
   * Nothing else differs: the DAGScheduler drops
   * the outputs left on the executor as before, and its running tasks are not the application's
   * fault, as for any eviction. An exit caused by the application keeps its reason (and blame).
   */
  def asDecommission(reason: ExecutorLossReason): ExecutorLossReason = reason match {
    case ExecutorExited(_, false, message) => ExecutorDecommission(None, message)
    case ExecutorProcessLost(message, None, false) => ExecutorDecommission(None, message)
    case ExecutorKilled => ExecutorDecommission(None, ExecutorKilled.message)
    case other => other
  }

  def asEviction(reason: ExecutorLossReason): ExecutorLossReason = reason match {
    case ExecutorExited(code, true, message) if code >= 128 =>
      ExecutorExited(code, exitCausedByApp = false, s"$message (trspark: signal ${code - 128}, treated as eviction)")
    case ExecutorProcessLost(message, host, true) =>
      ExecutorProcessLost(s"$message (trspark: treated as eviction)", host, causedByApp = false)
    case other => other
  }
}
