package org.apache.spark.trspark

import scala.collection.mutable

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.ObjectNode

/**
 * Executor -> driver: the pool this executor belongs to and where that came from (`env`,
 * `aws`/`gcp`/`azure` metadata or `conf`). Travels as JSON text like every plugin message.
 */
case class PoolReport(executorId: String, pool: String, source: String) {
  def toJson: ObjectNode = Json.obj(PoolReport.Type).put("executor", executorId).put("pool", pool)
    .put("source", source)
}

object PoolReport {
  val Type = "pool"
  def fromJson(node: JsonNode): PoolReport =
    PoolReport(node.path("executor").asText(), node.path("pool").asText(), node.path("source").asText())
}

/** Which pool an executor belongs to (see `docs/notices-and-pools.md`). */
object ExecutorPool {
  /** Environment variable naming the executor's pool (`spark.executorEnv.TRSPARK_POOL`, a pod template...). */
  val EnvVar = "TRSPARK_POOL"

  /**
   * The pool, first found of: the environment variable, the cloud's instance metadata (asked
   * only when the variable is unset or not a pool name), `spark.trspark.pool`. Returns (pool, source).
   */
  def detect(env: Option[String], metadata: => Option[String], metadataSource: String,
      configured: String): (String, String) = env.map(_.trim).filter(TRConf.isPoolName) match {
    case Some(pool) => (pool, "env")
    case None => metadata.map(p => (p, metadataSource)).getOrElse((configured, "conf"))
  }
}

/**
 * Driver side: emits each executor's `ExecutorAdded` with its pool. Spark announces an executor
 * when it registers, before its plugin has found its pool, so the first event carries the
 * pool already reported, else `spark.trspark.pool`; a report that differs afterwards re-emits
 * `ExecutorAdded` with the reported pool and `vm_started` = the first event's time, so the
 * executor's age still counts from its registration. The executor reports from its plugin's `init`
 * (a blocking ask), and Spark offers it no task before `init` returns, so the engine knows
 * the pool before the executor's first task.
 */
class ExecutorPools(configured: String, emit: ExecutorPools.Emit) {
  private val reported = mutable.HashMap.empty[String, String]
  /** executor -> (host, cores, pool emitted, engine time of its first ExecutorAdded). */
  private val announced = mutable.HashMap.empty[String, (String, Int, String, Double)]

  /** Spark announced the executor: send its `ExecutorAdded`; returns the pool it carries. */
  def added(executorId: String, host: String, cores: Int): String = synchronized {
    val pool = reported.getOrElse(executorId, configured)
    announced(executorId) = (host, cores, pool, emit(executorId, host, cores, pool, None))
    pool
  }

  def report(executorId: String, pool: String): Unit = synchronized {
    reported(executorId) = pool
    announced.get(executorId).foreach { case (host, cores, emitted, since) =>
      if (emitted != pool) {
        announced(executorId) = (host, cores, pool, since)
        emit(executorId, host, cores, pool, Some(since))
      }
    }
  }

  /**
   * Send every announced executor's `ExecutorAdded` again, with its registration time: those
   * sent before the engine was connected (executors that registered while the settings were
   * being checked) reached no engine.
   */
  def replay(): Unit = synchronized {
    announced.foreach { case (executorId, (host, cores, pool, since)) => emit(executorId, host, cores, pool, Some(since)) }
  }

  def removed(executorId: String): Unit = synchronized {
    reported.remove(executorId)
    announced.remove(executorId)
  }

  def poolOf(executorId: String): Option[String] = synchronized(announced.get(executorId).map(_._3))
}

object ExecutorPools {
  /** (executor, host, cores, pool, registered at) => sends `ExecutorAdded`; returns its engine time. */
  type Emit = (String, String, Int, String, Option[Double]) => Double
}
