package org.apache.spark.trspark

import scala.collection.mutable

import org.apache.spark.storage.{BlockManagerId, FallbackStorage}

/** Loss: re-point outputs to a surviving copy before the DAGScheduler drops or re-runs them. */
trait OutputLoss extends BackupFlow {
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
        s"${lost.size} without backup are recomputed if read again")
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
}
