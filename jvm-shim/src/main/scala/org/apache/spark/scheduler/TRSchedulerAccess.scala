package org.apache.spark.scheduler

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

/**
 * The members of Spark's scheduler that trspark's task duplication and hinted placement need and that are
 * `private[scheduler]`: this object sits in Spark's package (inside the trspark jar) for that
 * reason only; everything else of trspark lives in `org.apache.spark.trspark`.
 *
 * A duplicate is launched the way Spark launches a speculative attempt
 * (`TaskSetManager.prepareLaunchingTask(..., speculative = true, ...)`), but on the executor the
 * policy engine chose: Spark's own speculation never puts a copy on a host that already runs an
 * attempt, and all executors of `local-trcluster` share one host. When one attempt succeeds,
 * Spark kills the others ("another attempt succeeded").
 */
private[spark] object TRSchedulerAccess {
  // TaskSchedulerImpl.addRunningTask is private: it records tid -> task set / executor, as Spark
  // does for every task it launches (status updates and executor loss look tasks up there).
  private lazy val addRunningTask = {
    val m = classOf[TaskSchedulerImpl].getDeclaredMethod("addRunningTask", java.lang.Long.TYPE,
      classOf[String], classOf[TaskSetManager])
    m.setAccessible(true)
    m
  }

  /** The active (non-zombie) task set of `stageId` and the index of its task for `partition`. */
  def runningTask(sched: TaskSchedulerImpl, stageId: Int, partition: Int): Option[(TaskSetManager, Int)] =
    // Not rootPool's queue: it lists only task sets with tasks still to launch.
    sched.taskIdToTaskSetManager.values.asScala.toSeq.distinct.iterator
      .filter(ts => ts.stageId == stageId && !ts.isZombie)
      .map(ts => (ts, ts.taskSet.tasks.indexWhere(_.partitionId == partition)))
      .find { case (ts, index) => index >= 0 && !ts.successful(index) && ts.copiesRunning(index) >= 1 }

  /**
   * Launch a copy of task `index` of `manager` on `execId` (marked speculative). None -- and no
   * change -- unless exactly one attempt runs, none of them on `execId`, and the task set is a
   * plain one (a barrier stage's tasks cannot be duplicated). Call with the scheduler's lock held.
   */
  def launchCopy(sched: TaskSchedulerImpl, manager: TaskSetManager, index: Int, execId: String,
      host: String): Option[TaskDescription] = {
    val attempts = manager.taskAttempts(index)
    val ok = !manager.isZombie && !manager.isBarrier && !manager.successful(index) &&
      manager.copiesRunning(index) == 1 && !attempts.exists(a => a.running && a.executorId == execId)
    if (!ok) return None
    // Look the private method up before the task set records an attempt: once it has, the
    // scheduler must know the task too, or its status updates would be dropped.
    val register = try addRunningTask catch { case NonFatal(_) => return None }
    val task = manager.prepareLaunchingTask(execId, host, index, TaskLocality.NO_PREF, true,
      sched.CPUS_PER_TASK, Map.empty, System.currentTimeMillis())
    register.invoke(sched, java.lang.Long.valueOf(task.taskId), execId, manager)
    Some(task)
  }

  /** Has `manager` a task with no attempt running that has not succeeded (one to start)? */
  def hasPending(manager: TaskSetManager): Boolean =
    !manager.isZombie && manager.pendingTasks.all.exists(i => manager.copiesRunning(i) == 0 && !manager.successful(i))

  /** The executor task attempt `tid` of `manager` ran on. */
  def executorOf(manager: TaskSetManager, tid: Long): Option[String] = manager.taskInfos.get(tid).map(_.executorId)

  /** Task attempt ids of `index` of `manager` running on `execId`. */
  def attemptsOn(manager: TaskSetManager, index: Int, execId: String): Seq[Long] =
    manager.taskAttempts(index).filter(a => a.running && a.executorId == execId).map(_.taskId)
}
