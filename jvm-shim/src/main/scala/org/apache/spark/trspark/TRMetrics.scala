package org.apache.spark.trspark

import java.util.concurrent.ConcurrentLinkedDeque
import java.util.concurrent.atomic.AtomicBoolean

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.codahale.metrics.{Gauge, Histogram, MetricRegistry}
import com.fasterxml.jackson.databind.JsonNode

import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.internal.Logging
import org.apache.spark.metrics.source.Source
import org.apache.spark.scheduler.SparkListenerEvent

/**
 * What trspark did, for people: counters and gauges in Spark's metrics system ([[TRMetrics]]),
 * trspark events on the listener bus (so they land in the event log, see TREvents.scala), the
 * engine's last decisions and the "trspark" tab of the Spark UI ([[TRTab]]).
 *
 * The counters themselves live in the driver plugin's `stats` (one book for the metrics, the
 * UI tab, `TRStatus` and the shutdown line); this class only adds what the plugin does not
 * keep: the engine's decision latency, the safety-belt state and the executors it drained.
 */
final class TRObserver(plugin: TRDriverPlugin) extends Logging {
  @volatile private var sc: SparkContext = _
  private val belt = new AtomicBoolean(false)
  private val drained = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  private val decisions = new ConcurrentLinkedDeque[TRDecision]()
  /** Seconds from sending an event to the engine to its acknowledgement (its commands come first), in microseconds. */
  val latency: Histogram = new Histogram(new com.codahale.metrics.ExponentiallyDecayingReservoir())

  /** Events can be posted from now on (the listener bus keeps them until it starts). */
  def bind(context: SparkContext): Unit = sc = context

  /** Register the metrics source and the UI tab (once the application id exists: it names the metrics). */
  def start(): Unit = {
    try SparkEnv.get.metricsSystem.registerSource(new TRMetrics(plugin, this))
    catch { case NonFatal(e) => logWarning(s"trspark: metrics source not registered: $e") }
    try sc.ui.foreach(ui => ui.attachTab(new TRTab(ui, plugin, this)))
    catch { case NonFatal(e) => logWarning(s"trspark: UI tab not attached: $e") }
  }

  /** Put `event` on Spark's listener bus (and so into the event log), once the application runs. */
  def post(event: => SparkListenerEvent): Unit = Option(sc).foreach(_.listenerBus.post(event))

  def beltOn: Boolean = belt.get()

  /** The engine acknowledged an event sent `nanos` ago. */
  def acked(nanos: Long): Unit = latency.update(nanos / 1000)

  /**
   * Note one engine command before the plugin applies it: the belt and the last decisions. Drains
   * and releases are noted by [[drainsApplied]] and [[releaseDone]], once carried out: a master
   * without the scheduler hook, a fallback or a busy executor leaves them undone.
   */
  def command(node: JsonNode): Unit = try {
    val kind = node.path("type").asText()
    val now = System.currentTimeMillis()
    if (kind == "SafetyBelt") {
      val on = node.path("on").asBoolean()
      if (belt.getAndSet(on) != on) post(TRSafetyBelt(now, on, node.path("reason").asText()))
    }
    // Hints come with most events: listing them would push every other decision out.
    if (kind != "SchedulingHints") remember(TRDecision(now, kind, TRObserver.summary(node)))
  } catch { case NonFatal(e) => logDebug(s"trspark: could not observe command: $e") }

  /** The task scheduler now holds hints that drain `executorIds`. */
  def drainsApplied(executorIds: Iterable[String]): Unit =
    executorIds.foreach(id => if (drained.add(id)) plugin.count("executors_drained"))

  /** `executorId` was let go on the engine's `ReleaseExecutor` (`reason`), now. */
  def releaseDone(executorId: String, reason: String): Unit =
    post(TRExecutorRelease(System.currentTimeMillis(), executorId, reason))

  private def remember(decision: TRDecision): Unit = {
    decisions.addFirst(decision)
    while (decisions.size > TRObserver.KeptDecisions) decisions.pollLast()
  }

  /** The newest decisions first. */
  def lastDecisions: Seq[TRDecision] = decisions.asScala.toSeq

  /** Every counter and gauge by its metric name (what the metrics source and the UI tab show). */
  def snapshot: Seq[(String, Long)] =
    TRMetrics.Counters.map { case (metric, stat, _) => metric -> plugin.stat(stat) } ++ Seq(
      "engine_fallback" -> (if (plugin.fallenBack) 1L else 0L),
      "safety_belt" -> (if (beltOn) 1L else 0L),
      "engine_decisions" -> latency.getCount)
}

/** One engine command as the UI tab lists it (`time`: epoch ms). */
final case class TRDecision(time: Long, kind: String, detail: String)

object TRObserver {
  val KeptDecisions = 20

  /** The command's fields other than its type, as `key=value` pairs. */
  def summary(node: JsonNode): String =
    node.fields().asScala.filter(_.getKey != "type").map(e => s"${e.getKey}=${e.getValue}").mkString(" ").take(200)
}

/**
 * trspark's Dropwizard metrics, source `trspark` of the driver: each counter of [[TRMetrics.Counters]]
 * as a gauge over the plugin's counter, the fallback and safety-belt states (1 = on), and the
 * engine decision latency histogram (microseconds).
 */
final class TRMetrics(plugin: TRDriverPlugin, observer: TRObserver) extends Source {
  override val sourceName: String = "trspark"
  override val metricRegistry: MetricRegistry = new MetricRegistry

  private def gauge(name: String)(value: => Long): Unit =
    metricRegistry.register(name, new Gauge[Long] { override def getValue: Long = value })

  TRMetrics.Counters.foreach { case (metric, stat, _) => gauge(metric)(plugin.stat(stat)) }
  gauge("engine_fallback")(if (plugin.fallenBack) 1L else 0L)
  gauge("safety_belt")(if (observer.beltOn) 1L else 0L)
  metricRegistry.register("engine_decision_latency_us", observer.latency)
}

object TRMetrics {
  /** (metric name, driver plugin counter, meaning). Bytes count index plus data files of committed copies. */
  val Counters: Seq[(String, String, String)] = Seq(
    ("backups_planned", "backups_requested", "backups asked for by the policy"),
    ("backups_started", "backups_started", "backups handed to their source executor"),
    ("backups_finished", "backups_done", "backups committed (remote ones verified)"),
    ("backups_failed", "backups_failed", "backups that ended without a copy"),
    ("backups_rejected", "backups_rejected", "copies found damaged or missing by a check (when written, also in backups_failed)"),
    ("backups_cancelled", "backups_cancelled", "backups cancelled before they ended (by the policy, a newer output, or the shuffle cleaned up)"),
    ("backups_to_peers", "backups_local", "committed copies on peer executors"),
    ("backups_to_remote", "backups_remote", "committed copies in the remote store"),
    ("bytes_to_peers", "backups_bytes_local", "bytes copied to peer executors"),
    ("bytes_to_remote", "backups_bytes_remote", "bytes copied to the remote store"),
    ("outputs_restored", "outputs_repointed", "lost map outputs re-pointed to a backup"),
    ("outputs_lost", "outputs_lost", "lost map outputs without a copy (recomputed if read again)"),
    ("outputs_forgotten", "outputs_forgotten", "map outputs whose shuffle Spark removed (their copies deleted)"),
    ("map_tasks_rerun", "maps_rerun", "map outputs written again by a later attempt"),
    ("notices", "notices", "termination notices received"),
    ("executors_drained", "executors_drained", "executors the engine stopped giving tasks to"),
    ("executors_released", "executors_released", "executors released early (before a notice's deadline, or idle)"),
    ("executors_released_idle", "executors_released_idle",
      "of executors_released, those released idle with their outputs saved (spark.trspark.release.idle)"),
    ("idle_releases_kept", "idle_releases_kept",
      "idle releases Spark did not carry out (a task took the executor, it holds cached blocks, or dynamic allocation needs it)"),
    ("internal_errors", "internal_errors", "failures of trspark's own code on Spark's paths (each falls back)"))
}

/** py4j entry point: every trspark metric of the running application as one JSON object. */
object TRMetricsStatus {
  def snapshotJson: String = TRDriverPlugin.active.map { plugin =>
    val node = Json.mapper.createObjectNode()
    plugin.obs.snapshot.foreach { case (k, v) => node.put(k, v) }
    Json.mapper.writeValueAsString(node)
  }.getOrElse("{}")
}
