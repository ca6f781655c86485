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
    wanted((stageId, partition)) = executorId
  }

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
    val launched = super.resourceOffers(offers, isAllFreeResources)
    if (wanted.isEmpty) launched else withCopies(offers, launched)
  }

  private def withCopies(offers: IndexedSeq[WorkerOffer],
      launched: Seq[Seq[TaskDescription]]): Seq[Seq[TaskDescription]] = {
    val out = launched.map(_.toBuffer).toIndexedSeq
    val free = offers.indices.map(i => offers(i).cores - out(i).map(_.cpus).foldLeft(BigDecimal(0))(_ + _)).toArray
    for (((stageId, partition), executorId) <- wanted.toSeq) {
      TRSchedulerAccess.runningTask(this, stageId, partition) match {
        case None => wanted.remove((stageId, partition)) // finished, failed or never ran
        case Some((manager, index)) =>
          val i = offers.indexWhere(_.executorId == executorId)
          if (i >= 0 && free(i) >= CPUS_PER_TASK) {
            wanted.remove((stageId, partition))
            TRSchedulerAccess.launchCopy(this, manager, index, executorId, offers(i).host).foreach { task =>
              out(i) += task
              free(i) -= task.cpus
              logInfo(s"trspark: duplicate of stage $stageId partition $partition (TID ${task.taskId}) on executor $executorId")
              TRDriverPlugin.active.foreach(_.count("duplicates_launched"))
            }
          }
      }
    }
    out.map(_.toSeq)
  }
}
