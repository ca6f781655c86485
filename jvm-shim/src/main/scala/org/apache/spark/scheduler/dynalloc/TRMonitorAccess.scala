package org.apache.spark.scheduler.dynalloc

import org.apache.spark.resource.ResourceProfile

/**
 * Dynamic allocation's own idle test, `ExecutorMonitor.isExecutorIdle`, and its record of cached
 * blocks are `private[dynalloc]`: this object sits in that package (inside the trspark jar) only
 * to read them.
 */
private[spark] object TRMonitorAccess {
  /** No task runs on `executorId` and no active job reads the shuffle data it holds. */
  def isIdle(monitor: ExecutorMonitor, executorId: String): Boolean = monitor.isExecutorIdle(executorId)

  /**
   * `executorId` (known to the monitor) holds cached RDD blocks: dynamic allocation keeps such an
   * executor until `spark.dynamicAllocation.cachedExecutorIdleTimeout` (unbounded by default).
   */
  def holdsCachedBlocks(monitor: ExecutorMonitor, executorId: String): Boolean = {
    // Looked up under the executor's own profile, ensureExecutorIsTracked only finds its tracker;
    // an unknown id, or the unknown profile, would be added to the monitor's counts.
    val profile = monitor.getResourceProfileId(executorId)
    profile != ResourceProfile.UNKNOWN_RESOURCE_PROFILE_ID &&
      monitor.ensureExecutorIsTracked(executorId, profile).cachedBlocks.nonEmpty
  }
}
