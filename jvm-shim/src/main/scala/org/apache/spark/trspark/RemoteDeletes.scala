package org.apache.spark.trspark

import scala.collection.mutable

/**
 * The driver's deletes of remote copies, run on the store thread. Every copy of a map output is
 * written to the same path ([[RemoteBackups]]), so a delete that runs late would remove a newer
 * copy the driver counts on: while a delete of an output's copy is pending, no new copy of that
 * output is handed out. (An executor's own deletes, of a copy it cancelled or read back damaged,
 * run on its backup thread before any copy handed to it later, so they need no such wait.)
 */
trait RemoteDeletes extends DriverBase {
  /** (shuffle, map id) -> deletes of its remote copy queued on the store thread and not yet run. */
  private val deleting = mutable.HashMap.empty[(Int, Long), Int]

  /**
   * Delete the remote copy of one output on the store thread. Called holding the lock in the step
   * that decided it, so a copy requested after that decision cannot be handed out before it runs.
   */
  protected def deleteRemoteCopy(shuffleId: Int, mapId: Long): Unit = synchronized {
    val key = (shuffleId, mapId)
    deleting(key) = deleting.getOrElse(key, 0) + 1
    def ran(): Unit = synchronized {
      if (deleting(key) > 1) deleting(key) -= 1 else deleting.remove(key)
    }
    if (!offThread(storeWork, s"deleting the remote copy of $key")(try remote.delete(shuffleId, mapId) finally ran())) ran()
  }

  /** True for a remote copy whose output's earlier copy is still to be deleted: it waits in its queue. */
  protected def waitsForDelete(task: BackupTask): Boolean =
    task.target == Target.Remote && deleting.contains((task.shuffleId, task.mapId))
}
