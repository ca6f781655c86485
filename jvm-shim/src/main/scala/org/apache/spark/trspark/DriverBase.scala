package org.apache.spark.trspark

import java.util.concurrent.{ExecutorService, Executors, RejectedExecutionException}
import java.util.concurrent.atomic.AtomicBoolean

import scala.collection.mutable

import com.fasterxml.jackson.databind.node.ObjectNode

import org.apache.spark.{MapOutputTrackerMaster, SparkContext, SparkEnv}
import org.apache.spark.api.plugin.DriverPlugin
import org.apache.spark.internal.Logging

/**
 * What the parts of the driver plugin share ([[BackupFlow]], [[BackupOutcomes]], [[OutputLoss]],
 * [[EngineCommands]], [[TRDriverPlugin]]): the application, the settings, the remote store, the
 * counters. Every part locks the one plugin object (`synchronized`).
 */
abstract class DriverBase extends DriverPlugin with Logging {
  protected var sc: SparkContext = _
  protected var conf: TRConf = _
  protected var remote: RemoteBackups = _
  /** True while the built-in always policy decides (mode `always`, or after a fallback). */
  protected val builtinAlways = new AtomicBoolean(false)
  /** Outputs whose failed copy always-checkpoint asked for once more, (shuffle, map id): never twice. */
  protected val retried = mutable.Set.empty[(Int, Long)]
  /** Remote-store work off the RPC and engine threads: deletes there, and the listener's re-checks of copies there. */
  protected val storeWork = Executors.newSingleThreadExecutor(Daemon.factory("trspark-store"))
  /** Re-reads of remote copies before a lost executor's outputs are re-pointed to them, in parallel. */
  protected val restoreChecks = Executors.newFixedThreadPool(8, Daemon.factory("trspark-restore"))
  /**
   * Executor releases, off the RPC and engine threads and not queued behind store work: a
   * kill waits for the cluster manager, and until it is registered a master without the
   * scheduler hook can still offer the leaving executor a task.
   */
  protected val releaser = Executors.newSingleThreadExecutor(Daemon.factory("trspark-release"))

  /**
   * `work` on `pool`, unless the plugin has shut its pools down (then false): Spark still delivers
   * listener events while the application stops, and the store's copies go with the application anyway.
   */
  protected def offThread(pool: ExecutorService, what: String)(work: => Unit): Boolean =
    try { pool.execute(() => work); true }
    catch { case _: RejectedExecutionException => logDebug(s"trspark: $what skipped: the application is stopping"); false }
  /**
   * Counters, read by tests and tools (`TRStatus.stat`) and printed at shutdown. Committed backups:
   * `backups_done` = `backups_local` (peer copies) + `backups_remote`; `backups_bytes` sums the
   * index and data file bytes of all of them.
   */
  val stats: mutable.Map[String, Long] = mutable.LinkedHashMap(
    "backups_requested" -> 0L, "backups_done" -> 0L, "backups_local" -> 0L, "backups_remote" -> 0L,
    "backups_bytes" -> 0L, "backups_failed" -> 0L, "backups_cancelled" -> 0L, "backups_rejected" -> 0L,
    "outputs_repointed" -> 0L, "outputs_lost" -> 0L, "notices" -> 0L,
    "duplicates_launched" -> 0L, "duplicates_killed" -> 0L, "executors_released" -> 0L, "executors_released_idle" -> 0L,
    "idle_releases_kept" -> 0L, "internal_errors" -> 0L)
  /** Executors let go on the engine's `ReleaseExecutor` (their loss is reported as `released`). */
  protected val released = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  /**
   * Released executors whose loss the engine heard of at their release. Spark reports it later
   * (standalone waits up to `spark.standalone.executorRemoveDelayOnDisconnection`, 5 s, for the
   * master's reason), and that report is not sent again.
   */
  protected val lossSent = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /** Metrics, event-log records and the UI tab (TRMetrics.scala). */
  def obs: TRObserver

  /** An event for the engine; `time` is seconds since the application started, never decreasing. */
  def event(kind: String): ObjectNode

  /** Send `event` to the engine (unless the built-in policy decides). */
  def emit(event: ObjectNode): Unit

  /** The driver's map output tracker (where every map output's location is registered). */
  protected def tracker: MapOutputTrackerMaster = SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]

  /** Add `n` to counter `name` (for the scheduler hooks). */
  def count(name: String, n: Long = 1): Unit = synchronized(stats(name) = stats.getOrElse(name, 0L) + n)
}
