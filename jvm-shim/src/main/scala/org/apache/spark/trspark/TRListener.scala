package org.apache.spark.trspark

import scala.collection.mutable

import org.apache.spark.{ExceptionFailure, ExecutorLostFailure, FetchFailed, SparkContext, Success, TaskKilled}
import org.apache.spark.scheduler._
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd
import org.apache.spark.util.ShutdownHookManager

/**
 * Records Spark's scheduler events as the engine's protocol events (`trspark/engine/events.py`,
 * same JSON field names) and tells the driver plugin about new and lost map outputs. Runs on
 * Spark's listener bus, i.e. asynchronously: the synchronous re-pointing is in [[TRTaskScheduler]].
 */
class TRListener(plugin: TRDriverPlugin, sc: SparkContext) extends SparkListener {
  private val shuffleOfStage = mutable.HashMap.empty[Int, Int]
  /** shuffle id -> stages that read it and have not completed yet. */
  private val readers = mutable.HashMap.empty[Int, mutable.Set[Int]]
  private val shufflesOfJob = mutable.HashMap.empty[Int, Seq[Int]]
  private val consumed = mutable.HashSet.empty[Int]
  /** Spark SQL execution id -> the shuffles its jobs write (in the order the jobs started). */
  private val shufflesOfExecution = mutable.HashMap.empty[Long, mutable.ArrayBuffer[Int]]
  /** Shuffles of a running SQL query: consumed only when the query ends (see [[onJobStart]]). */
  private val sqlShuffles = mutable.HashSet.empty[Int]
  /** Shuffles Spark's ContextCleaner removed, handed over from the cleaner's thread. */
  private val cleaned = new java.util.concurrent.ConcurrentLinkedQueue[Integer]

  private def ev(kind: String) = plugin.event(kind)

  /** Every callback runs under a [[Guard]], so a failure here is reported once, not on each event. */
  private def guarded(body: => Unit): Unit = Guard.run("TRListener") {
    dropCleaned()
    body
  }

  /** Spark removed `shuffle` (no job can read it again): forget it at the next event, on the bus's thread. */
  def shuffleCleaned(shuffle: Int): Unit = cleaned.add(shuffle)

  /** Stages and shuffles this listener keeps: bounded by what Spark keeps, in an application that runs for days. */
  def tracked: Int = shuffleOfStage.size + consumed.size

  private def dropCleaned(): Unit = if (!cleaned.isEmpty) {
    val gone = Iterator.continually(cleaned.poll()).takeWhile(_ != null).map(_.intValue).toSet
    shuffleOfStage.filterInPlace((_, shuffle) => !gone(shuffle))
    gone.foreach { shuffle =>
      consumed.remove(shuffle)
      readers.remove(shuffle)
      sqlShuffles.remove(shuffle)
    }
  }

  override def onBlockManagerAdded(added: SparkListenerBlockManagerAdded): Unit = guarded {
    val id = added.blockManagerId
    if (!id.isDriver && id.executorId != "fallback") plugin.executorAdded(id.executorId, id)
  }

  override def onExecutorAdded(added: SparkListenerExecutorAdded): Unit = guarded {
    val pool = plugin.pools.added(added.executorId, added.executorInfo.executorHost, added.executorInfo.totalCores)
    plugin.obs.post(TRExecutorStarted(added.time, added.executorId, added.executorInfo.executorHost, pool))
  }

  override def onExecutorRemoved(removed: SparkListenerExecutorRemoved): Unit = guarded {
    val reason = if (plugin.wasReleased(removed.executorId)) "released" else TRListener.lossKind(removed.reason)
    if (!plugin.lossReported(removed.executorId)) {
      plugin.emit(ev("ExecutorLost").put("executor_id", removed.executorId).put("reason", reason))
    }
    plugin.obs.post(TRExecutorEnded(removed.time, removed.executorId, reason))
    plugin.outputsLost(removed.executorId, "executor lost", dead = true)
    plugin.pools.removed(removed.executorId)
  }

  override def onJobStart(job: SparkListenerJobStart): Unit = guarded {
    plugin.jobStarted(job.jobId)
    for (s <- job.stageInfos; shuffle <- s.shuffleDepId if shuffleOfStage.put(s.stageId, shuffle).isEmpty) {
      plugin.obs.post(TRMapStage(job.time, s.stageId, shuffle))
    }
    val reads = for (s <- job.stageInfos; parent <- s.parentIds; shuffle <- shuffleOfStage.get(parent))
      yield (shuffle, s.stageId)
    reads.foreach { case (shuffle, stage) => readers.getOrElseUpdate(shuffle, mutable.Set.empty) += stage }
    val execution = Option(job.properties).flatMap(p => Option(p.getProperty("spark.sql.execution.id"))).map(_.toLong)
    // A plain job's shuffles are consumed when the stages that read them end, or the job does.
    // A SQL query's are consumed only when the query ends: adaptive execution runs each query
    // stage as a job of its own, and a later job can read a shuffle again (a reused exchange),
    // so "its readers ended" would come too early and take outputs still needed for consumed.
    shufflesOfJob(job.jobId) = if (execution.isDefined) Seq.empty else reads.map(_._1).distinct
    for (id <- execution) {
      val written = job.stageInfos.flatMap(_.shuffleDepId)
      shufflesOfExecution.getOrElseUpdate(id, mutable.ArrayBuffer.empty[Int]) ++= written
      sqlShuffles ++= written.filterNot(consumed)
    }
    // The whole graph: Spark submits a stage only when its parents' outputs exist, so this is the
    // engine's only way to know who will read a shuffle still being written (its need horizon).
    val node = ev("JobSubmitted").put("job_id", job.jobId)
    execution match {
      case Some(id) => node.put("sql_execution", id)
      case None => node.putNull("sql_execution")
    }
    val (ids, tasks, shuffles, parents) =
      (node.putArray("stage_ids"), node.putArray("num_tasks"), node.putArray("shuffle_ids"), node.putArray("parents"))
    job.stageInfos.foreach { s =>
      ids.add(s.stageId)
      tasks.add(s.numTasks)
      s.shuffleDepId match {
        case Some(id) => shuffles.add(id)
        case None => shuffles.addNull()
      }
      val ps = parents.addArray()
      s.parentIds.foreach(p => ps.add(p))
    }
    plugin.emit(node)
  }

  override def onStageSubmitted(submitted: SparkListenerStageSubmitted): Unit = guarded {
    val s = submitted.stageInfo
    val node = ev("StageSubmitted").put("stage_id", s.stageId).put("num_tasks", s.numTasks)
      .put("attempt", s.attemptNumber()).put("name", s.name)
    val parents = node.putArray("parent_stage_ids")
    s.parentIds.foreach(p => parents.add(p))
    val parentShuffles = node.putArray("parent_shuffle_ids")
    s.parentIds.flatMap(shuffleOfStage.get).foreach(p => parentShuffles.add(p))
    s.shuffleDepId match {
      case Some(id) => node.put("shuffle_id", id)
      case None => node.putNull("shuffle_id")
    }
    plugin.emit(node)
  }

  override def onTaskStart(start: SparkListenerTaskStart): Unit = guarded(plugin.emit(
    ev("TaskStarted").put("stage_id", start.stageId).put("partition", start.taskInfo.partitionId)
      .put("executor_id", start.taskInfo.executorId).put("attempt", start.taskInfo.attemptNumber)
      .put("speculative", start.taskInfo.speculative)))

  override def onTaskEnd(end: SparkListenerTaskEnd): Unit = guarded {
    val info = end.taskInfo
    val shuffle = shuffleOfStage.get(end.stageId)
    // Spark's map id is the task attempt id (the old fetch protocol, whose ids are partitions, is refused at start-up).
    val ignored = end.reason == Success && shuffle.exists(id => !plugin.awaitRegistered(id, info.partitionId, info.taskId))
    val success = end.reason == Success && !ignored
    val mapId = shuffle.filter(_ => success).map(_ => info.taskId)
    val node = ev("TaskEnded").put("stage_id", end.stageId).put("partition", info.partitionId)
      .put("executor_id", info.executorId).put("duration", info.duration / 1000.0).put("successful", success)
      .put("attempt", info.attemptNumber).put("reason", if (ignored) "ignored" else TRListener.taskEndKind(end.reason))
    Option(end.taskMetrics).foreach { m =>
      node.put("input_bytes", m.inputMetrics.bytesRead)
        .put("shuffle_read_bytes", m.shuffleReadMetrics.totalBytesRead)
        .put("shuffle_read_local_bytes", m.shuffleReadMetrics.localBytesRead)
        .put("shuffle_write_bytes", m.shuffleWriteMetrics.bytesWritten)
    }
    shuffle match {
      case Some(id) => node.put("shuffle_id", id)
      case None => node.putNull("shuffle_id")
    }
    mapId match {
      case Some(id) => node.put("map_id", id)
      case None => node.putNull("map_id")
    }
    // In the ledger before the engine hears of it: its answer may be a Backup of this output.
    for (id <- shuffle; m <- mapId) {
      val bytes = Option(end.taskMetrics).map(_.shuffleWriteMetrics.bytesWritten).getOrElse(0L)
      plugin.mapOutputCreated(new OutputRecord(id, info.partitionId, m, info.executorId, bytes))
    }
    plugin.emit(node)
    end.reason match {
      case f: FetchFailed if f.bmAddress != null => plugin.fetchFailed(f, info.executorId, wait = false)
      case _ =>
    }
  }

  override def onStageCompleted(completed: SparkListenerStageCompleted): Unit = guarded {
    val s = completed.stageInfo
    val failed = s.failureReason.isDefined
    plugin.emit(ev("StageCompleted").put("stage_id", s.stageId).put("attempt", s.attemptNumber()).put("failed", failed))
    if (!failed) for (parent <- s.parentIds; shuffle <- shuffleOfStage.get(parent)) {
      readers.get(shuffle).foreach { stages =>
        stages -= s.stageId
        if (stages.isEmpty && !sqlShuffles(shuffle)) markConsumed(shuffle)
      }
    }
  }

  override def onJobEnd(end: SparkListenerJobEnd): Unit = guarded {
    plugin.jobEnded(end.jobId)
    shufflesOfJob.remove(end.jobId).foreach(_.foreach(markConsumed))
    plugin.emit(ev("JobEnded").put("job_id", end.jobId).put("succeeded", end.jobResult == JobSucceeded))
  }

  override def onOtherEvent(event: SparkListenerEvent): Unit = guarded(event match {
    case end: SparkListenerSQLExecutionEnd =>
      // Newest first: a shuffle is consumed after the shuffles its readers write.
      shufflesOfExecution.remove(end.executionId).foreach(_.distinct.reverseIterator.foreach(markConsumed))
    case _ =>
  })

  private def markConsumed(shuffle: Int): Unit = if (consumed.add(shuffle)) {
    readers.remove(shuffle)
    sqlShuffles.remove(shuffle)
    plugin.emit(ev("ShuffleConsumed").put("shuffle_id", shuffle))
  }
}

object TRListener {
  /**
   * Spark's loss messages for an executor the driver itself removed: `ExecutorKilled` (dynamic
   * allocation's scale-down, or the user's `SparkContext.killExecutors`) and a decommissioning
   * started by dynamic allocation (`ExecutorAllocationManager`'s "spark scale down", with
   * `spark.decommission.enabled`). Neither is an eviction.
   */
  val RemovedByDriver: Seq[String] = Seq(ExecutorKilled.message, "Executor decommission: spark scale down")

  /**
   * The engine's ExecutorLost reason from Spark's loss message (see [[TRTaskScheduler.asEviction]]).
   * While the driver's JVM shuts down (an application that ends without `spark.stop()`), a
   * cluster in that JVM stops its executors with SIGTERM: that is the application's end ("app",
   * a censored lifetime), not an eviction.
   */
  def lossKind(reason: String, driverShuttingDown: Boolean = ShutdownHookManager.inShutdown()): String = {
    val exit = """exited with code (\d+)""".r.findFirstMatchIn(reason).map(_.group(1).toInt)
    if (driverShuttingDown) "app"
    else if (reason.contains("trspark") && reason.contains("eviction")) "evicted"
    else if (RemovedByDriver.exists(reason.startsWith)) "removed"
    else if (reason.toLowerCase(java.util.Locale.ROOT).contains("decommission")) "decommissioned"
    else if (exit.exists(_ >= 128) || reason.contains("disassociated") || reason.contains("Remote RPC client")) "evicted"
    else if (reason.contains("killed by driver") || reason.contains("Executor killed")) "killed"
    else "app"
  }

  def taskEndKind(reason: Any): String = reason match {
    case Success => "success"
    case _: FetchFailed => "fetch_failed"
    case _: ExecutorLostFailure => "executor_lost"
    case _: TaskKilled => "killed"
    case _: ExceptionFailure => "exception"
    case _ => "exception"
  }
}
