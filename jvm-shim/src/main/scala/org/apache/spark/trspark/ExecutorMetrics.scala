package org.apache.spark.trspark

import java.util.concurrent.TimeUnit

import com.codahale.metrics.{Counter, MetricRegistry, Timer}

/**
 * What one executor did for trspark, in the registry Spark gives the executor plugin
 * (`PluginContext.metricRegistry`): Spark reports it as source
 * `plugin.org.apache.spark.trspark.TRSparkPlugin` of the executor, through every sink configured
 * for the `executor` instance (CSV, JMX, Graphite, ...).
 *
 * A copy is counted on its source executor once it is written and reported to the driver; the
 * driver may still drop it (a peer's check fails, a newer attempt replaces the output, the remote
 * copy fails verification), so `copies_to_*` >= the driver's committed `backups_to_*`.
 * Bytes are the map output's index plus data file bytes, as on the driver.
 */
final class ExecutorMetrics(registry: MetricRegistry) {
  val copiesToPeers: Counter = registry.counter("copies_to_peers")
  val copiesToRemote: Counter = registry.counter("copies_to_remote")
  val bytesToPeers: Counter = registry.counter("bytes_to_peers")
  val bytesToRemote: Counter = registry.counter("bytes_to_remote")
  val copiesFailed: Counter = registry.counter("copies_failed")
  val copiesCancelled: Counter = registry.counter("copies_cancelled")
  /** Peer copies this executor holds for others, re-read against their source's CRC32s. */
  val checksIntact: Counter = registry.counter("peer_copies_intact")
  val checksDamaged: Counter = registry.counter("peer_copies_damaged")
  val peerCopiesDeleted: Counter = registry.counter("peer_copies_deleted")
  /** Asks to the driver for backup work: one a beat, one a second while the application is quiet. */
  val polls: Counter = registry.counter("polls")
  /** Wall time of each written copy, from its start to the last byte written (seconds, as a timer). */
  val copyTime: Timer = registry.timer("copy_time")

  /** A copy of `bytes` bytes to `target` (an executor id or [[Target.Remote]]) took `nanos` ns. */
  def written(target: String, bytes: Long, nanos: Long): Unit = {
    if (target == Target.Remote) { copiesToRemote.inc(); bytesToRemote.inc(bytes) }
    else { copiesToPeers.inc(); bytesToPeers.inc(bytes) }
    copyTime.update(nanos, TimeUnit.NANOSECONDS)
  }

  /** This executor re-read a peer copy it holds: `problem` is empty when it matched. */
  def checked(problem: String): Unit = if (problem.isEmpty) checksIntact.inc() else checksDamaged.inc()
}
