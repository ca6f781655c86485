package org.apache.spark.trspark

import org.apache.spark.scheduler.SparkListenerEvent

// trspark's own listener events. Posted on Spark's listener bus, they are written to the event
// log as JSON (field names as below, the class name under "Event") and outlive the application;
// a reader without these classes (the History Server, `trspark whatif`) skips them. `time` is
// epoch milliseconds throughout.

/**
 * An executor joined, in trspark pool `pool`: the pool it already reported, else `spark.trspark.pool`
 * (an executor usually reports after it joins, see [[TRExecutorPool]]).
 */
case class TRExecutorStarted(time: Long, executorId: String, host: String, pool: String) extends SparkListenerEvent

/**
 * `executorId` reported its pool, found from `source`: `env` (`TRSPARK_POOL`), `aws`, `gcp` or
 * `azure` (instance metadata) or `conf` (`spark.trspark.pool`). Overrides the pool of its
 * [[TRExecutorStarted]].
 */
case class TRExecutorPool(time: Long, executorId: String, pool: String, source: String) extends SparkListenerEvent

/** An executor left; `reason` is trspark's kind: evicted, released, removed, decommissioned, killed or app. */
case class TRExecutorEnded(time: Long, executorId: String, reason: String) extends SparkListenerEvent

/** A termination notice: `executorId` ends at `deadline` (epoch ms); `source` names the notice channel. */
case class TRNotice(time: Long, executorId: String, deadline: Long, source: String) extends SparkListenerEvent

/**
 * Stage `stageId` writes shuffle `shuffleId`; posted once per stage, when a job first lists it.
 * Spark's own stage records do not name the shuffle, and a stage that writes an output again (a
 * re-run in a later job) may have a new stage id: the shuffle id is what `trspark report` counts
 * recomputed map tasks by.
 */
case class TRMapStage(time: Long, stageId: Int, shuffleId: Int) extends SparkListenerEvent

/**
 * A committed backup of map output (`shuffleId`, `mapIndex`, `mapId` = its task attempt id),
 * from executor `source` to `target` (an executor id, or `remote`): `bytes` (index + data files)
 * copied in `seconds`.
 */
case class TRBackup(time: Long, shuffleId: Int, mapIndex: Int, mapId: Long, source: String, target: String,
    bytes: Long, seconds: Double) extends SparkListenerEvent

/** A requested backup ended without a copy. */
case class TRBackupFailed(time: Long, shuffleId: Int, mapIndex: Int, target: String, reason: String)
  extends SparkListenerEvent

/**
 * `executorId`'s map outputs were lost (`why`): those in `restoredMapIds` now read from a backup,
 * those in `lostMapIds` had none (Spark recomputes them if a job reads them again). Map ids are
 * task attempt ids.
 */
case class TRRestore(time: Long, executorId: String, why: String, restoredMapIds: Seq[Long], lostMapIds: Seq[Long])
  extends SparkListenerEvent

/** The engine released `executorId` before its notice deadline. */
case class TRExecutorRelease(time: Long, executorId: String, reason: String) extends SparkListenerEvent

/** The engine's safety belt went on or off. */
case class TRSafetyBelt(time: Long, on: Boolean, reason: String) extends SparkListenerEvent

/** The engine became unavailable: every map output is backed up from now on. */
case class TRFallback(time: Long, reason: String) extends SparkListenerEvent
