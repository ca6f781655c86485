package org.apache.spark.trspark

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.core.json.JsonReadFeature
import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.json.JsonMapper

/** Where a backup goes: the remote store, or a peer executor's block manager. */
object Target {
  val Remote = "remote"
}

/**
 * Driver -> executor: copy one map output (index + data file) of `shuffleId`/`mapId`. `id` tells
 * this request apart from an earlier one of the same output and target, whose report may still come.
 */
case class BackupTask(shuffleId: Int, mapIndex: Int, mapId: Long, target: String,
    peerHost: String = "", peerPort: Int = 0, throttle: Double = 0, id: Long = 0)

/** Executor -> driver (ask): "any work for me?"; the answer is a [[Work]]. */
case class PollWork(executorId: String, capacity: Int)

/**
 * The answer to [[PollWork]]: backups to run, running/queued ones to abandon, peer copies
 * this executor holds for others that are no longer wanted (delete their files), and peer copies
 * it just received, to re-read against the CRC32s their source computed while sending them.
 * `quiet`: no job runs and no copy is pending anywhere, so the executor may poll less often.
 */
case class Work(tasks: Seq[BackupTask], cancelled: Seq[(Int, Long)], deletes: Seq[(Int, Long)] = Nil,
    checks: Seq[PeerCheck] = Nil, quiet: Boolean = false)

/** Driver -> peer executor: re-read its copy of `shuffleId`/`mapId`; the CRC32s the source sent. */
case class PeerCheck(shuffleId: Int, mapId: Long, indexCrc: Long, dataCrc: Long)

/** Peer executor -> driver: the outcome of a [[PeerCheck]]; `problem` is empty when the copy is intact. */
case class PeerChecked(executorId: String, check: PeerCheck, problem: String)

/**
 * Executor -> driver: a backup was written and committed, with the CRC32s of what was sent. A
 * remote copy comes read back by its writer ([[RemoteBackups.verify]]) with its data file's
 * [[Stamp]] then (`verified`); a peer copy is still to be checked by its peer.
 */
case class BackupDone(executorId: String, task: BackupTask, bytes: Long, seconds: Double,
    indexCrc: Long, dataCrc: Long, verified: Option[Stamp] = None)

/**
 * Executor -> driver: a backup could not be made (the output stays unprotected);
 * `sourceMissing` when this executor does not hold the map output (its files are gone),
 * `rejected` when the copy was written but read back damaged (and deleted).
 */
case class BackupFailedMsg(executorId: String, task: BackupTask, reason: String, sourceMissing: Boolean = false,
    rejected: Boolean = false)

/**
 * Plugin messages travel as JSON strings: an executor deserializes RPC replies with Spark's own
 * class loader, which does not see classes of a `--jars` jar (measured: ClassNotFoundException
 * for a case class reply), while `String` is always there.
 */
object Wire {
  private def task(t: BackupTask) = Json.mapper.createObjectNode().put("shuffle", t.shuffleId)
    .put("index", t.mapIndex).put("map", t.mapId).put("target", t.target).put("host", t.peerHost)
    .put("port", t.peerPort).put("throttle", t.throttle).put("id", t.id)

  private def task(n: JsonNode) = BackupTask(n.path("shuffle").asInt(), n.path("index").asInt(),
    n.path("map").asLong(), n.path("target").asText(), n.path("host").asText(), n.path("port").asInt(),
    n.path("throttle").asDouble(), n.path("id").asLong())

  private def check(c: PeerCheck) = Json.mapper.createObjectNode().put("shuffle", c.shuffleId)
    .put("map", c.mapId).put("indexCrc", c.indexCrc).put("dataCrc", c.dataCrc)

  private def check(n: JsonNode) = PeerCheck(n.path("shuffle").asInt(), n.path("map").asLong(),
    n.path("indexCrc").asLong(), n.path("dataCrc").asLong())

  def encode(message: Any): String = {
    val node = message match {
      case PollWork(e, c) => Json.obj("poll").put("executor", e).put("capacity", c)
      case Work(tasks, cancelled, deletes, checks, quiet) =>
        val n = Json.obj("work").put("quiet", quiet)
        val ts = n.putArray("tasks")
        tasks.foreach(t => ts.add(task(t)))
        val cs = n.putArray("cancelled")
        cancelled.foreach { case (s, m) => cs.addObject().put("shuffle", s).put("map", m) }
        val ds = n.putArray("deletes")
        deletes.foreach { case (s, m) => ds.addObject().put("shuffle", s).put("map", m) }
        val ks = n.putArray("checks")
        checks.foreach(c => ks.add(check(c)))
        n
      case PeerChecked(e, c, problem) =>
        val n = Json.obj("checked").put("executor", e).put("problem", problem)
        n.set[JsonNode]("check", check(c))
        n
      case BackupDone(e, t, bytes, seconds, ic, dc, verified) =>
        val n = Json.obj("done").put("executor", e).put("bytes", bytes).put("seconds", seconds)
          .put("indexCrc", ic).put("dataCrc", dc)
        verified.foreach(stamp => n.put("stampLength", stamp.length).put("stampModified", stamp.modified))
        n.set[JsonNode]("task", task(t))
        n
      case BackupFailedMsg(e, t, reason, missing, rejected) =>
        val n = Json.obj("failed").put("executor", e).put("reason", reason).put("missing", missing)
          .put("rejected", rejected)
        n.set[JsonNode]("task", task(t))
        n
      case notice: TerminationNotice => notice.toJson
      case report: PoolReport => report.toJson
      case rebalance: RebalanceRecommendation => rebalance.toJson
      case other => throw new IllegalArgumentException(s"not a trspark message: $other")
    }
    Json.mapper.writeValueAsString(node)
  }

  private def pairs(n: JsonNode): Seq[(Int, Long)] =
    n.elements().asScala.map(c => (c.path("shuffle").asInt(), c.path("map").asLong())).toSeq

  def decode(text: String): Any = {
    val n = Json.parse(text)
    n.path("type").asText() match {
      case "poll" => PollWork(n.path("executor").asText(), n.path("capacity").asInt())
      case "work" => Work(n.path("tasks").elements().asScala.map(task).toSeq, pairs(n.path("cancelled")),
        pairs(n.path("deletes")), n.path("checks").elements().asScala.map(check).toSeq, n.path("quiet").asBoolean(false))
      case "checked" => PeerChecked(n.path("executor").asText(), check(n.path("check")), n.path("problem").asText())
      case "done" =>
        val verified = Some(n.path("stampModified")).filterNot(_.isMissingNode)
          .map(modified => Stamp(n.path("stampLength").asLong(), modified.asLong()))
        BackupDone(n.path("executor").asText(), task(n.path("task")), n.path("bytes").asLong(),
          n.path("seconds").asDouble(), n.path("indexCrc").asLong(), n.path("dataCrc").asLong(), verified)
      case "failed" => BackupFailedMsg(n.path("executor").asText(), task(n.path("task")), n.path("reason").asText(),
        n.path("missing").asBoolean(false), n.path("rejected").asBoolean(false))
      case TerminationNotice.Type => TerminationNotice.fromJson(n)
      case PoolReport.Type => PoolReport.fromJson(n)
      case RebalanceRecommendation.Type => RebalanceRecommendation.fromJson(n)
      case other => throw new IllegalArgumentException(s"unknown trspark message type '$other'")
    }
  }
}

/**
 * The engine's `SchedulingHints` command (`trspark/engine/commands.py`): where a task of each
 * stage may start, decided by the engine; [[HintPlacement]] applies it.
 *
 * @param stageOrder runnable stages, most preferred first (largest data-size reduction rate).
 * @param forbidden  stage id -> executors where a task of the stage starts only if the stage would
 *                   starve otherwise (it would not end before the executor dies).
 * @param fallback   stage id -> executors that take a task of the stage only after every other
 *                   free slot had its pick (fresh executor JVMs).
 * @param drain      executors under a termination notice: no new task starts there.
 */
case class SchedulingHints(
    stageOrder: Seq[Int],
    forbidden: Map[Int, Set[String]],
    fallback: Map[Int, Set[String]],
    drain: Set[String] = Set.empty) {
  def isEmpty: Boolean = stageOrder.isEmpty && forbidden.isEmpty && fallback.isEmpty && drain.isEmpty

  /** Does the hint restrict `executorId` for any of `stages`? */
  def restricts(executorId: String, stages: Iterable[Int]): Boolean = drain.contains(executorId) ||
    stages.exists(s => forbidden.get(s).exists(_.contains(executorId)) || fallback.get(s).exists(_.contains(executorId)))
}

object SchedulingHints {
  /** No hints: Spark's own order, every executor allowed (what Python's `hints=None` means). */
  val Empty: SchedulingHints = SchedulingHints(Nil, Map.empty, Map.empty, Set.empty)

  // Python's json writes Infinity/NaN for non-finite floats; read them rather than reject the line.
  private val mapper = JsonMapper.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build()

  /** Parse one wire line (`protocol.to_json`); throws IllegalArgumentException naming what is wrong. */
  def parse(line: String): SchedulingHints = {
    val node = try mapper.readTree(line) catch {
      case NonFatal(e) => throw new IllegalArgumentException(s"SchedulingHints: not JSON: ${line.take(80)}", e)
    }
    if (node == null || !node.isObject) throw new IllegalArgumentException(s"SchedulingHints: not a JSON object: ${line.take(80)}")
    fromJson(node)
  }

  /** From a parsed command (the engine bridge hands commands over as Jackson nodes). */
  def fromJson(node: JsonNode): SchedulingHints = {
    val kind = node.path("type").asText("SchedulingHints")
    if (kind != "SchedulingHints") throw new IllegalArgumentException(s"SchedulingHints: got a '$kind' message")
    val order = node.path("stage_order")
    if (!order.isMissingNode && !order.isArray) bad("stage_order", order)
    val stages = order.elements().asScala.map { n => if (n.canConvertToInt && n.isIntegralNumber) n.intValue() else bad("stage_order", n) }
    SchedulingHints(stages.toVector, executorsByStage(node, "forbidden"), executorsByStage(node, "fallback"),
      executors(node.path("drain"), "drain"))
  }

  private def executors(list: JsonNode, what: String): Set[String] = {
    if (!list.isMissingNode && !list.isNull && !list.isArray) bad(what, list)
    list.elements().asScala.map { n => if (n.isTextual) n.asText() else bad(what, n) }.toSet
  }

  private def executorsByStage(node: JsonNode, field: String): Map[Int, Set[String]] = {
    val obj = node.path(field)
    if (obj.isMissingNode || obj.isNull) Map.empty
    else if (!obj.isObject) bad(field, obj)
    else obj.properties().asScala.map { e =>
      (e.getKey.trim.toIntOption.getOrElse(bad(s"$field key", e.getKey)), executors(e.getValue, s"$field[${e.getKey}]"))
    }.toMap
  }

  private def bad(what: String, value: Any): Nothing =
    throw new IllegalArgumentException(s"SchedulingHints: bad $what: $value")
}
