package org.apache.spark.trspark

import scala.xml.Node

import jakarta.servlet.http.HttpServletRequest
import org.json4s.{JArray, JDouble, JInt, JObject, JString, JValue}

import org.apache.spark.ui.{SparkUI, SparkUITab, UIUtils, WebUIPage}

/** The "trspark" tab of the driver's Spark UI: the live counters and the engine's last decisions. */
class TRTab(ui: SparkUI, plugin: TRDriverPlugin, observer: TRObserver) extends SparkUITab(ui, "trspark") {
  attachPage(new TRPage(this, plugin, observer))
}

/** The tab's one page; each value cell has the id `trspark-<metric name>` (for scripts and tests). */
class TRPage(tab: TRTab, plugin: TRDriverPlugin, observer: TRObserver) extends WebUIPage("") {
  override def render(request: HttpServletRequest): Seq[Node] = {
    val meaning = TRMetrics.Counters.map { case (metric, _, text) => metric -> text }.toMap ++ Map(
      "engine_fallback" -> "1 when the engine is unavailable and every output is backed up",
      "safety_belt" -> "1 while the engine's safety belt is on",
      "engine_decisions" -> "events the engine acknowledged")
    val counters = UIUtils.listingTable(Seq("Metric", "Value", "Meaning"),
      (row: (String, Long)) => <tr><td>{row._1}</td><td id={s"trspark-${row._1}"}>{row._2}</td>
        <td>{meaning.getOrElse(row._1, "")}</td></tr>,
      observer.snapshot, id = Some("trspark-counters"))
    val snap = observer.latency.getSnapshot
    val latency = <p id="trspark-latency">Engine decision latency (ms): median {f"${snap.getMedian / 1000}%.1f"},
      95th percentile {f"${snap.get95thPercentile / 1000}%.1f"}, max {f"${snap.getMax / 1000.0}%.1f"}
      over {observer.latency.getCount} events.</p>
    val decisions = UIUtils.listingTable(Seq("Time", "Command", "Detail"),
      (d: TRDecision) => <tr><td>{UIUtils.formatDate(d.time)}</td><td>{d.kind}</td><td>{d.detail}</td></tr>,
      observer.lastDecisions, id = Some("trspark-decisions"))
    val content = <div>
      <h4>Counters</h4>{counters}{latency}
      <h4>Last engine decisions (newest first, scheduling hints left out)</h4>{decisions}
    </div>
    UIUtils.headerSparkPage(request, "trspark", content, tab)
  }

  /** The page's figures at `/trspark/json`: the counters, the decision latency (ms) and the last decisions. */
  override def renderJson(request: HttpServletRequest): JValue = {
    val snap = observer.latency.getSnapshot
    JObject(
      "counters" -> JObject(observer.snapshot.map { case (name, value) => name -> JInt(value) }.toList),
      "latency_ms" -> JObject("median" -> JDouble(snap.getMedian / 1000), "p95" -> JDouble(snap.get95thPercentile / 1000),
        "max" -> JDouble(snap.getMax / 1000.0), "events" -> JInt(observer.latency.getCount)),
      "decisions" -> JArray(observer.lastDecisions.map { d =>
        JObject("time" -> JInt(d.time), "command" -> JString(d.kind), "detail" -> JString(d.detail))
      }.toList))
  }
}
