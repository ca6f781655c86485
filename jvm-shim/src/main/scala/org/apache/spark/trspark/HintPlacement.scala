package org.apache.spark.trspark

import scala.collection.mutable
import scala.jdk.CollectionConverters._

/**
 * TR-Scheduling's placement rule (paper Algorithm 1), the line-for-line mirror of
 * `trspark/engine/placement.py` (the reference; a parity test runs random states through both).
 * The engine decides; this only applies its hints:
 *
 *  1. Stage order: runnable stages listed in `stageOrder` come first, in that order (a stage
 *     listed twice counts at its last position, as in the Python dict); the others follow by
 *     stage id.
 *  2. Free slots are offered in passes; in each a slot takes one task of the first stage in that
 *     order with a pending task that its executor's tier admits: [[Allowed]] executors first,
 *     then [[Fallback]] ones, then [[Starving]] (forbidden) ones for a stage with pending tasks
 *     and none running. A draining executor ([[Never]]) takes nothing.
 */
object HintPlacement {
  val Allowed = 0
  val Fallback = 1
  val Starving = 2
  val Never = 3

  /** Runnable stage ids in the order tasks should be taken from them. */
  def orderStages(runnable: Seq[Int], hints: SchedulingHints): Seq[Int] = {
    val stages = runnable.sorted
    if (hints.stageOrder.isEmpty) stages
    else {
      val rank = hints.stageOrder.zipWithIndex.toMap // last position wins, as in Python's dict
      stages.sortBy(s => (rank.getOrElse(s, rank.size), s))
    }
  }

  /** The pass from which `executorId` may take a task of `stageId` ([[Never]]: draining). */
  def tier(executorId: String, stageId: Int, hints: SchedulingHints): Int =
    if (hints.drain.contains(executorId)) Never
    else if (hints.forbidden.get(stageId).exists(_.contains(executorId))) Starving
    else if (hints.fallback.get(stageId).exists(_.contains(executorId))) Fallback
    else Allowed

  /** May a task of `stageId` start on `executorId` without any exception? */
  def allowed(executorId: String, stageId: Int, hints: SchedulingHints): Boolean = tier(executorId, stageId, hints) == Allowed

  /** What [[place]] needs from the scheduler that runs the tasks (`placement.Driver`). */
  trait Driver[S] {
    def executor(slot: S): String
    /** Is the slot still free? Unusable slots are dropped. */
    def usable(slot: S): Boolean
    def pending(stageId: Int): Boolean
    def running(stageId: Int): Boolean
    /** Start one task on `slot` from the first of `stages` that takes it; false: none did. */
    def start(slot: S, stages: Seq[Int]): Boolean
  }

  /**
   * Start tasks on the `free` slots (consumed from the left; left holding those still free) from
   * the stages in `order`, in the passes above (`placement.place`).
   */
  def place[S](free: mutable.ArrayDeque[S], order: Seq[Int], hints: SchedulingHints, driver: Driver[S]): Unit = {
    val skipped = pass(free, order, driver, e => s => tier(e, s, hints) == Allowed)
    if (skipped) {
      if (hints.fallback.nonEmpty) pass(free, order, driver, e => s => tier(e, s, hints) <= Fallback)
      val (drained, kept) = free.partition(slot => hints.drain.contains(driver.executor(slot)))
      free.clear()
      free ++= kept
      starvingPass(free, order, hints, driver)
      free ++= drained
    }
  }

  /** Each usable slot takes a task of the first pending stage `admits` accepts (`placement._pass`). */
  private def pass[S](free: mutable.ArrayDeque[S], order: Seq[Int], driver: Driver[S],
      admits: String => Int => Boolean): Boolean = {
    val skipped = mutable.ArrayBuffer.empty[S]
    var idle = false
    while (free.nonEmpty && !idle) {
      val slot = free.removeHead()
      if (driver.usable(slot)) {
        val take = admits(driver.executor(slot))
        val stages = order.filter(s => driver.pending(s) && take(s))
        if (stages.isEmpty || !driver.start(slot, stages)) {
          if (!order.exists(driver.pending)) {
            free.prepend(slot)
            idle = true
          } else skipped += slot
        }
      }
    }
    free.prependAll(skipped)
    skipped.nonEmpty
  }

  /** One task for each stage with pending tasks and none running, on the next usable slots. */
  private def starvingPass[S](free: mutable.ArrayDeque[S], order: Seq[Int], hints: SchedulingHints,
      driver: Driver[S]): Unit = {
    val kept = mutable.ArrayBuffer.empty[S]
    var starving = order.filter(s => driver.pending(s) && !driver.running(s))
    while (free.nonEmpty && starving.nonEmpty) {
      val slot = free.removeHead()
      if (driver.usable(slot)) {
        val executor = driver.executor(slot)
        val stages = starving.filter(s => tier(executor, s, hints) <= Starving)
        if (stages.isEmpty || !driver.start(slot, stages)) kept += slot
      }
      starving = order.filter(s => driver.pending(s) && !driver.running(s))
    }
    free.prependAll(kept)
  }

  /** A [[Driver]] over task counts (`placement.Counts`): the rule on its own. */
  final class Counts(pending: Map[Int, Int], running: Map[Int, Int]) extends Driver[String] {
    private val waiting = mutable.Map.from(pending)
    private val started = mutable.Map.from(running)
    val placed: mutable.ArrayBuffer[(String, Int)] = mutable.ArrayBuffer.empty
    def executor(slot: String): String = slot
    def usable(slot: String): Boolean = true
    def pending(stageId: Int): Boolean = waiting.getOrElse(stageId, 0) > 0
    def running(stageId: Int): Boolean = started.getOrElse(stageId, 0) > 0
    def start(slot: String, stages: Seq[Int]): Boolean = {
      val stage = stages.head
      waiting(stage) -= 1
      started(stage) = started.getOrElse(stage, 0) + 1
      placed += ((slot, stage))
      true
    }
  }

  /** `(executor, stage)` of each task [[place]] starts on `slots` (one executor id per free core). */
  def plan(slots: Seq[String], pending: Map[Int, Int], running: Map[Int, Int], hints: SchedulingHints): Seq[(String, Int)] = {
    val counts = new Counts(pending, running)
    place(mutable.ArrayDeque.from(slots), orderStages((pending.keySet ++ running.keySet).toSeq, hints), hints, counts)
    counts.placed.toSeq
  }

  // Java-friendly forms (py4j tests, Java callers).
  def orderStages(runnable: java.util.List[Integer], hints: SchedulingHints): java.util.List[Integer] =
    orderStages(runnable.asScala.map(_.intValue).toSeq, hints).map(Integer.valueOf).asJava

  /** [[plan]] with Java collections; each placement as "executor:stage". */
  def plan(slots: java.util.List[String], pending: java.util.Map[Integer, Integer],
      running: java.util.Map[Integer, Integer], hints: SchedulingHints): java.util.List[String] = {
    def counts(m: java.util.Map[Integer, Integer]) = m.asScala.map { case (k, v) => (k.intValue, v.intValue) }.toMap
    plan(slots.asScala.toSeq, counts(pending), counts(running), hints).map { case (e, s) => s"$e:$s" }.asJava
  }
}
