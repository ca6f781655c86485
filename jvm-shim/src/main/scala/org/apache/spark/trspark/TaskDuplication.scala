package org.apache.spark.trspark

import scala.collection.mutable

import org.apache.spark.scheduler.{TaskDescription, TaskSchedulerImpl, TRSchedulerAccess, WorkerOffer}

/**
 * Task duplication (TR-Spark §5) inside the trcluster task scheduler: the engine's
 * `DuplicateTask(stage, partition, executor)` asks for a copy of a running task on an idle
 * executor, `KillDuplicate` takes such a copy back.
 *
 * A wanted copy is launched in the next offer round in which its executor has a free slot
 * after Spark placed its own pending tasks (pending work goes first), as a speculative attempt
 * (see [[TRSchedulerAccess.launchCopy]]); Spark kills the other attempt when one succeeds. A
 * request is dropped once it was tried on a free slot, or when its task finished.
 */
trait TaskDuplication extends TaskSchedulerImpl {
  // (stageId, partition) -> executor; guarded by the scheduler's lock (`this`), as Spark's own state.
  private val wanted = mutable.LinkedHashMap.empty[(Int, Int), String]

  /** Ask for a copy of running task (`stageId`, `partition`) on `executorId`. */
  def duplicate(stageId: Int, partition: Int, executorId: String): Unit = synchronized {
    logInfo(s"trspark: copy of stage $stageId partition $partition wanted on executor $executorId")
    wanted((stageId, partition)) = executorId
  }

  /** Whether a copy may start on `executorId`: a scheduler that releases or drains executors says no for those. */
  protected def takesCopies(executorId: String): Boolean = true

  // Set by forgetWanted, applied under the scheduler's lock by the next offer round.
  @volatile private var forgetting = false

  /**
   * Forget every copy asked for and not launched yet (the engine that asked is gone). It takes
   * no lock: the caller may hold the driver plugin's, which an offer round takes inside the
   * scheduler's (to count a launch), so waiting here for the scheduler's could deadlock.
   */
  def forgetWanted(): Unit = forgetting = true

  /** Kill the attempts of (`stageId`, `partition`) running on `executorId`; returns how many. */
  def killDuplicate(stageId: Int, partition: Int, executorId: String): Int = synchronized {
    if (wanted.get((stageId, partition)).contains(executorId)) wanted.remove((stageId, partition))
    val attempts = TRSchedulerAccess.runningTask(this, stageId, partition).toSeq.flatMap {
      case (manager, index) => TRSchedulerAccess.attemptsOn(manager, index, executorId)
    }
    attempts.count(tid => killTaskAttempt(tid, interruptThread = true, "trspark: duplicate no longer wanted"))
  }

  override def resourceOffers(offers: IndexedSeq[WorkerOffer],
      isAllFreeResources: Boolean): Seq[Seq[TaskDescription]] = synchronized {
    if (forgetting) { wanted.clear(); forgetting = false }
    val launched = super.resourceOffers(offers, isAllFreeResources)
    // Copies launched before an internal error are still handed out: Spark counts them as running.
    val copies = mutable.Buffer.empty[TaskDescription]
    Guard.run("TaskDuplication.resourceOffers")(if (wanted.nonEmpty) addCopies(offers, launched, copies))
    if (copies.isEmpty) launched else launched :+ copies.toSeq
  }

  private def addCopies(offers: IndexedSeq[WorkerOffer], launched: Seq[Seq[TaskDescription]],
      copies: mutable.Buffer[TaskDescription]): Unit = {
    // Spark returns the launched tasks grouped in its own (shuffled) offer order: count by executor.
    val free = mutable.Map.empty[String, BigDecimal]
    offers.foreach(o => free(o.executorId) = BigDecimal(0) + o.cores)
    launched.flatten.foreach(t => free(t.executorId) = free.getOrElse(t.executorId, BigDecimal(0)) - t.cpus)
    for (((stageId, partition), executorId) <- wanted.toSeq) {
      TRSchedulerAccess.runningTask(this, stageId, partition) match {
        case None =>
          wanted.remove((stageId, partition)) // finished, failed or never ran
          logInfo(s"trspark: duplicate of stage $stageId partition $partition dropped: the task is not running")
        case Some(_) if !takesCopies(executorId) =>
          // Released or drained since the copy was asked for: it would die with the executor.
          wanted.remove((stageId, partition))
          logInfo(s"trspark: duplicate of stage $stageId partition $partition dropped: executor $executorId is leaving")
        case Some((manager, index)) =>
          val host = offers.find(_.executorId == executorId).map(_.host)
          if (host.isDefined && free.getOrElse(executorId, BigDecimal(0)) >= CPUS_PER_TASK) {
            wanted.remove((stageId, partition))
            TRSchedulerAccess.launchCopy(this, manager, index, executorId, host.get) match {
              case Some(task) =>
                copies += task
                free(executorId) -= task.cpus
                logInfo(s"trspark: duplicate of stage $stageId partition $partition (TID ${task.taskId}) on executor $executorId")
                TRDriverPlugin.active.foreach(_.count("duplicates_launched"))
              case None =>
                logInfo(s"trspark: duplicate of stage $stageId partition $partition on executor $executorId not " +
                  "launched (not exactly one attempt running, one already there, or a barrier stage)")
            }
          }
      }
    }
  }
}
