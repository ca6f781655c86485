package org.apache.spark.trspark

/** Where a backup goes: the remote store, or a peer executor's block manager. */
object Target {
  val Remote = "remote"
}

/** Driver -> executor: copy one map output (index + data file) of `shuffleId`/`mapId`. */
case class BackupTask(shuffleId: Int, mapIndex: Int, mapId: Long, target: String,
    peerHost: String = "", peerPort: Int = 0)

/** Executor -> driver (ask): "any work for me?"; the answer is a [[Work]]. */
case class PollWork(executorId: String, capacity: Int)

/** The answer to [[PollWork]]: backups to run, and running/queued ones to abandon. */
case class Work(tasks: Seq[BackupTask], cancelled: Seq[(Int, Long)])

/** Executor -> driver: a backup was written and committed (remote: with its checksums). */
case class BackupDone(executorId: String, task: BackupTask, bytes: Long, seconds: Double,
    indexCrc: Long, dataCrc: Long)

/** Executor -> driver: a backup could not be made (the output stays unprotected). */
case class BackupFailedMsg(executorId: String, task: BackupTask, reason: String)
