package org.apache.spark.trspark

import java.util.{Collections, Map => JMap}
import java.util.concurrent.{ConcurrentLinkedQueue, Executors, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.ObjectNode

import org.apache.spark.{MapOutputTrackerMaster, SparkContext, SparkEnv}
import org.apache.spark.api.plugin.{DriverPlugin, PluginContext}
import org.apache.spark.deploy.SparkHadoopUtil
import org.apache.spark.internal.Logging
import org.apache.spark.storage.{BlockManagerId, FallbackStorage}

/**
 * The driver half of trspark: owns the [[BackupLedger]], hands backup work to executors
 * (they poll with [[PollWork]]), re-points lost map outputs to their copies, and talks to the
 * policy engine through the [[EngineBridge]] -- or decides itself in the built-in modes:
 * `never` (no backups) and `always` (every map output to the remote store, or to a peer when
 * `spark.trspark.backup.targets=local`). When the engine fails, it switches to `always`.
 */
class TRDriverPlugin extends DriverPlugin with Logging {
  private var sc: SparkContext = _
  private var conf: TRConf = _
  private var remote: RemoteBackups = _
  private var bridge: Option[EngineBridge] = None
  private var confCheck: Option[ConfCheck] = None
  private val builtinAlways = new AtomicBoolean(false)
  private val ledger = new BackupLedger
  private val work = mutable.HashMap.empty[String, mutable.Queue[BackupTask]]
  /** Backups handed to their source executor and not yet reported back (by source executor). */
  private val running = mutable.HashMap.empty[String, mutable.Set[BackupTask]]
  /** Peer copies to delete, by the executor holding them (sent with its next [[Work]]). */
  private val peerDeletes = mutable.HashMap.empty[String, mutable.Buffer[(Int, Long)]]
  /** Peer copies received and not yet re-read by their peer: (peer, shuffle, map id) -> the report. */
  private val unchecked = mutable.HashMap.empty[(String, Int, Long), BackupDone]
  private val checks = mutable.HashMap.empty[String, mutable.Buffer[PeerCheck]]
  /** True from a failed write to the remote store until a remote backup commits again. */
  private val storeFailing = new AtomicBoolean(false)
  /** Kinds of damaged copies already warned about (one warning per kind and application). */
  private val damageWarned = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  private val cancels = mutable.HashMap.empty[String, mutable.Buffer[(Int, Long)]]
  private val blockManagers = mutable.HashMap.empty[String, BlockManagerId]
  private val deadExecutors = mutable.HashSet.empty[String]
  private val clock = Executors.newSingleThreadScheduledExecutor(Daemon.factory("trspark-tick"))
  private val verifier = Executors.newSingleThreadExecutor(Daemon.factory("trspark-verify"))
  private var lastTime = 0.0
  private val peerRound = new AtomicLong(0)
  /** Each executor's pool; emits its `ExecutorAdded` (from the listener and the executors' reports). */
  lazy val pools = new ExecutorPools(sc.conf.get(TRConf.Prefix + "pool", "default").trim,
    (id, host, cores, pool, registered) => {
      val added = event("ExecutorAdded").put("executor_id", id).put("host", host).put("cores", cores).put("pool", pool)
      registered.foreach(added.put("vm_started", _))
      emit(added)
      added.path("time").asDouble()
    })
  /**
   * Counters, read by tests and tools (`TRStatus.stat`) and printed at shutdown. Committed backups:
   * `backups_done` = `backups_local` (peer copies) + `backups_remote`; `backups_bytes` sums the
   * index and data file bytes of all of them.
   */
  val stats: mutable.Map[String, Long] = mutable.LinkedHashMap(
    "backups_requested" -> 0L, "backups_done" -> 0L, "backups_local" -> 0L, "backups_remote" -> 0L,
    "backups_bytes" -> 0L, "backups_failed" -> 0L, "backups_rejected" -> 0L,
    "outputs_repointed" -> 0L, "outputs_lost" -> 0L, "notices" -> 0L,
    "duplicates_launched" -> 0L, "duplicates_killed" -> 0L, "executors_released" -> 0L, "internal_errors" -> 0L)
  /** Executors let go on the engine's `ReleaseExecutor` (their loss is reported as `released`). */
  private val released = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  /** Metrics, event-log records and the UI tab (TRMetrics.scala). */
  val obs = new TRObserver(this)

  /** True when `executorId` left because the engine released it (see the `ReleaseExecutor` command). */
  def wasReleased(executorId: String): Boolean = released.contains(executorId)

  /** The driver's map output tracker (where every map output's location is registered). */
  private def tracker: MapOutputTrackerMaster = SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]

  /** Add `n` to counter `name` (for the scheduler hooks). */
  def count(name: String, n: Long = 1): Unit = synchronized(stats(name) = stats.getOrElse(name, 0L) + n)

  // ------------------------------------------------------------------------------------------
  // Plugin life cycle
  // ------------------------------------------------------------------------------------------

  override def init(context: SparkContext, pluginContext: PluginContext): JMap[String, String] = {
    sc = context
    conf = TRConf(sc.conf)
    NoticeSettings(sc.conf) // validate spark.trspark.notice.* at start-up, not on each executor
    // Executors read re-pointed outputs through Spark's fallback storage, so it must point at
    // our remote root. A root the user already set wins (backups go there).
    sc.conf.getOption(TRConf.FallbackPathKey) match {
      case Some(path) => conf = conf.copy(remotePath = path.stripSuffix("/"))
      case None => sc.conf.set(TRConf.FallbackPathKey, conf.remotePath + "/")
    }
    sc.conf.set(TRConf.Prefix + "remote.path", conf.remotePath)
    // Before the settings are checked and handed to the engine: they include the release keys.
    Guard.run("Elastic.configure")(Elastic.configure(sc.conf))
    builtinAlways.set(conf.mode == "always")
    throttle = conf.throttleBytesPerS
    if (conf.backupsEnabled) sc.addSparkListener(new TRListener(this, sc))
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
    if (conf.backupsEnabled && conf.usesEngine) bridge = Some(startEngine(appId))
    val period = (conf.periodS * 1000).toLong
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
      case failed: BackupFailedMsg =>
        // Reported once: a backup the driver already failed (its target was lost) or cancelled is not counted again.
        if (synchronized(running.get(failed.executorId).exists(_.remove(failed.task)))) {
          if (failed.task.target == Target.Remote && !failed.sourceMissing) storeFailed(failed.reason)
          backupFailed(failed.task, failed.executorId, failed.reason, failed.sourceMissing)
        }
        null
      case checked: PeerChecked => peerChecked(checked); null
      case notice: TerminationNotice => noticed(notice); null
      case r: RebalanceRecommendation =>
        logInfo(s"trspark: executor ${r.executorId} got an AWS rebalance recommendation")
        emit(event("ExecutorRebalance").put("executor_id", r.executorId).put("since", (r.atEpochMillis - sc.startTime) / 1000.0))
        null
      case report: PoolReport =>
        logInfo(s"trspark: executor ${report.executorId} is in pool ${report.pool} (from ${report.source})")
        pools.report(report.executorId, report.pool); "ok"
      case other => logWarning(s"trspark: unexpected message $other"); null
    }
    case other => logWarning(s"trspark: unexpected message $other"); null
  }

  override def shutdown(): Unit = {
    clock.shutdownNow()
    verifier.shutdownNow()
    bridge.foreach(_.stop())
    if (remote != null && conf.backupsEnabled) remote.deleteApp()
    logInfo(s"trspark: ${synchronized(stats.map { case (k, v) => s"$k=$v" }.mkString(" "))}")
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

  /** A map task succeeded: record its output and, in always mode, back it up. */
  def mapOutputCreated(record: OutputRecord): Unit = synchronized {
    ledger.add(record).foreach(dropCopies)
    if (builtinAlways.get()) backupBuiltin(record)
  }

  private def backupBuiltin(record: OutputRecord): Unit = {
    if (conf.targets == "local") choosePeer(record.source).foreach(peer => request(record, peer))
    else request(record, Target.Remote)
  }

  /** The built-in always policy's peer: the live executors in turn, skipping the source. */
  private def choosePeer(source: String): Option[String] = {
    val peers = blockManagers.keys.filter(e => e != source && !deadExecutors.contains(e)).toSeq.sorted
    if (peers.isEmpty) None else Some(peers((peerRound.getAndIncrement() % peers.size).toInt))
  }

  private def request(record: OutputRecord, target: String): Unit = {
    if (deadExecutors.contains(record.source)) return
    val task = if (target == Target.Remote) {
      if (record.remote != CopyState.None) return
      record.remote = CopyState.Running
      BackupTask(record.shuffleId, record.mapIndex, record.mapId, target, throttle = throttle)
    } else {
      val bm = blockManagers.get(target).filterNot(_ => deadExecutors.contains(target))
      if (bm.isEmpty || record.peers.contains(target) || target == record.source) return
      record.peers(target) = CopyState.Running
      BackupTask(record.shuffleId, record.mapIndex, record.mapId, target, bm.get.host, bm.get.port, throttle)
    }
    work.getOrElseUpdate(record.source, mutable.Queue.empty).enqueue(task)
    stats("backups_requested") += 1
  }

  private def poll(executorId: String, capacity: Int): Work = synchronized {
    val queue = work.getOrElse(executorId, mutable.Queue.empty)
    val tasks = (0 until math.min(capacity, queue.size)).map(_ => queue.dequeue())
    if (tasks.nonEmpty) running.getOrElseUpdate(executorId, mutable.Set.empty) ++= tasks
    count("backups_started", tasks.size.toLong)
    Work(tasks, cancels.remove(executorId).map(_.toSeq).getOrElse(Nil),
      peerDeletes.remove(executorId).map(_.toSeq).getOrElse(Nil), checks.remove(executorId).map(_.toSeq).getOrElse(Nil))
  }

  private def backupDone(done: BackupDone): Unit = {
    val task = done.task
    if (task.target == Target.Remote) {
      // Verify off the RPC thread: re-read the committed files against the marker and CRCs.
      verifier.execute { () =>
        remote.problem(task.shuffleId, task.mapId, done.indexCrc, done.dataCrc) match {
          case None => committed(done)
          case Some(problem) =>
            damaged("remote", problem, s"shuffle ${task.shuffleId} map ${task.mapIndex}", "not used")
            remote.delete(task.shuffleId, task.mapId)
            backupFailed(task, done.executorId, s"remote copy failed verification ($problem)", sourceMissing = false)
        }
      }
    } else synchronized {
      // The peer re-reads what it received against the CRC32s the source computed (its next poll).
      unchecked((task.target, task.shuffleId, task.mapId)) = done
      checks.getOrElseUpdate(task.target, mutable.Buffer.empty) += PeerCheck(task.shuffleId, task.mapId, done.indexCrc, done.dataCrc)
    }
  }

  /** A peer re-read its copy: intact, it counts as done; damaged, it is dropped like a failed copy. */
  private def peerChecked(checked: PeerChecked): Unit = {
    val key = (checked.executorId, checked.check.shuffleId, checked.check.mapId)
    synchronized(unchecked.remove(key)).foreach { done =>
      if (checked.problem.isEmpty) committed(done)
      else {
        val task = done.task
        damaged("peer", checked.problem, s"shuffle ${task.shuffleId} map ${task.mapIndex} on executor ${task.target}",
          "not used, the output stays where it was or is recomputed")
        synchronized {
          ledger.get(task.shuffleId, task.mapIndex).filter(_.mapId == task.mapId).foreach { record =>
            // The index upload made the peer the tracker's location: undo that before dropping it.
            if (TRDriverPlugin.isOn(tracker, record, task.target)) {
              blockManagers.get(record.source).filterNot(_ => deadExecutors.contains(record.source)) match {
                case Some(bm) => tracker.updateMapOutput(record.shuffleId, record.mapId, bm)
                case None => blockManagers.get(task.target).foreach(tracker.unregisterMapOutput(record.shuffleId, record.mapIndex, _))
              }
              tracker.incrementEpoch()
            }
          }
          peerDeletes.getOrElseUpdate(task.target, mutable.Buffer.empty) += ((task.shuffleId, task.mapId))
        }
        backupFailed(task, done.executorId, s"peer copy failed verification (${checked.problem})", sourceMissing = false)
      }
    }
  }

  /**
   * An executor could not write a backup to the remote store (unwritable, gone, full): one warning
   * when the store starts failing, none for the failures after it until a backup commits again.
   * The outputs stay where they are (unprotected); nothing half-written is ever read.
   */
  private def storeFailed(reason: String): Unit =
    if (storeFailing.compareAndSet(false, true)) {
      logWarning(s"trspark: backups to the remote store ${conf.remotePath} fail ($reason); " +
        "map outputs stay unprotected until it takes backups again")
    } else logDebug(s"trspark: backup to the remote store failed again ($reason)")

  /**
   * A copy failed its checksum check and is treated as missing: counted in `backups_rejected`,
   * and one warning per kind (`remote`/`peer` and the problem) and application.
   */
  private def damaged(where: String, problem: String, what: String, outcome: String): Unit = {
    count("backups_rejected")
    val message = s"trspark: $where copy of $what is $problem; $outcome"
    if (damageWarned.add(s"$where $problem")) logWarning(message) else logInfo(message)
  }

  private def committed(done: BackupDone): Unit = {
    val task = done.task
    val current = synchronized {
      ledger.get(task.shuffleId, task.mapIndex).filter(_.mapId == task.mapId).map { record =>
        if (task.target == Target.Remote) {
          record.remote = CopyState.Done
          record.remoteCrcs = (done.indexCrc, done.dataCrc)
        } else record.peers(task.target) = CopyState.Done
        stats("backups_done") += 1
        stats(if (task.target == Target.Remote) "backups_remote" else "backups_local") += 1
        stats("backups_bytes") += done.bytes
        record
      }
    }
    if (task.target == Target.Remote && storeFailing.compareAndSet(true, false)) {
      logInfo(s"trspark: the remote store ${conf.remotePath} takes backups again")
    }
    if (current.isEmpty && task.target == Target.Remote) remote.delete(task.shuffleId, task.mapId)
    current.foreach { record =>
      count(if (task.target == Target.Remote) "backups_bytes_remote" else "backups_bytes_local", done.bytes)
      obs.post(TRBackup(System.currentTimeMillis(), task.shuffleId, task.mapIndex, task.mapId, record.source,
        task.target, done.bytes, done.seconds))
      emit(event("BlockBackedUp").put("shuffle_id", task.shuffleId).put("map_index", task.mapIndex)
        .put("target", task.target).put("bytes", done.bytes).put("seconds", done.seconds))
    }
  }

  /** One requested backup ended without a copy; `source` is the executor it was copied from. */
  private def backupFailed(task: BackupTask, source: String, reason: String, sourceMissing: Boolean): Unit = {
    synchronized {
      stats("backups_failed") += 1
      obs.post(TRBackupFailed(System.currentTimeMillis(), task.shuffleId, task.mapIndex, task.target, reason))
      ledger.get(task.shuffleId, task.mapIndex).filter(_.mapId == task.mapId).foreach { record =>
        if (task.target == Target.Remote) record.remote = CopyState.None else record.peers.remove(task.target)
      }
    }
    emit(event("BackupFailed").put("shuffle_id", task.shuffleId).put("map_index", task.mapIndex)
      .put("target", task.target).put("reason", reason).put("source", source).put("source_missing", sourceMissing))
  }

  /**
   * `executorId` is gone: every backup from it (queued here or handed to it) and every queued
   * backup to it will never happen -- report each as failed, so neither the ledger nor the engine
   * waits for it. (A running copy *to* it fails on its source's upload and is reported from there.)
   */
  private def abandonBackups(executorId: String): Unit = synchronized {
    val fromIt = work.remove(executorId).toSeq.flatten ++ running.remove(executorId).toSeq.flatten
    fromIt.foreach(t => backupFailed(t, executorId, s"source executor $executorId lost", sourceMissing = true))
    for ((source, queue) <- work.toSeq; t <- queue.dequeueAll(_.target == executorId)) {
      backupFailed(t, source, s"target executor $executorId lost", sourceMissing = false)
    }
    cancels.remove(executorId)
    peerDeletes.remove(executorId)
    checks.remove(executorId)
    for (key @ (peer, _, _) <- unchecked.keys.toSeq if peer == executorId; done <- unchecked.remove(key)) {
      backupFailed(done.task, done.executorId, s"target executor $executorId lost", sourceMissing = false)
    }
  }

  /** Forget handed-out backups of this output (cancelled): the executor drops them without a report. */
  private def forgetRunning(record: OutputRecord): Unit = {
    count("backups_cancelled")
    running.get(record.source).foreach(_.filterInPlace(t => !(t.shuffleId == record.shuffleId && t.mapId == record.mapId)))
  }

  /** Have the peers holding finished copies of `record` delete them (on their next poll). */
  private def deletePeerCopies(record: OutputRecord): Unit =
    record.peers.foreach { case (peer, state) =>
      if (state == CopyState.Done && !deadExecutors.contains(peer)) {
        peerDeletes.getOrElseUpdate(peer, mutable.Buffer.empty) += ((record.shuffleId, record.mapId))
      }
    }

  // ------------------------------------------------------------------------------------------
  // Loss: re-point outputs to a surviving copy before the DAGScheduler drops or re-runs them
  // ------------------------------------------------------------------------------------------

  /**
   * `executorId`'s map outputs are gone (it was lost, or a reducer could not fetch from it):
   * move every output that lived there to a surviving copy -- a peer, the source, or the remote
   * store -- with `MapOutputTrackerMaster.updateMapOutput`, which also revives an output the
   * DAGScheduler already removed. Idempotent; called synchronously by [[TRTaskScheduler]] and
   * again (possibly late) from the listener.
   */
  def outputsLost(executorId: String, why: String, dead: Boolean): Unit = {
    val (repointed, lost) = synchronized {
      // A fetch failure loses the executor's outputs (Spark unregisters them all), not the executor.
      val firstTime = dead && deadExecutors.add(executorId)
      if (dead) abandonBackups(executorId)
      val moved = mutable.Buffer.empty[Long]
      val lost = mutable.Buffer.empty[OutputRecord]
      for (record <- ledger.touching(executorId)) {
        if (dead) record.peers.remove(executorId)
        if (TRDriverPlugin.isOn(tracker, record, executorId)) survivor(record, executorId) match {
          case Some(bm) =>
            tracker.updateMapOutput(record.shuffleId, record.mapId, bm)
            moved += record.mapId
          case None => if (firstTime) lost += record
        }
      }
      stats("outputs_repointed") += moved.size
      stats("outputs_lost") += lost.size
      (moved.toSeq, lost.toSeq)
    }
    if (repointed.nonEmpty || lost.nonEmpty) {
      obs.post(TRRestore(System.currentTimeMillis(), executorId, why, repointed, lost.map(_.mapId)))
      logInfo(s"trspark: $why on executor $executorId: re-pointed ${repointed.size} map outputs to backups, " +
        s"${lost.size} without backup will be recomputed")
    }
    lost.foreach(r => emit(event("BlockLost").put("shuffle_id", r.shuffleId).put("map_index", r.mapIndex)))
  }

  /** Where a lost output can be read now: a finished peer copy, its live source, or the remote store. */
  private def survivor(record: OutputRecord, lostExecutor: String): Option[BlockManagerId] = {
    def alive(e: String) = e != lostExecutor && !deadExecutors.contains(e)
    val peer = record.peers.collectFirst { case (e, CopyState.Done) if alive(e) => e }.flatMap(blockManagers.get)
    val source = Some(record.source).filter(alive).flatMap(blockManagers.get)
    def remoteCopy = if (record.remote == CopyState.Done && remoteIntact(record)) Some(FallbackStorage.FALLBACK_BLOCK_MANAGER_ID) else None
    peer.orElse(source).orElse(remoteCopy)
  }

  /**
   * Re-read a remote copy against its marker and the CRC32s computed when it was written, before
   * readers are sent to it: a copy damaged or removed since counts as missing (recomputed).
   */
  private def remoteIntact(record: OutputRecord): Boolean = {
    val (indexCrc, dataCrc) = record.remoteCrcs
    remote.problem(record.shuffleId, record.mapId, indexCrc, dataCrc) match {
      case None => true
      case Some(problem) =>
        damaged("remote", problem, record.toString, "treated as missing, the output is recomputed")
        record.remote = CopyState.None
        verifier.execute(() => remote.delete(record.shuffleId, record.mapId))
        false
    }
  }

  /** Forget a superseded output's copies (a re-run replaced it). */
  private def dropCopies(record: OutputRecord): Unit = {
    count("maps_rerun")
    if (record.remote != CopyState.None) verifier.execute(() => remote.delete(record.shuffleId, record.mapId))
    if (record.busy) {
      cancels.getOrElseUpdate(record.source, mutable.Buffer.empty) += ((record.shuffleId, record.mapId))
      forgetRunning(record)
    }
    deletePeerCopies(record)
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
      // No engine keeps the hints current any more: Spark's own placement from now on.
      sc.taskScheduler match {
        case hooked: HintedScheduling => hooked.setHints(SchedulingHints.Empty)
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

  /** Apply one engine command (runs on the bridge's reader thread). */
  private def command(node: JsonNode): Unit = node.path("type").asText() match {
    case "Backup" => backupCommand(node)
    case "CancelBackup" => cancelBackup(node.path("shuffle_id").asInt(), node.path("map_index").asInt())
    case "DropBackup" => dropBackup(node.path("shuffle_id").asInt(), node.path("map_index").asInt())
    case "ReleaseExecutor" if node.path("idle").asBoolean(false) =>
      Guard.run("TRDriverPlugin.idleRelease")(idleRelease(node.path("executor_id").asText(), node.path("reason").asText()))
    case "ReleaseExecutor" => releaseExecutor(node.path("executor_id").asText(), node.path("reason").asText())
    case "SafetyBelt" => logInfo(s"trspark: engine safety belt on=${node.path("on").asBoolean()}: ${node.path("reason").asText()}")
    case "Advice" => logInfo(s"trspark advice: ${node.path("message").asText()}")
    case "SchedulingHints" => schedulingHints(node)
    case kind @ ("DuplicateTask" | "KillDuplicate") => duplication(kind, node)
    case other => logWarning(s"trspark: unknown engine command '$other' ignored")
  }

  /** `Backup`: hand the copy to its source executor, or report it failed at once. */
  private def backupCommand(node: JsonNode): Unit = synchronized {
    val sid = node.path("shuffle_id").asInt()
    val index = node.path("map_index").asInt()
    val target = node.path("target").asText(Target.Remote)
    val source = node.path("source").asText("")
    // A backup that cannot start is reported failed at once: the engine holds a slot for it.
    def refuse(reason: String, missing: Boolean): Unit = {
      logDebug(s"trspark: Backup of $sid/$index to $target refused: $reason")
      emit(event("BackupFailed").put("shuffle_id", sid).put("map_index", index).put("target", target)
        .put("reason", reason).put("source", source).put("source_missing", missing))
    }
    val mapId = node.path("map_id")
    ledger.get(sid, index) match {
      case Some(record) if mapId.isNull || mapId.isMissingNode || mapId.asLong() == record.mapId =>
        if (deadExecutors.contains(record.source)) refuse(s"source executor ${record.source} lost", missing = true)
        else if (target != Target.Remote && (!blockManagers.contains(target) || deadExecutors.contains(target))) {
          refuse(s"target executor $target lost or unknown", missing = false)
        } else request(record, target)
      case _ => refuse("no such map output (unknown or superseded)", missing = true)
    }
  }

  /** `CancelBackup`: drop the queued copy, or tell its source to abandon the running one. */
  private def cancelBackup(shuffleId: Int, mapIndex: Int): Unit = synchronized {
    ledger.get(shuffleId, mapIndex).foreach { record =>
      work.get(record.source).foreach(_.removeAll(t => t.shuffleId == record.shuffleId && t.mapId == record.mapId))
      if (record.busy) {
        cancels.getOrElseUpdate(record.source, mutable.Buffer.empty) += ((record.shuffleId, record.mapId))
        forgetRunning(record)
      }
      if (record.remote == CopyState.Running) record.remote = CopyState.None
      record.peers.filterInPlace((_, s) => s != CopyState.Running)
    }
  }

  /** `DropBackup`: delete the copies of an output nobody will read again (keeping the one that *is* the output). */
  private def dropBackup(shuffleId: Int, mapIndex: Int): Unit = synchronized {
    ledger.get(shuffleId, mapIndex).foreach { record =>
      // With its source gone and the tracker re-pointed to the store, the remote copy *is* the
      // output (a later job may still read it): it stays, like the newest peer copy below.
      val remoteIsTheOutput = TRDriverPlugin.isOn(tracker, record, FallbackStorage.FALLBACK_BLOCK_MANAGER_ID.executorId)
      if (record.remote != CopyState.None && !remoteIsTheOutput) {
        record.remote = CopyState.None
        verifier.execute(() => remote.delete(record.shuffleId, record.mapId))
      }
      if (!deadExecutors.contains(record.source) && record.peers.nonEmpty) dropPeerCopies(record)
    }
  }

  /**
   * A peer copy is also the tracker's location (the index upload re-pointed it): move the output
   * back to its living source, then delete the peers' files. With the source gone, the newest
   * peer copy *is* the output and is not dropped (the caller checks).
   */
  private def dropPeerCopies(record: OutputRecord): Unit = {
    blockManagers.get(record.source).foreach { bm =>
      tracker.updateMapOutput(record.shuffleId, record.mapId, bm)
      // Executors cache map output locations until the epoch moves: without this, a later
      // reader of this shuffle would still fetch from the peer whose copy goes next (measured).
      tracker.incrementEpoch()
    }
    deletePeerCopies(record)
    record.peers.clear()
  }

  /** `ReleaseExecutor`: let an executor with nothing left to do go before its notice deadline. */
  private def releaseExecutor(id: String, reason: String): Unit = sc.schedulerBackend match {
    case backend: org.apache.spark.ExecutorAllocationClient if !deadExecutors.contains(id) && released.add(id) =>
      // Killed without lowering the application's executor target, so the cluster manager starts
      // its replacement now (as after Spark's decommissioning).
      logInfo(s"trspark: releasing executor $id before its deadline ($reason)")
      count("executors_released")
      // Its outputs move to their other copies *before* it goes, and it counts as dead from
      // now: a killed JVM takes a while to shut down, and until the driver hears of the loss
      // a reader could be sent to it, or to a peer copy on another executor that is leaving
      // too (measured: a stage failed 4 times re-pointing between two released executors).
      outputsLost(id, "released", dead = true)
      tracker.incrementEpoch()
      // killExecutors waits for the cluster manager's answer: not on the bridge's reader thread.
      verifier.execute { () =>
        try backend.killExecutors(Seq(id), adjustTargetNumExecutors = false, countFailures = false, force = true)
        catch { case NonFatal(e) => logWarning(s"trspark: could not release executor $id: ${e.getMessage}") }
      }
    case _ => logDebug(s"trspark: ReleaseExecutor $id ignored (gone, already released, or no allocation client)")
  }

  /**
   * `ReleaseExecutor` with `idle`: dynamic allocation's scale-down of an idle executor whose
   * outputs are saved elsewhere. Only if Spark finds it idle too; its outputs move to their
   * copies first (no reader is sent to it any more), then Spark removes it without a
   * replacement. If it took a task meanwhile, Spark keeps it and so does trspark.
   */
  private def idleRelease(id: String, reason: String): Unit = {
    if (deadExecutors.contains(id) || !Elastic.idle(sc, id) || !released.add(id)) {
      logDebug(s"trspark: idle release of executor $id skipped (gone, busy, or released already)")
      return
    }
    logInfo(s"trspark: releasing idle executor $id ($reason)")
    outputsLost(id, "released", dead = true)
    tracker.incrementEpoch()
    verifier.execute { () =>
      val gone = Guard.orElse("Elastic.remove", false)(Elastic.remove(sc, id))
      if (gone) { count("executors_released"); count("executors_released_idle") }
      else {
        synchronized(deadExecutors -= id)
        released.remove(id)
        logInfo(s"trspark: executor $id kept: Spark did not remove it (it took a task)")
      }
    }
  }

  /** `SchedulingHints`: replace the task scheduler's hints (a master without the hook ignores them). */
  private def schedulingHints(node: JsonNode): Unit = sc.taskScheduler match {
    case hooked: HintedScheduling =>
      try {
        hooked.setHints(SchedulingHints.fromJson(node))
        sc.schedulerBackend.reviveOffers() // re-offer tasks the old hints held back
      } catch { case NonFatal(e) => logWarning(s"trspark: SchedulingHints ignored, previous kept: ${e.getMessage}") }
    case _ => // a master without the hook: hints have no effect (docs/deploy.md)
  }

  /** `DuplicateTask` / `KillDuplicate` (paper section 5), on a scheduler with [[TaskDuplication]]. */
  private def duplication(kind: String, node: JsonNode): Unit = sc.taskScheduler match {
    case scheduler: TaskDuplication =>
      val (stageId, partition) = (node.path("stage_id").asInt(), node.path("partition").asInt())
      val executorId = node.path("executor_id").asText()
      if (kind == "DuplicateTask") {
        scheduler.duplicate(stageId, partition, executorId)
        sc.schedulerBackend.reviveOffers() // offer the idle executor now, not at the next task end
      } else count("duplicates_killed", scheduler.killDuplicate(stageId, partition, executorId))
    case _ => logDebug(s"trspark: $kind ignored: task duplication needs a local-trcluster or spark-tr:// master")
  }

  // Test hooks (py4j): counters, the current mode, and the built-in policy's knobs.
  def stat(name: String): Long = synchronized(stats.getOrElse(name, 0L))
  /** Apply one engine command given as its JSON line (tests drive commands without an engine). */
  def applyCommand(line: String): Unit = {
    val node = Json.parse(line)
    obs.command(node)
    command(node)
  }
  @volatile private var throttle = 0.0
  /** Switch the built-in policy at run time (tests): `never` | `always`, targets, bytes/s cap. */
  def setBuiltin(mode: String, targets: String, throttleBytesPerS: Double): Unit = synchronized {
    require(TRConf.BuiltinModes.contains(mode) && TRConf.Targets.contains(targets), s"$mode/$targets")
    builtinAlways.set(mode == "always")
    conf = conf.copy(targets = targets)
    throttle = throttleBytesPerS
  }
  def fallenBack: Boolean = builtinAlways.get() && conf.mode != "always"
}

object TRDriverPlugin {
  /** The running driver plugin (one SparkContext per JVM), for the scheduler hook and tests. */
  @volatile var active: Option[TRDriverPlugin] = None

  /**
   * True when the tracker has `record` (this very map attempt) on `executorId`, or has just
   * removed it (it sits in `mapStatusesDeleted` and no newer attempt took its place).
   */
  def isOn(tracker: MapOutputTrackerMaster, record: OutputRecord, executorId: String): Boolean =
    tracker.shuffleStatuses.get(record.shuffleId).exists { status =>
      val live = status.mapStatuses(record.mapIndex)
      if (live != null) live.mapId == record.mapId && live.location.executorId == executorId
      else Option(status.mapStatusesDeleted(record.mapIndex)).exists(_.mapId == record.mapId)
    }

}

/** py4j entry points for tests and tools (an object without a companion class, so Java sees static methods). */
object TRStatus {
  def stat(name: String): Long = TRDriverPlugin.active.map(_.stat(name)).getOrElse(-1L)
  def isFallenBack: Boolean = TRDriverPlugin.active.exists(_.fallenBack)
  def applyCommand(line: String): Unit = TRDriverPlugin.active.foreach(_.applyCommand(line))
  def setBuiltin(mode: String, targets: String, throttleBytesPerS: Double): Unit =
    TRDriverPlugin.active.foreach(_.setBuiltin(mode, targets, throttleBytesPerS))
}
