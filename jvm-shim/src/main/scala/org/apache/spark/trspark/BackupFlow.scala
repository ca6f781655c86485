package org.apache.spark.trspark

import java.util.concurrent.atomic.AtomicLong

import scala.collection.mutable

import org.apache.spark.storage.BlockManagerId

/**
 * The driver's copy bookkeeping: map outputs into the [[BackupLedger]], backup work queued per
 * source executor and handed out on its polls, cancelled, and the copies nobody wants any more
 * deleted. How each copy ends, from the executors' reports, is in [[BackupOutcomes]]. Each
 * requested backup ends exactly once, as done, failed or cancelled, so `backups_requested` =
 * `backups_done` + `backups_failed` + `backups_cancelled` + those still open.
 */
trait BackupFlow extends RemoteDeletes {
  protected val ledger = new BackupLedger
  protected val work = mutable.HashMap.empty[String, mutable.Queue[BackupTask]]
  /** Backups handed to their source executor and not yet reported back (by source executor). */
  protected val running = mutable.HashMap.empty[String, mutable.Set[BackupTask]]
  /** Peer copies to delete, by the executor holding them (sent with its next [[Work]]). */
  protected val peerDeletes = mutable.HashMap.empty[String, mutable.Buffer[(Int, Long)]]
  /** Peer copies received and not yet re-read by their peer: (peer, shuffle, map id) -> the report. */
  protected val unchecked = mutable.HashMap.empty[(String, Int, Long), BackupDone]
  protected val checks = mutable.HashMap.empty[String, mutable.Buffer[PeerCheck]]
  /** Outputs whose handed-out copies their source is to stop, by source (sent with its next [[Work]]). */
  protected val cancels = mutable.HashMap.empty[String, mutable.Buffer[(Int, Long)]]
  protected val blockManagers = mutable.HashMap.empty[String, BlockManagerId]
  /** Executors the driver has seen die or let go; read without the lock by the engine's commands. */
  protected val deadExecutors = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  protected val peerRound = new AtomicLong(0)
  /** Backups requested and not yet ended, by id: a report of any other is stale. */
  protected val open = mutable.HashMap.empty[Long, BackupTask]
  /** Engine `Backup` commands repeated while the copy they ask for was open, by its id: each gets that copy's answer. */
  protected val repeats = mutable.HashMap.empty[Long, Int]
  private val backupIds = new AtomicLong(0)
  /** Jobs started and not ended, as the listener saw them. */
  private val runningJobs = java.util.concurrent.ConcurrentHashMap.newKeySet[Int]()
  /** The built-in policy's bandwidth cap per copy (bytes/s; 0 = none). */
  @volatile protected var throttle = 0.0

  /** The block manager of an executor the driver knows and has not seen die. */
  protected def liveBlockManager(executorId: String): Option[BlockManagerId] =
    blockManagers.get(executorId).filterNot(_ => deadExecutors.contains(executorId))

  /** True when the output's own files are out of reach: its source died, or Spark counts them lost. */
  protected def sourceGone(record: OutputRecord): Boolean = record.sourceLost || deadExecutors.contains(record.source)

  /** Where readers can fetch an output's own files: its source, unless [[sourceGone]]. */
  protected def sourceBlockManager(record: OutputRecord): Option[BlockManagerId] =
    if (sourceGone(record)) None else blockManagers.get(record.source)

  /**
   * Point the tracker's entry for one map output at `to`. `updateMapOutput` also revives an output
   * Spark removed (so does a peer copy's index upload), but leaves its map id out of the shuffle's
   * id index, and Spark then ignores every later `updateMapOutput` of it as "untracked". Re-adding
   * the live status, under Spark's lock, indexes it again: before the move, for an output revived
   * earlier, and after it, for one this move revives.
   */
  protected def moveOutput(shuffleId: Int, mapIndex: Int, mapId: Long, to: BlockManagerId): Unit = {
    def index(): Boolean = tracker.shuffleStatuses.get(shuffleId).exists { s =>
      val live = Option(s.mapStatuses(mapIndex)).filter(_.mapId == mapId)
      live.foreach(s.addMapOutput(mapIndex, _))
      live.nonEmpty
    }
    val wasLive = index()
    tracker.updateMapOutput(shuffleId, mapId, to)
    if (!wasLive) index()
  }

  protected def moveOutput(record: OutputRecord, to: BlockManagerId): Unit =
    moveOutput(record.shuffleId, record.mapIndex, record.mapId, to)

  /**
   * Move one map output to `to` and make executors fetch its location again: they cache map
   * output locations until the epoch moves, and a cached one would send readers to the old place.
   */
  protected def repoint(shuffleId: Int, mapIndex: Int, mapId: Long, to: BlockManagerId): Unit = {
    moveOutput(shuffleId, mapIndex, mapId, to)
    tracker.incrementEpoch()
  }

  /** The ledger's record of the output `task` copies, unless the output was forgotten or re-run since. */
  protected def recordOf(task: BackupTask): Option[OutputRecord] =
    ledger.get(task.shuffleId, task.mapIndex).filter(_.mapId == task.mapId)

  /**
   * Whether Spark registered the output of map task `mapId` (and may have removed it since). The
   * DAG scheduler posts a task's end just before it registers the output, so the listener can
   * look too soon, and waits up to [[TRDriverPlugin.RegistrationWaitMs]]. Spark ignores some
   * successes for good: an older attempt of an indeterminate stage, a task launched before a
   * fetch failure blamed its executor. Recorded, such an output would replace the one Spark did
   * register in the ledger and delete that one's copies.
   */
  def awaitRegistered(shuffleId: Int, mapIndex: Int, mapId: Long): Boolean = {
    val deadline = System.nanoTime() + TRDriverPlugin.RegistrationWaitMs * 1000000L
    var found = TRDriverPlugin.registered(tracker, shuffleId, mapIndex, mapId)
    while (!found && System.nanoTime() < deadline) {
      Thread.sleep(1)
      found = TRDriverPlugin.registered(tracker, shuffleId, mapIndex, mapId)
    }
    if (!found) logInfo(s"trspark: Spark did not register the output of map task $mapId (shuffle $shuffleId, " +
      s"partition $mapIndex) within ${TRDriverPlugin.RegistrationWaitMs} ms: a success it ignored, not recorded")
    found
  }

  /** A map task succeeded: record its output and, in always mode, back it up. */
  def mapOutputCreated(record: OutputRecord): Unit = synchronized {
    ledger.add(record).foreach(dropCopies)
    if (builtinAlways.get()) backupBuiltin(record)
  }

  protected def backupBuiltin(record: OutputRecord): Unit = {
    if (conf.targets == "local") choosePeer(record.source).foreach(peer => request(record, peer))
    else request(record, Target.Remote)
  }

  /** The built-in always policy's peer: the live executors in turn, skipping the source. */
  private def choosePeer(source: String): Option[String] = {
    val peers = blockManagers.keys.filter(e => e != source && !deadExecutors.contains(e)).toSeq.sorted
    if (peers.isEmpty) None else Some(peers((peerRound.getAndIncrement() % peers.size).toInt))
  }

  protected def request(record: OutputRecord, target: String): Unit = {
    if (sourceGone(record)) return
    val task = if (target == Target.Remote) {
      if (record.remote != CopyState.None) return
      record.remote = CopyState.Running
      BackupTask(record.shuffleId, record.mapIndex, record.mapId, target, throttle = throttle,
        id = backupIds.incrementAndGet())
    } else {
      val bm = liveBlockManager(target)
      if (bm.isEmpty || record.peers.contains(target) || target == record.source) return
      record.peers(target) = CopyState.Running
      BackupTask(record.shuffleId, record.mapIndex, record.mapId, target, bm.get.host, bm.get.port, throttle,
        backupIds.incrementAndGet())
    }
    work.getOrElseUpdate(record.source, mutable.Queue.empty).enqueue(task)
    open(task.id) = task
    stats("backups_requested") += 1
  }

  /**
   * `task` ends as `outcome` (a counter): returns how many engine commands its end answers (its
   * own and the [[repeats]] it took on), or 0, and nothing counted, if it had ended already.
   */
  protected def endBackup(task: BackupTask, outcome: String): Int = synchronized {
    if (open.remove(task.id).isEmpty) 0
    else {
      count(outcome)
      1 + repeats.remove(task.id).getOrElse(0)
    }
  }

  def jobStarted(jobId: Int): Unit = runningJobs.add(jobId)

  def jobEnded(jobId: Int): Unit = runningJobs.remove(jobId)

  protected def poll(executorId: String, capacity: Int): Work = synchronized {
    val queue = work.getOrElse(executorId, mutable.Queue.empty)
    // A remote copy stays queued while its output's earlier copy is still to be deleted (RemoteDeletes).
    val tasks = queue.iterator.filterNot(waitsForDelete).take(capacity).toVector
    queue.filterInPlace(t => !tasks.contains(t))
    if (tasks.nonEmpty) running.getOrElseUpdate(executorId, mutable.Set.empty) ++= tasks
    count("backups_started", tasks.size.toLong)
    Work(tasks, cancels.remove(executorId).map(_.toSeq).getOrElse(Nil),
      peerDeletes.remove(executorId).map(_.toSeq).getOrElse(Nil), checks.remove(executorId).map(_.toSeq).getOrElse(Nil),
      quiet)
  }

  /**
   * No job runs, no copy is requested and not yet ended or unchecked, and no live executor has a
   * cancel, delete or check waiting: then executors poll once a second instead of every beat.
   */
  private def quiet: Boolean = runningJobs.isEmpty && open.isEmpty && unchecked.isEmpty &&
    Seq(cancels, peerDeletes, checks).forall(_.keysIterator.forall(deadExecutors.contains))

  /**
   * Spark's ContextCleaner dropped `shuffleId`, so no job can read it again: forget its outputs,
   * stop their copies in flight and delete their copies. Backups then hold space only while Spark
   * keeps the shuffle; otherwise an application that runs for days would keep every output it
   * ever backed up (always-checkpoint copies all of them) until it stops.
   */
  def forgetShuffle(shuffleId: Int): Unit = {
    val gone = synchronized {
      val records = ledger.removeShuffle(shuffleId)
      for (record <- records) {
        cancelCopies(record)
        deletePeerCopies(record)
      }
      // Copies received but not yet checked have no finished state in their record: delete them here.
      cancelLanded((shuffle, _) => shuffle == shuffleId)(_ => ())
      retried.filterInPlace { case (shuffle, _) => shuffle != shuffleId }
      count("outputs_forgotten", records.size.toLong)
      records
    }
    if (gone.exists(_.remote != CopyState.None)) offThread(storeWork, s"deleting shuffle $shuffleId's remote copies")(remote.deleteShuffle(shuffleId))
  }

  /**
   * End the peer copies of `record` that landed and wait for their peer's check, as cancelled, and
   * delete them: the check would otherwise commit a copy the engine no longer wants. Not while
   * the source is gone: then such a copy may be the output itself. Readers the index upload sent
   * to the peer go back to the source first.
   */
  protected def cancelUnchecked(record: OutputRecord): Unit = if (!sourceGone(record)) {
    cancelLanded((shuffle, mapId) => shuffle == record.shuffleId && mapId == record.mapId) { peer =>
      if (TRDriverPlugin.isOn(tracker, record, peer)) sourceBlockManager(record).foreach(moveOutput(record, _))
      tracker.incrementEpoch()
    }
  }

  /**
   * End as cancelled the copies of the outputs `of` (shuffle, map id) holds for that landed and
   * wait for their peer's check, and have their peers delete them; `beforeDelete(peer)` runs first.
   */
  private def cancelLanded(of: (Int, Long) => Boolean)(beforeDelete: String => Unit): Unit =
    for (key @ (peer, shuffle, mapId) <- unchecked.keys.toSeq if of(shuffle, mapId); done <- unchecked.remove(key)) {
      endBackup(done.task, "backups_cancelled")
      beforeDelete(peer)
      deletePeerCopy(peer, shuffle, mapId)
    }

  /** Have `source` stop its handed-out copies of this output (sent with its next [[Work]]). */
  protected def cancelAt(source: String, shuffleId: Int, mapId: Long): Unit =
    cancels.getOrElseUpdate(source, mutable.Buffer.empty) += ((shuffleId, mapId))

  /**
   * Cancel the backups of `record` that have not been reported: drop the queued ones, and have its
   * source stop the handed-out ones (it drops them without a report; a report that still comes is stale).
   */
  protected def cancelCopies(record: OutputRecord): Unit = {
    val ofIt = (t: BackupTask) => t.shuffleId == record.shuffleId && t.mapId == record.mapId
    work.get(record.source).foreach(_.removeAll(ofIt).foreach(endBackup(_, "backups_cancelled")))
    running.get(record.source).foreach { tasks =>
      val handedOut = tasks.filter(ofIt)
      if (handedOut.nonEmpty) cancelAt(record.source, record.shuffleId, record.mapId)
      handedOut.foreach { t => tasks -= t; endBackup(t, "backups_cancelled") }
    }
  }

  /**
   * Delete the copy of a backup that ended without being committed (cancelled, failed, or its
   * output forgotten or re-run), unless a newer backup of the same output writes the same files.
   * The index upload may have made a peer copy the tracker's location: it goes back to its living
   * `source` first; with the source gone the copy is the output, and it stays.
   */
  protected def dropStaleCopy(task: BackupTask, source: String): Unit = synchronized {
    val reused = recordOf(task).exists { r =>
      if (task.target == Target.Remote) r.remote != CopyState.None else r.peers.contains(task.target)
    }
    if (!reused) {
      if (task.target == Target.Remote) deleteRemoteCopy(task.shuffleId, task.mapId)
      else {
        val onThePeer = TRDriverPlugin.liveOn(tracker, task.shuffleId, task.mapIndex, task.mapId, task.target)
        // `source` ran the copy, so it is the output's source; a record still kept also knows
        // whether Spark counts the source's files lost.
        val back = if (onThePeer) recordOf(task).fold(liveBlockManager(source))(sourceBlockManager) else None
        back.foreach(repoint(task.shuffleId, task.mapIndex, task.mapId, _))
        if (!onThePeer || back.nonEmpty) deletePeerCopy(task.target, task.shuffleId, task.mapId)
      }
    }
  }

  /** Have the peers holding finished copies of `record` delete them (on their next poll). */
  protected def deletePeerCopies(record: OutputRecord): Unit =
    record.peers.foreach { case (peer, state) =>
      if (state == CopyState.Done) deletePeerCopy(peer, record.shuffleId, record.mapId)
    }

  /** Have `peer` delete its copy of one output on its next poll (a dead peer took it with it). */
  protected def deletePeerCopy(peer: String, shuffleId: Int, mapId: Long): Unit =
    if (!deadExecutors.contains(peer)) peerDeletes.getOrElseUpdate(peer, mutable.Buffer.empty) += ((shuffleId, mapId))

  /** Forget a superseded output's copies (a re-run replaced it). */
  private def dropCopies(record: OutputRecord): Unit = {
    count("maps_rerun")
    if (record.remote != CopyState.None) deleteRemoteCopy(record.shuffleId, record.mapId)
    cancelCopies(record)
    deletePeerCopies(record)
  }
}
