package org.apache.spark.trspark

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.core.json.JsonReadFeature
import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.json.JsonMapper

/**
 * The engine's `SchedulingHints` command (`trspark/engine/protocol.py`), TR-Scheduling as data.
 *
 * @param stageOrder          runnable stages, most preferred first (largest data-size reduction rate).
 * @param maxTaskSeconds      executor id -> longest estimated task run time (s) allowed to start
 *                            there (the γ rule `ET / v.E(t,T) < γ` solved for ET); executors not
 *                            listed are unrestricted.
 * @param expectedTaskSeconds stage id -> estimated run time ET (s) of one of its tasks.
 * @param drain               executors under a termination notice: no new task starts there.
 */
case class SchedulingHints(
    stageOrder: Seq[Int],
    maxTaskSeconds: Map[String, Double],
    expectedTaskSeconds: Map[Int, Double],
    drain: Set[String] = Set.empty) {
  def isEmpty: Boolean = stageOrder.isEmpty && maxTaskSeconds.isEmpty && drain.isEmpty
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
    val drain = node.path("drain")
    if (!drain.isMissingNode && !drain.isNull && !drain.isArray) bad("drain", drain)
    SchedulingHints(stages.toVector,
      numbers(node, "max_task_seconds").toMap,
      numbers(node, "expected_task_seconds").map { case (k, v) =>
        (k.trim.toIntOption.getOrElse(bad("expected_task_seconds key", k)), v)
      }.toMap,
      drain.elements().asScala.map { n => if (n.isTextual) n.asText() else bad("drain", n) }.toSet)
  }

  private def numbers(node: JsonNode, field: String): Seq[(String, Double)] = {
    val obj = node.path(field)
    if (obj.isMissingNode || obj.isNull) Nil
    else if (!obj.isObject) bad(field, obj)
    else obj.properties().asScala.toSeq.map { e =>
      if (!e.getValue.isNumber) bad(s"$field[${e.getKey}]", e.getValue)
      e.getKey -> e.getValue.doubleValue()
    }
  }

  private def bad(what: String, value: Any): Nothing =
    throw new IllegalArgumentException(s"SchedulingHints: bad $what: $value")
}

/**
 * TR-Scheduling's two placement rules (paper Algorithm 1), the Scala mirror of
 * `trspark/engine/placement.py` -- which is the reference; the tests evaluate both on the same
 * random cases and require identical answers.
 *
 *  1. Stage order: runnable stages listed in `stageOrder` come first, in that order (a stage
 *     listed twice counts at its last position, as in the Python dict); the others follow by
 *     stage id.
 *  2. The γ rule: a task of stage `s` may start on executor `e` only if
 *     `expectedTaskSeconds(s) <= maxTaskSeconds(e)` (a missing entry = no restriction).
 */
object HintPlacement {

  /** Runnable stage ids in the order tasks should be taken from them. */
  def orderStages(runnable: Seq[Int], hints: SchedulingHints): Seq[Int] = {
    val stages = runnable.sorted
    if (hints.stageOrder.isEmpty) stages
    else {
      val rank = hints.stageOrder.zipWithIndex.toMap // last position wins, as in Python's dict
      stages.sortBy(s => (rank.getOrElse(s, rank.size), s))
    }
  }

  /** May a task of `stageId` start on `executorId` under the γ rule (and not draining)? */
  def allowed(executorId: String, stageId: Int, hints: SchedulingHints): Boolean =
    !hints.drain.contains(executorId) && (hints.maxTaskSeconds.get(executorId) match {
      case None => true
      case Some(limit) => hints.expectedTaskSeconds.get(stageId).forall(_ <= limit)
    })

  /**
   * The γ rule as the live scheduler applies it: a forbidden executor may still take a task of
   * `stageId` when no executor that allows it has a free slot (waiting would be worse), as
   * `placement.may_start_now` permits -- never a draining one.
   *
   * @param withFreeSlot executors that can start one more task right now.
   */
  def mayStartNow(executorId: String, stageId: Int, withFreeSlot: Iterable[String], hints: SchedulingHints): Boolean =
    allowed(executorId, stageId, hints) || (!hints.drain.contains(executorId) &&
      !withFreeSlot.exists(e => e != executorId && allowed(e, stageId, hints)))

  // Java-friendly forms (py4j tests, Java callers).
  def orderStages(runnable: java.util.List[Integer], hints: SchedulingHints): java.util.List[Integer] =
    orderStages(runnable.asScala.map(_.intValue).toSeq, hints).map(Integer.valueOf).asJava

  def mayStartNow(executorId: String, stageId: Int, withFreeSlot: java.util.List[String],
      hints: SchedulingHints): Boolean = mayStartNow(executorId, stageId, withFreeSlot.asScala, hints)
}
