package org.apache.spark.trspark

import scala.collection.mutable
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.JsonNode

import org.apache.spark.scheduler.ExecutorKilled
import org.apache.spark.scheduler.cluster.{CoarseGrainedClusterMessages, CoarseGrainedSchedulerBackend}
import org.apache.spark.storage.FallbackStorage

/** The policy engine's commands, applied on the driver (each runs on the bridge's reader thread). */
trait EngineCommands extends OutputLoss {
  /** Apply one engine command (runs on the bridge's reader thread). */
  protected def command(node: JsonNode): Unit = node.path("type").asText() match {
    // Fallen back: answers to events sent before then must not undo it (hints, drains, releases).
    case kind if builtinAlways.get() && kind != "SafetyBelt" && kind != "Advice" =>
      logDebug(s"trspark: engine command $kind ignored after the fallback to always-checkpoint")
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
        if (sourceGone(record)) {
          refuse(s"source executor ${record.source} lost or its files lost", missing = true)
        }
        else if (target != Target.Remote && (!blockManagers.contains(target) || deadExecutors.contains(target))) {
          refuse(s"target executor $target lost or unknown", missing = false)
        } else if (target == record.source) {
          refuse(s"target executor $target holds the output itself", missing = false)
        } else if (!answeredAsCopy(record, target)) request(record, target)
      case _ => refuse("no such map output (unknown or superseded)", missing = true)
    }
  }

  /**
   * A `Backup` of a copy already asked for is answered as that copy: when it ends, if it is open,
   * or at once, if it is committed. A second copy would write the same files; the engine hears
   * once of every command it sent, as the simulator answers each. False for no such copy.
   */
  private def answeredAsCopy(record: OutputRecord, target: String): Boolean =
    (if (target == Target.Remote) record.remote else record.peers.getOrElse(target, CopyState.None)) match {
      case CopyState.Done =>
        emit(event("BlockBackedUp").put("shuffle_id", record.shuffleId).put("map_index", record.mapIndex)
          .put("target", target).put("bytes", record.bytes).put("seconds", 0.0))
        true
      case CopyState.Running =>
        open.values.find(t => t.shuffleId == record.shuffleId && t.mapId == record.mapId && t.target == target)
          .exists { t => repeats(t.id) = repeats.getOrElse(t.id, 0) + 1; true }
      case CopyState.None => false
    }

  /** `CancelBackup`: drop the queued copy, or tell its source to abandon the running one. */
  private def cancelBackup(shuffleId: Int, mapIndex: Int): Unit = synchronized {
    ledger.get(shuffleId, mapIndex).foreach(stopUnfinishedCopies)
  }

  /** Drop the queued copies of `record` and have its source abandon the running ones. */
  private def stopUnfinishedCopies(record: OutputRecord): Unit = {
    cancelCopies(record)
    cancelUnchecked(record)
    if (record.remote == CopyState.Running) record.remote = CopyState.None
    record.peers.filterInPlace((_, s) => s != CopyState.Running)
  }

  /** `DropBackup`: delete the copies of an output nobody will read again (keeping the one that *is* the output). */
  private def dropBackup(shuffleId: Int, mapIndex: Int): Unit = synchronized {
    ledger.get(shuffleId, mapIndex).foreach { record =>
      // A copy still running would land after the drop and be kept as a backup nobody reads.
      stopUnfinishedCopies(record)
      // With its source gone and the tracker re-pointed to the store, the remote copy *is* the
      // output (a later job may still read it): it stays, like the newest peer copy below.
      val remoteIsTheOutput = TRDriverPlugin.isOn(tracker, record, FallbackStorage.FALLBACK_BLOCK_MANAGER_ID.executorId)
      if (record.remote != CopyState.None && !remoteIsTheOutput) {
        record.remote = CopyState.None
        deleteRemoteCopy(record.shuffleId, record.mapId)
      }
      if (!sourceGone(record) && record.peers.nonEmpty) dropPeerCopies(record)
    }
  }

  /**
   * A peer copy may be the tracker's location (the index upload re-points it until the driver
   * hears the copy ended, and executors may have cached that): move the output back to its living
   * source, then delete the peers' files. With the source gone (or its files lost), the newest
   * peer copy *is* the output and is not dropped (the caller checks).
   */
  private def dropPeerCopies(record: OutputRecord): Unit = {
    // Only from a peer: an output a fetch failure moved to the store stays there.
    val onAPeer = record.peers.keys.exists(TRDriverPlugin.isOn(tracker, record, _))
    blockManagers.get(record.source).foreach { bm =>
      if (onAPeer) moveOutput(record, bm)
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
      // Its outputs move to their other copies *before* it goes, and it counts as dead from
      // now: a killed JVM takes a while to shut down, and until the driver hears of the loss
      // a reader could be sent to it, or to a peer copy on another executor that is leaving
      // too (measured: a stage failed 4 times re-pointing between two released executors).
      // The engine hears of it now too, as the simulator tells it: its lifetime and the peers it
      // may copy to must not wait for Spark's report.
      sc.taskScheduler match {
        case hooked: HintedScheduling => hooked.exclude(id)
        case _ => // Spark stops offering it once killExecutors below has registered the request
      }
      emit(event("ExecutorLost").put("executor_id", id).put("reason", "released"))
      lossSent.add(id)
      // Not on the bridge's reader thread: moving the outputs re-reads remote copies (seconds on a
      // blob store, while no Ack is read and the engine would count as unresponsive), and
      // killExecutors waits for the cluster manager's answer. The outputs still move first.
      offThread(releaser, s"releasing executor $id") {
        releaseOutputs(id)
        try {
          val killed = backend.killExecutors(Seq(id), adjustTargetNumExecutors = false, countFailures = false,
            force = true)
          // Counted once Spark kills it, as the event log's release record: Spark refuses an
          // executor it no longer knows (lost before the command came).
          if (killed.contains(id)) {
            count("executors_released")
            obs.releaseDone(id, reason)
            removeNow(id)
          }
        } catch { case NonFatal(e) => logWarning(s"trspark: could not release executor $id: ${e.getMessage}") }
      }
    case _ => logDebug(s"trspark: ReleaseExecutor $id ignored (gone, already released, or no allocation client)")
  }

  /** A released executor's outputs move to their copies, on the releaser thread before it goes. */
  private def releaseOutputs(id: String): Unit = Guard.run("TRDriverPlugin.releaseOutputs") {
    outputsLost(id, "released", dead = true)
    tracker.incrementEpoch()
  }

  /**
   * Remove a killed executor from the scheduler now, as Spark does when the executor's process
   * exits: a standalone executor takes about 5 s to exit after SIGTERM, and until then its cores
   * still count in `spark.default.parallelism`, by which adaptive execution splits the next stage
   * into one partition per core, one more than the cores that can run it. Only after
   * `killExecutors` (which skips executors the scheduler no longer lists), so the process still goes.
   */
  private def removeNow(id: String): Unit = sc.schedulerBackend match {
    case backend: CoarseGrainedSchedulerBackend =>
      backend.driverEndpoint.send(CoarseGrainedClusterMessages.RemoveExecutor(id, ExecutorKilled))
    case _ =>
  }

  /**
   * `ReleaseExecutor` with `idle`: dynamic allocation's scale-down of an idle executor whose
   * outputs are saved elsewhere. Only if Spark finds it idle too; its outputs move to their
   * copies first (no reader is sent to it any more), then Spark removes it without a
   * replacement. If Spark keeps it (it took a task meanwhile, holds cached blocks, or dynamic
   * allocation's target counts on it), so does trspark, and the engine hears `ReleaseKept`: it
   * asks again after another idle spell.
   */
  private def idleRelease(id: String, reason: String): Unit = {
    if (deadExecutors.contains(id) || released.contains(id)) {
      logDebug(s"trspark: idle release of executor $id skipped (gone, or released already)")
      return
    }
    if (!Elastic.idle(sc, id)) {
      // Asked again after every idle spell while, say, its cache lasts: not worth a line each time.
      logDebug(s"trspark: executor $id kept: Spark does not find it idle")
      releaseKept(id)
      return
    }
    if (!released.add(id)) return
    logInfo(s"trspark: releasing idle executor $id ($reason)")
    offThread(releaser, s"releasing idle executor $id") { // off the reader thread, as in releaseExecutor
      releaseOutputs(id)
      val gone = Guard.orElse("Elastic.remove", false)(Elastic.remove(sc, id))
      if (gone) {
        count("executors_released")
        count("executors_released_idle")
        obs.releaseDone(id, reason)
      }
      else if (stillActive(id)) {
        deadExecutors.remove(id)
        released.remove(id)
        logInfo(s"trspark: executor $id kept: Spark did not remove it (a task took it, or dynamic allocation needs it)")
        releaseKept(id)
      } else {
        released.remove(id) // lost meanwhile (an eviction, or dynamic allocation's own removal): it stays dead
        logInfo(s"trspark: executor $id was lost before its idle release")
      }
    }
  }

  /** Tell the engine that Spark keeps `id` after an idle release, and count it. */
  private def releaseKept(id: String): Unit = {
    count("idle_releases_kept")
    emit(event("ReleaseKept").put("executor_id", id))
  }

  /** Whether Spark still counts `id` among its live executors. */
  private def stillActive(id: String): Boolean = sc.schedulerBackend match {
    case backend: CoarseGrainedSchedulerBackend => backend.isExecutorActive(id)
    case _ => false
  }

  /** `SchedulingHints`: replace the task scheduler's hints (a master without the hook ignores them). */
  private def schedulingHints(node: JsonNode): Unit = sc.taskScheduler match {
    case hooked: HintedScheduling =>
      try {
        val hints = SchedulingHints.fromJson(node)
        hooked.setHints(hints)
        obs.drainsApplied(hints.drain.filter(stillActive)) // an id Spark no longer lists drains nothing
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
}
