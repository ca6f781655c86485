package org.apache.spark.trspark

import java.util.{Collections, Map => JMap}
import java.util.concurrent.{Executors, TimeUnit}

import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.node.ObjectNode

import org.apache.spark.{CleanerListener, MapOutputTrackerMaster, SparkContext, Success, TaskState}
import org.apache.spark.api.plugin.PluginContext
import org.apache.spark.deploy.SparkHadoopUtil
import org.apache.spark.executor.ExecutorMetrics
import org.apache.spark.scheduler.{MapStatus, SparkListenerTaskEnd, TaskInfo, TaskLocality}
import org.apache.spark.storage.BlockManagerId

/**
 * The driver half of trspark: owns the [[BackupLedger]], hands backup work to executors
 * (they poll with [[PollWork]]), re-points lost map outputs to their copies, and talks to the
 * policy engine through the [[EngineBridge]] -- or decides itself in the built-in modes:
 * `never` (no backups) and `always` (every map output to the remote store, or to a peer when
 * `spark.trspark.backup.targets=local`). When the engine fails, it switches to `always`.
 *
 * This file holds the life cycle, the messages from executors, the events to the engine and the
 * fallback; the copy bookkeeping is in [[BackupFlow]], how copies end in [[BackupOutcomes]], the
 * re-pointing of lost outputs in [[OutputLoss]], the engine's commands in [[EngineCommands]], the
 * shared state in [[DriverBase]].
 */
class TRDriverPlugin extends EngineCommands {
  @volatile private var bridge: Option[EngineBridge] = None
  private var confCheck: Option[ConfCheck] = None
  /** The listener recording Spark's events (none when backups are off); the cleaner hands it removed shuffles. */
  @volatile private[trspark] var listener: Option[TRListener] = None
  private val clock = Executors.newSingleThreadScheduledExecutor(Daemon.factory("trspark-tick"))
  private var lastTime = 0.0
  /** Each executor's pool; emits its `ExecutorAdded` (from the listener and the executors' reports). */
  lazy val pools = new ExecutorPools(sc.conf.get(TRConf.Prefix + "pool", "default").trim,
    (id, host, cores, pool, registered) => {
      val added = event("ExecutorAdded").put("executor_id", id).put("host", host).put("cores", cores).put("pool", pool)
      registered.foreach(added.put("vm_started", _))
      emit(added)
      added.path("time").asDouble()
    })
  /** Metrics, event-log records and the UI tab (TRMetrics.scala). */
  val obs = new TRObserver(this)

  /** True when `executorId` left because the engine released it (see the `ReleaseExecutor` command). */
  def wasReleased(executorId: String): Boolean = released.contains(executorId)

  /** True when the engine was told of `executorId`'s loss already, at its release. */
  def lossReported(executorId: String): Boolean = lossSent.contains(executorId)

  // ------------------------------------------------------------------------------------------
  // Plugin life cycle
  // ------------------------------------------------------------------------------------------

  override def init(context: SparkContext, pluginContext: PluginContext): JMap[String, String] = {
    sc = context
    conf = TRConf(sc.conf)
    NoticeSettings(sc.conf) // validate spark.trspark.notice.* at start-up, not on each executor
    // Executors read re-pointed outputs through Spark's fallback storage, so it must point at
    // our remote root. A root the user already set wins (backups go there).
    val usersFallback = sc.conf.getOption(TRConf.FallbackPathKey)
    usersFallback match {
      case Some(path) => conf = conf.copy(remotePath = TRConf.qualified(sc.conf, path.stripSuffix("/")))
      case None => sc.conf.set(TRConf.FallbackPathKey, conf.remotePath + "/")
    }
    sc.conf.set(TRConf.Prefix + "remote.path", conf.remotePath)
    if (conf.backupsEnabled) {
      // A path the user gave Spark's fallback storage is reported under that key.
      TRConf.checkRemoteFileSystem(sc.conf, conf.remotePath, usersFallback.fold(TRConf.Prefix + "remote.path")(_ => TRConf.FallbackPathKey))
      TRConf.checkFetchProtocol(sc.conf)
    }
    // Before the settings are checked and handed to the engine: they include the release keys.
    Guard.run("Elastic.configure")(Elastic.configure(sc.conf))
    builtinAlways.set(conf.mode == "always")
    throttle = conf.throttleBytesPerS
    if (conf.backupsEnabled) {
      listener = Some(new TRListener(this, sc))
      listener.foreach(sc.addSparkListener)
    }
    TRDriverPlugin.active = Some(this)
    obs.bind(sc)
    logInfo(s"trspark: mode=${conf.mode} targets=${conf.targets} remote=${conf.remotePath}")
    // Every key and value (and the history store) checked by the Python side, awaited in registerMetrics.
    confCheck = Some(ConfCheck.start(enginePython, settingsJson(None)))
    Collections.emptyMap()
  }

  /** Called once the application id exists (after the task scheduler started). */
  override def registerMetrics(appId: String, pluginContext: PluginContext): Unit = {
    confCheck.foreach(_.await()) // throws on a bad setting: SparkContext creation fails, no job runs
    confCheck = None
    remote = new RemoteBackups(conf.remotePath, appId, SparkHadoopUtil.get.newConfiguration(sc.conf))
    obs.start()
    if (conf.backupsEnabled && conf.usesEngine) {
      bridge = Some(startEngine(appId))
      pools.replay()
    }
    // Created after the plugins' init, before this call; absent with spark.cleaner.referenceTracking=false.
    if (conf.backupsEnabled) sc.cleaner.foreach(_.attachListener(new ShuffleCleanup(this)))
    val period = math.max((conf.periodS * 1000).toLong, 1L) // a period under 1 ms would be 0: refused by the clock
    if (conf.backupsEnabled) clock.scheduleAtFixedRate(() => tick(), period, period, TimeUnit.MILLISECONDS)
  }

  override def receive(message: Any): AnyRef = Guard.orElse[AnyRef]("TRDriverPlugin.receive", noWork(message)) {
    handle(message)
  }

  /** The answer when handling `message` failed: "no work" to a poll, nothing to a one-way message. */
  private def noWork(message: Any): AnyRef = message match {
    case text: String if scala.util.Try(Wire.decode(text)).toOption.exists(_.isInstanceOf[PollWork]) =>
      Wire.encode(Work(Nil, Nil))
    case _ => null
  }

  private def handle(message: Any): AnyRef = message match {
    case text: String => Wire.decode(text) match {
      case PollWork(executorId, capacity) => Wire.encode(poll(executorId, capacity))
      case done: BackupDone =>
        synchronized(running.get(done.executorId).foreach(_ -= done.task))
        backupDone(done); null
      case failed: BackupFailedMsg => copyFailed(failed); null
      case checked: PeerChecked => peerChecked(checked); null
      case notice: TerminationNotice => noticed(notice); null
      case r: RebalanceRecommendation =>
        logInfo(s"trspark: executor ${r.executorId} got an AWS rebalance recommendation")
        emit(event("ExecutorRebalance").put("executor_id", r.executorId).put("since", (r.atEpochMillis - sc.startTime) / 1000.0))
        null
      case report: PoolReport =>
        logInfo(s"trspark: executor ${report.executorId} is in pool ${report.pool} (from ${report.source})")
        pools.report(report.executorId, report.pool)
        obs.post(TRExecutorPool(System.currentTimeMillis(), report.executorId, report.pool, report.source)); "ok"
      case other => logWarning(s"trspark: unexpected message $other"); null
    }
    case other => logWarning(s"trspark: unexpected message $other"); null
  }

  override def shutdown(): Unit = {
    clock.shutdownNow()
    storeWork.shutdownNow()
    restoreChecks.shutdownNow()
    releaser.shutdownNow()
    bridge.foreach(_.stop())
    if (remote != null && conf.backupsEnabled) remote.deleteApp()
    // By the metrics' names (docs/observability.md), then the counters no metric shows.
    val shown = TRMetrics.Counters.map(_._2).toSet
    val extra = synchronized(stats.toSeq.filterNot { case (k, _) => shown(k) })
    logInfo(s"trspark: ${(obs.snapshot ++ extra).map { case (k, v) => s"$k=$v" }.mkString(" ")}")
    TRDriverPlugin.active = None
  }

  // ------------------------------------------------------------------------------------------
  // Events (from the listener, the executors and the clock) -> engine / built-in policy
  // ------------------------------------------------------------------------------------------

  /** An event for the engine; `time` is seconds since the application started, never decreasing. */
  def event(kind: String): ObjectNode = synchronized {
    lastTime = math.max(lastTime, (System.currentTimeMillis() - sc.startTime) / 1000.0)
    Json.obj(kind).put("time", lastTime)
  }

  def emit(event: ObjectNode): Unit = bridge.foreach(b => if (!builtinAlways.get()) b.send(event))

  /** An executor got a termination notice: its lifetime is now known (engine clock: s since app start). */
  private def noticed(n: TerminationNotice): Unit = {
    synchronized(stats("notices") += 1)
    obs.post(TRNotice(System.currentTimeMillis(), n.executorId, n.deadlineEpochMillis, n.source))
    logInfo(s"trspark: executor ${n.executorId} ends at ${java.time.Instant.ofEpochMilli(n.deadlineEpochMillis)} (${n.source})")
    emit(event("ExecutorNotice").put("executor_id", n.executorId)
      .put("deadline", (n.deadlineEpochMillis - sc.startTime) / 1000.0))
  }

  private def tick(): Unit = try {
    bridge.foreach(_.checkLag())
    emit(event("Tick"))
  } catch { case NonFatal(e) => logWarning(s"trspark: tick failed: $e") }

  def executorAdded(executorId: String, bm: BlockManagerId): Unit = synchronized {
    blockManagers(executorId) = bm
  }


  // ------------------------------------------------------------------------------------------
  // The engine
  // ------------------------------------------------------------------------------------------

  /** Every `spark.trspark.*` setting (and the application id, once known) as one JSON object. */
  private def settingsJson(appId: Option[String]): String = {
    val settings = Json.mapper.createObjectNode()
    sc.conf.getAll.filter(_._1.startsWith(TRConf.Prefix)).foreach { case (k, v) => settings.put(k, v) }
    appId.foreach(settings.put("spark.app.id", _))
    Json.mapper.writeValueAsString(settings)
  }

  /** The interpreter for `python -m trspark.*`: spark.trspark.python, else the PySpark driver's. */
  private def enginePython: String =
    Seq(Some(conf.python).filter(_.nonEmpty), sc.conf.getOption("spark.pyspark.driver.python"),
      sc.conf.getOption("spark.pyspark.python"), sys.env.get("PYSPARK_DRIVER_PYTHON"),
      sys.env.get("PYSPARK_PYTHON")).flatten.headOption.getOrElse("python3")

  private def startEngine(appId: String): EngineBridge = {
    val b = new EngineBridge(enginePython, settingsJson(Some(appId)), conf.engineTimeoutS, conf.engineStartTimeoutS,
      conf.engineQueueCapacity,
      node => { obs.command(node); command(node) }, reason => fallBack(s"policy engine unavailable ($reason)", None), obs.acked)
    b.start()
    b
  }

  /**
   * The engine is gone or too slow, or trspark's own code failed: checkpoint every output from now
   * on (the safety net). Returns false, logging nothing, when already doing so or backups are off.
   */
  private def fallBack(cause: String, error: Option[Throwable]): Boolean = {
    val switched = conf.backupsEnabled && builtinAlways.compareAndSet(false, true)
    if (switched) {
      val message = s"trspark: $cause; falling back to always-checkpoint " +
        s"(every map output to ${if (conf.targets == "local") "a peer" else conf.remotePath}) for the rest of this application"
      error.fold(logWarning(message))(logWarning(message, _))
      obs.post(TRFallback(System.currentTimeMillis(), cause))
      synchronized(ledger.all.filter(r => !r.hasCopy && !r.busy).foreach(backupBuiltin))
      // No engine keeps the hints current any more: Spark's own placement from now on, and no
      // duplicate it asked for is launched after all.
      sc.taskScheduler match {
        case hooked: HintedScheduling => hooked.setHints(SchedulingHints.Empty)
        case _ =>
      }
      sc.taskScheduler match {
        case duplicating: TaskDuplication => duplicating.forgetWanted()
        case _ =>
      }
    }
    switched
  }

  private val internalErrors = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /** trspark's code on a path Spark calls failed (see [[Guard]]): one warning per path, then fall back. */
  def internalError(path: String, error: Throwable): Unit = {
    count("internal_errors")
    val cause = s"internal error in $path ($error)"
    if (!internalErrors.add(path)) logDebug(s"trspark: $cause")
    else if (!fallBack(cause, Some(error))) logWarning(s"trspark: $cause; ignored", error)
  }


  // Test hooks (py4j): counters, the current mode, and the built-in policy's knobs.
  def stat(name: String): Long = synchronized(stats.getOrElse(name, 0L))
  /** Apply one engine command given as its JSON line (tests drive commands without an engine). */
  def applyCommand(line: String): Unit = {
    val node = Json.parse(line)
    obs.command(node)
    command(node)
  }
  /** Switch the built-in policy at run time (tests): `never` | `always`, targets, bytes/s cap. */
  def setBuiltin(mode: String, targets: String, throttleBytesPerS: Double): Unit = synchronized {
    require(TRConf.BuiltinModes.contains(mode) && TRConf.Targets.contains(targets), s"$mode/$targets")
    builtinAlways.set(mode == "always")
    conf = conf.copy(targets = targets)
    throttle = throttleBytesPerS
  }
  def fallenBack: Boolean = builtinAlways.get() && conf.mode != "always"
}

/** Spark's ContextCleaner tells the plugin which shuffles it removed (on the cleaner's thread). */
private class ShuffleCleanup(plugin: TRDriverPlugin) extends CleanerListener {
  override def shuffleCleaned(shuffleId: Int): Unit =
    Guard.run("TRDriverPlugin.forgetShuffle") {
      plugin.listener.foreach(_.shuffleCleaned(shuffleId))
      plugin.forgetShuffle(shuffleId)
    }
  override def rddCleaned(rddId: Int): Unit = ()
  override def broadcastCleaned(broadcastId: Long): Unit = ()
  override def accumCleaned(accId: Long): Unit = ()
  override def checkpointCleaned(rddId: Long): Unit = ()
}

object TRDriverPlugin {
  /** The running driver plugin (one SparkContext per JVM), for the scheduler hook and tests. */
  @volatile var active: Option[TRDriverPlugin] = None

  /**
   * True when the tracker has `record` (this very map attempt) on `executorId`, or has just
   * removed it (it sits in `mapStatusesDeleted` and no newer attempt took its place).
   */
  def isOn(tracker: MapOutputTrackerMaster, record: OutputRecord, executorId: String): Boolean =
    isOn(tracker, record.shuffleId, record.mapIndex, record.mapId, executorId)

  def isOn(tracker: MapOutputTrackerMaster, shuffleId: Int, mapIndex: Int, mapId: Long, executorId: String): Boolean =
    liveOn(tracker, shuffleId, mapIndex, mapId, executorId) || tracker.shuffleStatuses.get(shuffleId).exists { status =>
      status.mapStatuses(mapIndex) == null && Option(status.mapStatusesDeleted(mapIndex)).exists(_.mapId == mapId)
    }

  /** True when the tracker has this map attempt registered, on any executor, or has just removed it. */
  def registered(tracker: MapOutputTrackerMaster, shuffleId: Int, mapIndex: Int, mapId: Long): Boolean =
    tracker.shuffleStatuses.get(shuffleId).exists { status =>
      Option(status.mapStatuses(mapIndex)).orElse(Option(status.mapStatusesDeleted(mapIndex))).exists(_.mapId == mapId)
    }

  /**
   * How long (ms) the listener waits for the DAG scheduler to register a successful map task's
   * output. The wait ends as soon as it is registered, so only a success Spark ignores (rare)
   * waits it all; a busy driver (a GC pause, starved cores) must not make a registered output
   * look ignored, for then it is never backed up.
   */
  val RegistrationWaitMs = 500L

  /** True when the tracker has this map attempt registered (not removed) on `executorId`. */
  def liveOn(tracker: MapOutputTrackerMaster, shuffleId: Int, mapIndex: Int, mapId: Long, executorId: String): Boolean =
    liveStatus(tracker, shuffleId, mapIndex).exists(live => live.mapId == mapId && live.location.executorId == executorId)

  /** The status the tracker has registered (not removed) for one map index, of whichever attempt. */
  def liveStatus(tracker: MapOutputTrackerMaster, shuffleId: Int, mapIndex: Int): Option[MapStatus] =
    tracker.shuffleStatuses.get(shuffleId).flatMap(status => Option(status.mapStatuses(mapIndex)))

}

/** py4j entry points for tests and tools (an object without a companion class, so Java sees static methods). */
object TRStatus {
  def stat(name: String): Long = TRDriverPlugin.active.map(_.stat(name)).getOrElse(-1L)
  def isFallenBack: Boolean = TRDriverPlugin.active.exists(_.fallenBack)
  def listenerTracked: Int = TRDriverPlugin.active.flatMap(_.listener).map(_.tracked).getOrElse(-1)
  def applyCommand(line: String): Unit = TRDriverPlugin.active.foreach(_.applyCommand(line))
  def setBuiltin(mode: String, targets: String, throttleBytesPerS: Double): Unit =
    TRDriverPlugin.active.foreach(_.setBuiltin(mode, targets, throttleBytesPerS))

  // py4j cannot list `SparkEnv`'s methods (one names a protobuf class Spark does not ship), so
  // tests reach the map output tracker through these two.
  private def tracker: MapOutputTrackerMaster =
    org.apache.spark.SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]

  /** The tracker's live entry for one map output, "mapId executorId"; "" while Spark has it removed. */
  def mapOutputLocation(shuffleId: Int, mapIndex: Int): String =
    TRDriverPlugin.liveStatus(tracker, shuffleId, mapIndex)
      .map(status => s"${status.mapId} ${status.location.executorId}").getOrElse("")

  /** Point one map output at `executorId`, as Spark does when a peer copy's index lands there. */
  def pointMapOutputAt(shuffleId: Int, mapIndex: Int, executorId: String): Unit =
    for {
      status <- TRDriverPlugin.liveStatus(tracker, shuffleId, mapIndex)
      bm <- org.apache.spark.SparkEnv.get.blockManager.master.getMemoryStatus.keys.find(_.executorId == executorId)
    } tracker.updateMapOutput(shuffleId, status.mapId, bm)

  /**
   * The listener hears that map task `taskId` of `stageId` wrote `partition` on `executorId`, a
   * success the DAG scheduler ignored (as it ignores a task launched before a fetch failure blamed
   * its executor): Spark registered no such output.
   */
  def endIgnoredMapTask(stageId: Int, partition: Int, executorId: String, taskId: Long): Unit = {
    val now = System.currentTimeMillis()
    val info = new TaskInfo(taskId, partition, 0, partition, now - 1000, executorId, "localhost", TaskLocality.ANY, false)
    info.markFinished(TaskState.FINISHED, now)
    for (plugin <- TRDriverPlugin.active; listener <- plugin.listener) {
      listener.onTaskEnd(SparkListenerTaskEnd(stageId, 0, "ShuffleMapTask", Success, info, new ExecutorMetrics, null))
    }
  }

  /** Remove one map output from the tracker, as Spark does when it counts the output lost. */
  def unregisterMapOutput(shuffleId: Int, mapIndex: Int): Unit =
    TRDriverPlugin.liveStatus(tracker, shuffleId, mapIndex)
      .foreach(status => tracker.unregisterMapOutput(shuffleId, mapIndex, status.location))
}
