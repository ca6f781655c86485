package org.apache.spark.trspark

import java.util.concurrent.atomic.AtomicBoolean

import scala.collection.mutable

import org.apache.spark.storage.FallbackStorage

/**
 * How each backup ends, from what the executors report: a copy done (a remote one read back by
 * its writer, a peer one then re-read by its peer) is committed; one failed, damaged or cut off by
 * an executor's loss is failed, and what it wrote is deleted ([[BackupFlow.dropStaleCopy]]).
 */
trait BackupOutcomes extends BackupFlow {
  /** True from a failed write to the remote store until a remote backup commits again. */
  protected val storeFailing = new AtomicBoolean(false)
  /** Kinds of damaged copies already warned about (one warning per kind and application). */
  protected val damageWarned = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /** An executor reports a copy done: a remote one commits, a peer one waits for its peer's re-read. */
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
}
