package org.apache.spark.trspark

import java.util.concurrent.ConcurrentHashMap

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging

/**
 * Keeps trspark's own code out of Spark's way on the paths Spark calls synchronously (the task
 * scheduler's hooks, the plugin's RPC endpoint, the listener callbacks): an exception there is
 * caught, logged once per path (a warning with its stack trace; repeats are debug lines), and the
 * driver plugin falls back to always-checkpoint for the rest of the application
 * ([[TRDriverPlugin.internalError]]); the caller then does what Spark would do without trspark.
 *
 * Test hook (tests only, never set it in production): the driver JVM's system property
 * `trspark.test.failIn` names one path (as passed to [[run]] / [[orElse]]); that path then throws
 * on each call, so live tests can show the fallback without a real bug.
 */
object Guard extends Logging {
  /** The system property naming the path that throws (test only). */
  val FailInProperty = "trspark.test.failIn"
  private val warned = ConcurrentHashMap.newKeySet[String]()

  /** Run `body` for `path`; on an exception, report it and return. */
  def run(path: String)(body: => Unit): Unit = orElse(path, ())(body)

  /** `body` for `path`, or `fallback` after reporting its exception. */
  def orElse[T](path: String, fallback: => T)(body: => T): T =
    try {
      if (path == System.getProperty(FailInProperty)) throw new IllegalStateException(s"failure injected in $path by $FailInProperty")
      body
    } catch {
      case NonFatal(e) =>
        failed(path, e)
        fallback
    }

  /** Tell the driver plugin; without one (a scheduler hook outside a trspark application), warn once per path. */
  private def failed(path: String, e: Throwable): Unit = TRDriverPlugin.active match {
    case Some(plugin) => plugin.internalError(path, e)
    case None if warned.add(path) => logWarning(s"trspark: internal error in $path ($e); ignored", e)
    case None => logDebug(s"trspark: internal error in $path ($e); ignored")
  }
}
