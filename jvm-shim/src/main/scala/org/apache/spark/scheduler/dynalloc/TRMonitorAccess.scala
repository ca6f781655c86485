package org.apache.spark.scheduler.dynalloc

/**
 * Dynamic allocation's own idle test, `ExecutorMonitor.isExecutorIdle`, is `private[dynalloc]`:
 * this object sits in that package (inside the trspark jar) only to read it.
 */
private[spark] object TRMonitorAccess {
  /** No task runs on `executorId` and no active job reads the shuffle data it holds. */
  def isIdle(monitor: ExecutorMonitor, executorId: String): Boolean = monitor.isExecutorIdle(executorId)
}
