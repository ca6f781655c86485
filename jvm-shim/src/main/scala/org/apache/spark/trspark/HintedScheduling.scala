package org.apache.spark.trspark

import scala.collection.mutable
import scala.collection.mutable.ArrayBuffer

import org.apache.spark.resource.ResourceProfile
import org.apache.spark.scheduler.{Pool, SchedulingMode, TaskDescription, TaskSchedulerImpl, TaskSetManager,
  TRSchedulerAccess, WorkerOffer}
import org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend

/**
 * TR-Scheduling inside Spark's task scheduler: applies the engine's [[SchedulingHints]] with
 * [[HintPlacement]], deciding nothing itself. Mixed into the scheduler the [[TRClusterManager]]
 * creates; the driver plugin hands it each new hint set with [[setHints]].
 *
 *  1. Stage order: in FIFO mode the task sets are offered resources in `orderStages` order
 *     (through an overriding `rootPool` whose `getSortedTaskSetQueue` reorders Spark's queue).
 *     FAIR mode keeps the user's pools and their order.
 *  2. Placement: when the hints restrict an offered executor for a queued stage, the offers are
 *     cut into one-core slots and [[HintPlacement.place]] runs its passes; each slot is offered to
 *     Spark alone while a thread-local filter shows only the task sets the rule admits there, so
 *     Spark's own locality and delay scheduling still choose the task.
 *  3. Released executors: an executor the engine released ([[exclude]]) is offered to no task set.
 *  4. Default parallelism: the cores of drained executors do not count ([[defaultParallelism]]).
 *
 * Spark's default offers go unchanged when no hints restrict an offered executor for a queued
 * stage (no hints, or hints about stages and executors no longer there), and for rounds with a
 * barrier task set (it needs all its slots in one round) or offers with custom resources or
 * profiles (a one-core slot would misstate them).
 */
trait HintedScheduling extends TaskSchedulerImpl {
  @volatile private var currentHints: SchedulingHints = SchedulingHints.Empty
  // Set only by the thread inside resourceOffers, so other readers of rootPool never see a filter.
  private val offerFilter = new ThreadLocal[TaskSetManager => Boolean]

  // Executors the engine released. Spark stops offering one once its kill request is registered,
  // which happens on another thread; a task started there in between would wait for the loss to
  // be noticed, seconds after the executor's deadline.
  private val leaving = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  def hints: SchedulingHints = currentHints

  /** No task starts on `executorId` from now on (the engine released it; executor ids are never reused). */
  def exclude(executorId: String): Unit = leaving.add(executorId)

  /** Whether `executorId` may be offered tasks: not released, not drained by the hints. */
  def takesTasks(executorId: String): Boolean = !leaving.contains(executorId) && !currentHints.drain.contains(executorId)

  /** Replace the hints (each engine `SchedulingHints` replaces the previous ones). */
  def setHints(hints: SchedulingHints): Unit = currentHints = hints

  override val rootPool: Pool = new HintedScheduling.OrderedPool(schedulingMode, arrange)

  /**
   * Spark's default parallelism without the cores of live executors the hints drain: no new task
   * starts there, so a stage planned now (adaptive execution coalesces to this many partitions)
   * would leave their share of partitions for a second wave. Never below Spark's floor of 2; a
   * `spark.default.parallelism` the user set is kept.
   */
  override def defaultParallelism(): Int = {
    val spark = super.defaultParallelism()
    if (sc.conf.contains("spark.default.parallelism")) spark
    else Guard.orElse("HintedScheduling.defaultParallelism", spark) {
      sc.schedulerBackend match {
        case backend: CoarseGrainedSchedulerBackend =>
          val cores = currentHints.drain.toSeq.filter(backend.isExecutorActive)
            .flatMap(id => scala.util.Try(sc.statusStore.executorSummary(id).totalCores).toOption).sum
          if (cores == 0) spark else math.max(spark - cores, 2)
        case _ => spark
      }
    }
  }

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

  override def resourceOffers(allOffers: IndexedSeq[WorkerOffer],
      isAllFreeResources: Boolean): Seq[Seq[TaskDescription]] = synchronized {
    val offers = if (leaving.isEmpty) allOffers else allOffers.filterNot(o => leaving.contains(o.executorId))
    val h = currentHints
    val queue = rootPool.getSortedTaskSetQueue
    val stages = queue.map(_.stageId).distinct.toSeq
    // On an internal error the hints restrict nothing: Spark's own round.
    val hinted = Guard.orElse("HintedScheduling.resourceOffers", false) {
      val plain = offers.forall(o => o.resources.resourceAddressAmount.isEmpty &&
        o.resourceProfileId == ResourceProfile.DEFAULT_RESOURCE_PROFILE_ID)
      plain && !queue.exists(_.taskSet.tasks.headOption.exists(_.isBarrier)) &&
        offers.exists(o => h.restricts(o.executorId, stages))
    }
    if (hinted) placeHinted(offers, queue.toSeq, stages, h) else super.resourceOffers(offers, isAllFreeResources)
  }

  /** [[HintPlacement.place]] over one-core slots of `offers`, Spark launching each slot's task. */
  private def placeHinted(offers: IndexedSeq[WorkerOffer], queue: Seq[TaskSetManager], order: Seq[Int],
      h: SchedulingHints): Seq[Seq[TaskDescription]] = {
    val launched = ArrayBuffer.empty[Seq[TaskDescription]]
    val slots = mutable.ArrayDeque.from(offers.flatMap { o =>
      Seq.fill((o.cores / CPUS_PER_TASK).toInt)(o.copy(cores = CPUS_PER_TASK))
    })
    val byStage = queue.groupBy(_.stageId)
    val driver = new HintPlacement.Driver[WorkerOffer] {
      def executor(slot: WorkerOffer): String = slot.executorId
      def usable(slot: WorkerOffer): Boolean = true
      def pending(stageId: Int): Boolean = byStage.getOrElse(stageId, Nil).exists(TRSchedulerAccess.hasPending)
      def running(stageId: Int): Boolean = byStage.getOrElse(stageId, Nil).exists(_.runningTasks > 0)
      def start(slot: WorkerOffer, stages: Seq[Int]): Boolean = {
        val tasks = offerSlot(slot, stages.toSet)
        launched += tasks.flatten
        tasks.exists(_.nonEmpty)
      }
    }
    // An internal error mid-way keeps the tasks already launched; the next round is Spark's own.
    Guard.run("HintedScheduling.resourceOffers")(HintPlacement.place(slots, order, h, driver))
    launched.toSeq
  }

  /** One slot offered to Spark alone, seeing only the task sets of `stages` (a partial offer, like makeOffers(executorId)). */
  private def offerSlot(slot: WorkerOffer, stages: Set[Int]): Seq[Seq[TaskDescription]] = {
    offerFilter.set(ts => stages.contains(ts.stageId))
    try super.resourceOffers(IndexedSeq(slot), isAllFreeResources = false)
    finally offerFilter.remove()
  }
}

object HintedScheduling {
  /** The root pool with its task-set queue passed through `arrange` (order, then filter). */
  private[trspark] class OrderedPool(mode: SchedulingMode.SchedulingMode,
      arrange: ArrayBuffer[TaskSetManager] => ArrayBuffer[TaskSetManager]) extends Pool("", mode, 0, 0) {
    override def getSortedTaskSetQueue: ArrayBuffer[TaskSetManager] = arrange(super.getSortedTaskSetQueue)
  }
}
