package org.apache.spark.trspark

import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, SparkPlugin}

/**
 * trspark's Spark plugin: `spark.plugins=org.apache.spark.trspark.TRSparkPlugin`.
 *
 * Driver side ([[TRDriverPlugin]]): turns Spark's listener events into the policy engine's
 * events, applies its commands (backups of single map outputs) and re-points lost map outputs
 * to their backups. Executor side ([[TRExecutorPlugin]]): performs the backups.
 */
class TRSparkPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new TRDriverPlugin
  override def executorPlugin(): ExecutorPlugin = new TRExecutorPlugin
}
