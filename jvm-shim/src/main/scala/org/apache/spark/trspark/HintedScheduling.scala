package org.apache.spark.trspark

import scala.collection.mutable
import scala.collection.mutable.ArrayBuffer

import org.apache.spark.scheduler.{Pool, SchedulingMode, TaskDescription, TaskSchedulerImpl, TaskSetManager, WorkerOffer}

/**
 * TR-Scheduling inside Spark's task scheduler (SKETCH: compiled, not yet wired or tested live).
 * Mix into the scheduler the [[TRClusterManager]] creates:
 * {{{
 *   class TRTaskScheduler(sc: SparkContext) extends TaskSchedulerImpl(sc) with HintedScheduling
 * }}}
 * and hand it the engine's hints with [[setHints]]. Two rules of [[HintPlacement]]:
 *
 *  1. Stage order: in FIFO mode the task sets are offered resources in `orderStages` order
 *     (through an overriding `rootPool` whose `getSortedTaskSetQueue` reorders Spark's queue).
 *     FAIR mode keeps the user's pools and their order.
 *  2. The γ rule: offers of executors listed in `maxTaskSeconds` are made *after* the others, one
 *     executor at a time, and each sees only the task sets it may take by
 *     [[HintPlacement.mayStartNow]] -- a task set it forbids is held back while an executor that
 *     allows it still has a free slot after this round; Spark's next revive offers it again.
 *
 * Offer rounds with a barrier task set, or with no restricted executor, go to Spark unchanged
 * (a barrier stage needs all its slots in one round).
 */
trait HintedScheduling extends TaskSchedulerImpl {
  @volatile private var currentHints: SchedulingHints = SchedulingHints.Empty
  // Set only by the thread inside resourceOffers, so other readers of rootPool never see a filter.
  private val offerFilter = new ThreadLocal[TaskSetManager => Boolean]

  def hints: SchedulingHints = currentHints

  /** Replace the hints (each engine `SchedulingHints` replaces the previous ones). */
  def setHints(hints: SchedulingHints): Unit = currentHints = hints

  override val rootPool: Pool = new HintedScheduling.OrderedPool(schedulingMode, arrange)

  // Inside Spark's offer round: on an internal error, Spark's own queue.
  private def arrange(queue: ArrayBuffer[TaskSetManager]): ArrayBuffer[TaskSetManager] =
    Guard.orElse("HintedScheduling.arrange", queue)(arranged(queue))

  private def arranged(queue: ArrayBuffer[TaskSetManager]): ArrayBuffer[TaskSetManager] = {
    val h = currentHints
    val ordered = if (h.stageOrder.isEmpty || schedulingMode != SchedulingMode.FIFO) queue else {
      val position = HintPlacement.orderStages(queue.map(_.stageId).distinct.toSeq, h).zipWithIndex.toMap
      queue.sortBy(ts => position(ts.stageId)) // stable: attempts of a stage keep Spark's order
    }
    Option(offerFilter.get()).fold(ordered)(keep => ordered.filter(keep))
  }

  override def resourceOffers(offers: IndexedSeq[WorkerOffer],
      isAllFreeResources: Boolean): Seq[Seq[TaskDescription]] = synchronized {
    val h = currentHints
    // On an internal error no offer is limited: Spark's own round.
    val (limited, unlimited) = Guard.orElse("HintedScheduling.resourceOffers", (IndexedSeq.empty[WorkerOffer], offers)) {
      offers.partition(o => h.maxTaskSeconds.contains(o.executorId) || h.drain.contains(o.executorId))
    }
    val barrier = rootPool.getSortedTaskSetQueue.exists(_.taskSet.tasks.headOption.exists(_.isBarrier))
    if (limited.isEmpty || barrier) super.resourceOffers(offers, isAllFreeResources)
    else {
      // Sub-rounds are partial offers, like the backend's single-executor makeOffers(executorId).
      val first = super.resourceOffers(unlimited, isAllFreeResources = false)
      val free = mutable.Map.empty[String, BigDecimal]
      def record(round: IndexedSeq[WorkerOffer], launched: Seq[Seq[TaskDescription]]): Unit = {
        val used = launched.flatten.groupMapReduce(_.executorId)(_.cpus)(_ + _)
        round.foreach(o => free(o.executorId) = o.cores - used.getOrElse(o.executorId, BigDecimal(0)))
      }
      record(unlimited, first)
      // Safer (higher limit) executors pick first among the restricted ones.
      // Draining executors (no limit; never allowed) come last.
      val rest = limited.sortBy(o => -h.maxTaskSeconds.getOrElse(o.executorId, Double.NegativeInfinity)).map { offer =>
        val withSlot = free.collect { case (e, c) if c >= CPUS_PER_TASK => e }
        offerFilter.set(ts => Guard.orElse("HintedScheduling.mayStartNow", true) {
          HintPlacement.mayStartNow(offer.executorId, ts.stageId, withSlot, h)
        })
        val launched = try super.resourceOffers(IndexedSeq(offer), isAllFreeResources = false)
          finally offerFilter.remove()
        record(IndexedSeq(offer), launched)
        launched
      }
      first ++ rest.flatten
    }
  }
}

object HintedScheduling {
  /** The root pool with its task-set queue passed through `arrange` (order, then filter). */
  private[trspark] class OrderedPool(mode: SchedulingMode.SchedulingMode,
      arrange: ArrayBuffer[TaskSetManager] => ArrayBuffer[TaskSetManager]) extends Pool("", mode, 0, 0) {
    override def getSortedTaskSetQueue: ArrayBuffer[TaskSetManager] = arrange(super.getSortedTaskSetQueue)
  }
}
