package org.apache.spark.trspark

import java.util.concurrent.{Callable, TimeUnit}

import scala.collection.mutable
import scala.util.{Failure, Success, Try}

import org.apache.spark.FetchFailed
import org.apache.spark.storage.{BlockManagerId, FallbackStorage}

/** Loss: re-point outputs to a surviving copy before the DAGScheduler drops or re-runs them. */
trait OutputLoss extends BackupOutcomes {
  /** Outputs, (shuffle, map id), whose remote copy a loss is reading before it re-points them. */
  private val restoring = mutable.Set.empty[(Int, Long)]

  /**
   * `executorId`'s map outputs are gone (it was lost, or a reducer could not fetch from it):
   * move every output that lived there to a surviving copy -- a peer, the source, or the remote
   * store -- with [[moveOutput]], which also revives an output the DAGScheduler already removed.
   * Idempotent; called synchronously by [[TRTaskScheduler]] and again (possibly late) from the
   * listener. Spark stops trusting the files of the executor it blames either way, and so does
   * the plugin: no output is moved back to them ([[OutputRecord.sourceLost]]).
   *
   * A remote copy is re-read before readers are sent to it ([[remoteIntact]]). Those reads run
   * in parallel and outside the plugin's lock: on a blob store they take seconds, and meanwhile
   * events, executor polls and the engine's commands go on.
   */
  def outputsLost(executorId: String, why: String, dead: Boolean): Unit = {
    val (moved, lost, remoteOnly) = synchronized {
      // A fetch failure loses the executor's outputs (Spark unregisters them all), not the executor.
      val firstTime = dead && deadExecutors.add(executorId)
      // Listed before the copies to it are abandoned: that forgets them, yet the tracker may point
      // at a copy whose index just landed there and whose check has not answered.
      val touched = ledger.touching(executorId)
      if (dead) abandonBackups(executorId)
      val moved = mutable.Buffer.empty[Long]
      val lost = mutable.Buffer.empty[OutputRecord]
      val remoteOnly = mutable.Buffer.empty[OutputRecord]
      for (record <- touched) {
        if (dead) record.peers.remove(executorId)
        if (!dead && record.source == executorId) record.sourceLost = true
        if (TRDriverPlugin.isOn(tracker, record, executorId)) localSurvivor(record, executorId) match {
          case Some(bm) =>
            moveOutput(record, bm)
            moved += record.mapId
          case None if record.remote == CopyState.Done =>
            // Another report of the same loss may be reading this copy already: it re-points it.
            if (restoring.add((record.shuffleId, record.mapId))) remoteOnly += record
          case None => if (firstTime) lost += record
        }
      }
      (moved, lost, remoteOnly.toSeq)
    }
    val intact = remoteIntact(remoteOnly)
    synchronized {
      remoteOnly.foreach(record => restoring.remove((record.shuffleId, record.mapId)))
      for (record <- remoteOnly) {
        // Re-checked: the copy may have been dropped, or the output moved, while it was read.
        val stillThere = TRDriverPlugin.isOn(tracker, record, executorId)
        if (stillThere && record.remote == CopyState.Done && intact(record)) {
          moveOutput(record, FallbackStorage.FALLBACK_BLOCK_MANAGER_ID)
          moved += record.mapId
        } else if (stillThere && deadExecutors.contains(executorId)) lost += record // counted once: one call reads it
      }
      stats("outputs_repointed") += moved.size
      stats("outputs_lost") += lost.size
    }
    if (moved.nonEmpty || lost.nonEmpty) {
      obs.post(TRRestore(System.currentTimeMillis(), executorId, why, moved.toSeq, lost.map(_.mapId).toSeq))
      logInfo(s"trspark: $why on executor $executorId: re-pointed ${moved.size} map outputs to backups, " +
        s"${lost.size} without backup are recomputed if read again")
    }
    lost.foreach(blockLost)
  }

  /** Tell the engine that `record`'s output is gone with no copy left. */
  private def blockLost(record: OutputRecord): Unit =
    emit(event("BlockLost").put("shuffle_id", record.shuffleId).put("map_index", record.mapIndex))

  /**
   * A reducer on `reducer` failed to fetch ([[FetchFailed]]): the output Spark names may be a
   * broken copy in the store ([[remoteReadFailed]]), and the executor Spark blames loses its
   * outputs either way ([[outputsLost]]). `wait` as for [[remoteReadFailed]].
   */
  def fetchFailed(failure: FetchFailed, reducer: String, wait: Boolean): Unit = {
    remoteReadFailed(failure.shuffleId, failure.mapIndex, reducer, failure.bmAddress.executorId, wait)
    outputsLost(failure.bmAddress.executorId, "fetch failed", dead = false)
  }

  /**
   * A reducer on `reducer` could not fetch output (`shuffleId`, `mapIndex`), and Spark blames
   * `blamed`. Spark reads an output the tracker serves from the remote store as a local block,
   * so a copy that failed there (removed, unreadable, the store down) blames the reducer's own
   * executor, and Spark's retry would read the same copy again until the job aborts. Such an
   * output is unregistered, so the map stage Spark resubmits runs it again, and its copy is
   * dropped. A reducer stops at the first block it cannot read, so the shuffle's other outputs
   * served from the store are checked too ([[remoteIntact]]), before Spark resubmits when `wait`
   * (the scheduler's hook), else on the store thread (the listener's, which must not block).
   */
  private def remoteReadFailed(shuffleId: Int, mapIndex: Int, reducer: String, blamed: String, wait: Boolean): Unit = {
    val (failed, others) = synchronized {
      val failed = ledger.get(shuffleId, mapIndex).filter(r => mapIndex >= 0 && blamed == reducer && servedFromStore(r))
      failed.foreach { r => unregisterFromStore(r); deleteRemoteCopy(r.shuffleId, r.mapId) }
      val others = if (failed.isEmpty) Nil else ledger.all.filter(r => r.shuffleId == shuffleId && servedFromStore(r)).toSeq
      (failed, others)
    }
    failed.foreach { r =>
      damaged("remote", "not readable by a reducer", r.toString, "unregistered, the output is recomputed")
      blockLost(r)
    }
    storeLoss(failed.toSeq)
    if (others.nonEmpty) {
      // remoteIntact deletes each copy it finds damaged; what is still served from it goes too.
      def recheck(): Unit = {
        val intact = remoteIntact(others)
        val gone = synchronized(others.filter(r => !intact(r) && servedFromStore(r)).map { r => unregisterFromStore(r); r })
        gone.foreach(blockLost)
        storeLoss(gone)
      }
      if (wait) Guard.run("TRDriverPlugin.recheckStore")(recheck())
      else offThread(storeWork, "re-checking the remote store")(Guard.run("TRDriverPlugin.recheckStore")(recheck()))
    }
  }

  /** Record in the event log, as a loss at the store, the outputs lost because their copy there could not be read. */
  private def storeLoss(records: Seq[OutputRecord]): Unit = if (records.nonEmpty) {
    obs.post(TRRestore(System.currentTimeMillis(), FallbackStorage.FALLBACK_BLOCK_MANAGER_ID.executorId,
      "remote copy unreadable", Nil, records.map(_.mapId)))
  }

  private def servedFromStore(record: OutputRecord): Boolean = TRDriverPlugin.liveOn(tracker, record.shuffleId,
    record.mapIndex, record.mapId, FallbackStorage.FALLBACK_BLOCK_MANAGER_ID.executorId)

  /** Called holding the plugin's lock: the tracker forgets the store's copy, and so does the record. */
  private def unregisterFromStore(record: OutputRecord): Unit = {
    tracker.unregisterMapOutput(record.shuffleId, record.mapIndex, FallbackStorage.FALLBACK_BLOCK_MANAGER_ID)
    record.remote = CopyState.None
    stats("outputs_lost") += 1
  }

  /** Where a lost output can be read now without the store: a finished peer copy, or its source while Spark trusts it. */
  private def localSurvivor(record: OutputRecord, lostExecutor: String): Option[BlockManagerId] = {
    def alive(e: String) = e != lostExecutor && !deadExecutors.contains(e)
    val peer = record.peers.collectFirst { case (e, CopyState.Done) if alive(e) => e }.flatMap(blockManagers.get)
    peer.orElse(sourceBlockManager(record).filter(_ => alive(record.source)))
  }

  /**
   * Check each remote copy against its marker and the CRC32s computed when it was written:
   * a copy damaged or removed since counts as missing (deleted; the output is recomputed). A data
   * file unchanged since its writer read it back is not read again: an executor's outputs
   * can take minutes to download, and the scheduler thread waits here. A copy not checked within
   * `RestoreCheckSeconds` is not used either (a hung store must not hold that thread), but kept.
   */
  private def remoteIntact(records: Seq[OutputRecord]): OutputRecord => Boolean = {
    if (records.isEmpty || restoreChecks.isShutdown) return _ => false // none, or the application is stopping
    val checks = records.map { record =>
      val (indexCrc, dataCrc, checked) = synchronized((record.remoteCrcs._1, record.remoteCrcs._2, record.remoteChecked))
      record -> restoreChecks.submit(new Callable[Option[String]] {
        override def call(): Option[String] = remote.problem(record.shuffleId, record.mapId, indexCrc, dataCrc, checked)
      })
    }
    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(OutputLoss.RestoreCheckSeconds)
    val intact = checks.filter { case (record, check) =>
      Try(check.get(math.max(deadline - System.nanoTime(), 0L), TimeUnit.NANOSECONDS)) match {
        case Success(None) => true
        case Success(Some(problem)) =>
          damaged("remote", problem, record.toString, "treated as missing, the output is recomputed")
          synchronized { record.remote = CopyState.None; deleteRemoteCopy(record.shuffleId, record.mapId) }
          false
        case Failure(_) =>
          // Unread is not damaged: the copy is not used for this loss, but it is kept.
          check.cancel(true)
          logWarning(s"trspark: remote copy of $record not read within ${OutputLoss.RestoreCheckSeconds} s; " +
            "not used, the output is recomputed if read again")
          false
      }
    }.map(_._1).toSet
    intact.contains
  }
}

object OutputLoss {
  /** Longest wait (s) for the re-reads of the remote copies a lost executor's outputs need. */
  val RestoreCheckSeconds = 60L
}
