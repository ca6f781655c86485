package org.apache.spark.trspark

import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

import scala.collection.mutable

import org.apache.spark.storage.{BlockManagerId, FallbackStorage}

/**
 * The driver's copy bookkeeping: map outputs into the [[BackupLedger]], backup work queued per
 * source executor and handed out on its polls, copies reported back, checked (peer copies by
 * their peer, remote ones here) and committed or failed, and the queues of an executor that is
 * gone abandoned. Each requested backup ends exactly once, as done, failed or cancelled, so
 * `backups_requested` = `backups_done` + `backups_failed` + `backups_cancelled` + those still open.
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
  /** True from a failed write to the remote store until a remote backup commits again. */
  protected val storeFailing = new AtomicBoolean(false)
  /** Kinds of damaged copies already warned about (one warning per kind and application). */
  protected val damageWarned = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
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

  protected def backupDone(done: BackupDone): Unit = {
    val task = done.task
    if (!synchronized(open.contains(task.id))) dropStaleCopy(task, done.executorId)
    else if (task.target == Target.Remote) committed(done) // its writer read it back
    else synchronized {
      // The index upload made the peer the tracker's location before anyone checked the copy:
      // readers go back to the living source, so a copy damaged in transit is never served.
      recordOf(task).foreach { record =>
        if (TRDriverPlugin.isOn(tracker, record, task.target)) sourceBlockManager(record).foreach(moveOutput(record, _))
      }
      // The peer re-reads what it received against the CRC32s the source computed (its next poll).
      unchecked((task.target, task.shuffleId, task.mapId)) = done
      checks.getOrElseUpdate(task.target, mutable.Buffer.empty) += PeerCheck(task.shuffleId, task.mapId, done.indexCrc, done.dataCrc)
    }
  }

  /**
   * An executor reports a copy that ended without a commit: failed, read back damaged, or (a peer
   * copy) stopped on a cancel. Counted once: a backup the driver already ended (its target was
   * lost, or it was cancelled) is not counted again. What the copy wrote is deleted.
   */
  protected def copyFailed(failed: BackupFailedMsg): Unit = {
    val task = failed.task
    val counted = synchronized {
      val stillOpen = running.get(failed.executorId).exists(_.remove(task))
      // A remote copy may have committed its data file before it failed (one read back damaged
      // its writer deleted). Queued before the failure is counted, so a copy asked for again
      // waits for this delete (RemoteDeletes); an open copy is its output's only remote one.
      if (task.target == Target.Remote && !failed.rejected) {
        if (stillOpen) deleteRemoteCopy(task.shuffleId, task.mapId) else dropStaleCopy(task, failed.executorId)
      }
      stillOpen
    }
    if (counted) {
      if (failed.rejected) remoteRejected(task, failed.executorId, failed.reason)
      else {
        if (task.target == Target.Remote && !failed.sourceMissing) storeFailed(failed.reason)
        backupFailed(task, failed.executorId, failed.reason, failed.sourceMissing)
      }
    }
    // A peer copy ended without a commit may have left its data block on the peer: its source sent it first.
    if (task.target != Target.Remote) dropStaleCopy(task, failed.executorId)
  }

  /** The executor that wrote a remote copy read it back damaged, and deleted it: it is dropped like a failed copy. */
  protected def remoteRejected(task: BackupTask, source: String, problem: String): Unit = {
    damaged("remote", problem, s"shuffle ${task.shuffleId} map ${task.mapIndex}", "not used")
    backupFailed(task, source, s"remote copy failed verification ($problem)", sourceMissing = false, rejected = true)
  }

  /** A peer re-read its copy: intact, it counts as done; damaged, it is dropped like a failed copy. */
  protected def peerChecked(checked: PeerChecked): Unit = {
    val key = (checked.executorId, checked.check.shuffleId, checked.check.mapId)
    synchronized(unchecked.remove(key)).foreach { done =>
      if (checked.problem.isEmpty) committed(done)
      else {
        val task = done.task
        damaged("peer", checked.problem, s"shuffle ${task.shuffleId} map ${task.mapIndex} on executor ${task.target}",
          "not used, the output stays where it was or is recomputed")
        synchronized {
          recordOf(task).foreach { record =>
            // Still the tracker's location (the source was gone when the copy ended): undo that first.
            if (TRDriverPlugin.isOn(tracker, record, task.target)) {
              sourceBlockManager(record) match {
                case Some(bm) => moveOutput(record, bm)
                case None => blockManagers.get(task.target).foreach(tracker.unregisterMapOutput(record.shuffleId, record.mapIndex, _))
              }
            }
          }
          // Also when the tracker has moved on: readers may have cached the peer while it held the
          // output, and must look again before its files go.
          tracker.incrementEpoch()
          deletePeerCopy(task.target, task.shuffleId, task.mapId)
        }
        backupFailed(task, done.executorId, s"peer copy failed verification (${checked.problem})", sourceMissing = false,
          rejected = true)
      }
    }
  }

  /**
   * An executor could not write a backup to the remote store (unwritable, gone, full): one warning
   * when the store starts failing, none for the failures after it until a backup commits again.
   * The outputs stay where they are (unprotected); nothing half-written is ever read.
   */
  protected def storeFailed(reason: String): Unit =
    if (storeFailing.compareAndSet(false, true)) {
      logWarning(s"trspark: backups to the remote store ${conf.remotePath} fail ($reason); " +
        "map outputs stay unprotected until it takes backups again")
    } else logDebug(s"trspark: backup to the remote store failed again ($reason)")

  /**
   * A copy failed its checksum check and is treated as missing: counted in `backups_rejected`,
   * and one warning per kind (`remote`/`peer` and the problem) and application.
   */
  protected def damaged(where: String, problem: String, what: String, outcome: String): Unit = {
    count("backups_rejected")
    val message = s"trspark: $where copy of $what is $problem; $outcome"
    if (damageWarned.add(s"$where $problem")) logWarning(message) else logInfo(message)
  }

  private def committed(done: BackupDone): Unit = {
    val task = done.task
    var answers = 0
    val current = synchronized {
      val record = recordOf(task)
      // The output was forgotten or re-run while its copy ran: nothing will read the copy.
      if (record.isEmpty) endBackup(task, "backups_cancelled")
      answers = record.fold(0)(_ => endBackup(task, "backups_done"))
      record.filter(_ => answers > 0).map { record =>
        if (task.target == Target.Remote) {
          record.remote = CopyState.Done
          record.remoteCrcs = (done.indexCrc, done.dataCrc)
          record.remoteChecked = done.verified
        } else record.peers(task.target) = CopyState.Done
        stats(if (task.target == Target.Remote) "backups_remote" else "backups_local") += 1
        stats("backups_bytes") += done.bytes
        revive(record, task.target)
        record
      }
    }
    if (task.target == Target.Remote && storeFailing.compareAndSet(true, false)) {
      logInfo(s"trspark: the remote store ${conf.remotePath} takes backups again")
    }
    if (current.isEmpty) dropStaleCopy(task, done.executorId)
    current.foreach { record =>
      count(if (task.target == Target.Remote) "backups_bytes_remote" else "backups_bytes_local", done.bytes)
      obs.post(TRBackup(System.currentTimeMillis(), task.shuffleId, task.mapIndex, task.mapId, record.source,
        task.target, done.bytes, done.seconds))
      for (_ <- 1 to answers) emit(event("BlockBackedUp").put("shuffle_id", task.shuffleId).put("map_index", task.mapIndex)
        .put("target", task.target).put("bytes", done.bytes).put("seconds", done.seconds))
    }
  }

  /**
   * The source died while this copy of its output was being checked, so its loss found no copy
   * and the output was dropped: the checked copy is the output now (unless a re-run replaced it).
   */
  private def revive(record: OutputRecord, target: String): Unit =
    if (sourceGone(record) && TRDriverPlugin.isOn(tracker, record, record.source)) {
      val to = if (target == Target.Remote) Some(FallbackStorage.FALLBACK_BLOCK_MANAGER_ID) else liveBlockManager(target)
      to.foreach { bm =>
        repoint(record.shuffleId, record.mapIndex, record.mapId, bm)
        stats("outputs_repointed") += 1
        // Counted as lost at the loss; the event log records the restore too, as the counters do.
        obs.post(TRRestore(System.currentTimeMillis(), record.source, "copy checked after its source was lost",
          Seq(record.mapId), Nil))
      }
    }

  /** One requested backup ended without a copy; `source` is the executor it was copied from. */
  protected def backupFailed(task: BackupTask, source: String, reason: String, sourceMissing: Boolean,
      rejected: Boolean = false): Unit = {
    val answers = synchronized {
      val ended = endBackup(task, "backups_failed")
      if (ended > 0) {
        obs.post(TRBackupFailed(System.currentTimeMillis(), task.shuffleId, task.mapIndex, task.target, reason))
        recordOf(task).foreach { record =>
          if (task.target == Target.Remote) record.remote = CopyState.None else record.peers.remove(task.target)
          // Always-checkpoint keeps every output protected: a copy that failed (its target lost, or
          // one the engine had asked for before the fallback) is asked for again, once per output,
          // so a failing store does not loop. Not a copy that failed its check: its files are being
          // deleted, and a new copy to the same place would be deleted with them.
          val again = builtinAlways.get() && !sourceMissing && !rejected && !record.hasCopy && !record.busy
          if (again && retried.add((record.shuffleId, record.mapId))) {
            backupBuiltin(record)
          }
        }
      }
      ended
    }
    // One answer per engine command it stood for; none for one cancelled before it failed (the policy forgot it).
    for (_ <- 1 to answers) emit(event("BackupFailed").put("shuffle_id", task.shuffleId).put("map_index", task.mapIndex)
      .put("target", task.target).put("reason", reason).put("source", source).put("source_missing", sourceMissing))
  }

  /**
   * `executorId` is gone: every backup from it (queued here or handed to it) and every backup to
   * it, queued or running, will never happen -- report each as failed, so neither the ledger nor
   * the engine waits for it.
   */
  protected def abandonBackups(executorId: String): Unit = synchronized {
    val handedOut = running.remove(executorId).toSeq.flatten
    (work.remove(executorId).toSeq.flatten ++ handedOut).foreach { t =>
      backupFailed(t, executorId, s"source executor $executorId lost", sourceMissing = true)
    }
    // A copy cut off by the loss may have left files: a remote one its committed data file, a peer
    // one the data block it sends first (kept if its index landed too: that copy is the output now).
    handedOut.foreach(dropStaleCopy(_, executorId))
    for ((source, queue) <- work.toSeq; t <- queue.dequeueAll(_.target == executorId)) {
      backupFailed(t, source, s"target executor $executorId lost", sourceMissing = false)
    }
    // A throttled copy to it would go on pacing its bytes until the upload fails: stop it at its
    // source. A cancel names the output, so it is sent only when no other copy of that output runs there.
    for ((source, tasks) <- running.toSeq; t <- tasks.toSeq if t.target == executorId) {
      tasks -= t
      if (!tasks.exists(o => o.shuffleId == t.shuffleId && o.mapId == t.mapId)) {
        cancelAt(source, t.shuffleId, t.mapId)
      }
      backupFailed(t, source, s"target executor $executorId lost", sourceMissing = false)
    }
    cancels.remove(executorId)
    peerDeletes.remove(executorId)
    checks.remove(executorId)
    for (key @ (peer, _, _) <- unchecked.keys.toSeq if peer == executorId; done <- unchecked.remove(key)) {
      backupFailed(done.task, done.executorId, s"target executor $executorId lost", sourceMissing = false)
    }
  }

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
