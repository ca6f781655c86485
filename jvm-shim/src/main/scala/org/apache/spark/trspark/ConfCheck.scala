package org.apache.spark.trspark

import java.nio.charset.StandardCharsets
import java.util.concurrent.{CompletableFuture, TimeUnit}

import scala.util.control.NonFatal

import org.apache.spark.SparkException
import org.apache.spark.internal.Logging

/**
 * The Python side's validation of every `spark.trspark.*` setting, run for the driver plugin:
 * `<python> -m trspark.live.confcheck` with the settings as JSON in `TRSPARK_CONF` (the Python
 * module `trspark/live/confcheck.py` knows every key, parses every value and probes
 * `spark.trspark.history.url`; the JVM's [[TRConf]] covers only the keys the shim acts on).
 *
 * [[ConfCheck.start]] launches it in `init`; [[await]] waits for it in `registerMetrics`, so the
 * interpreter's start-up (≈ 3 s here: the lifetime parser imports scipy) overlaps the scheduler's
 * and the executors' start-up instead of adding to it, and a bad setting still stops
 * SparkContext creation before any job runs.
 *
 * Exit code 2 means "not usable": [[await]] throws a `SparkException` with the module's one
 * line (naming the key and the allowed values). Any other outcome -- no such interpreter,
 * trspark not importable by it, a crash, no answer within [[ConfCheck.TimeoutS]] -- means the
 * check could not run: one WARN line, and the application goes on (the JVM-side checks and the
 * engine's own validation still apply).
 */
final class ConfCheck private (python: String, process: Option[Process],
    output: CompletableFuture[String], startedNs: Long) extends Logging {

  def await(): Unit = process.foreach { p =>
    val waitStartedNs = System.nanoTime()
    val finished = p.waitFor((ConfCheck.TimeoutS * 1000).toLong, TimeUnit.MILLISECONDS)
    if (!finished) {
      p.destroyForcibly()
      logWarning(s"trspark: '$python -m ${ConfCheck.Module}' gave no answer within ${ConfCheck.TimeoutS} s; " +
        "spark.trspark.* settings not checked by the Python side")
      return
    }
    val text = try output.get(5, TimeUnit.SECONDS).trim catch { case NonFatal(e) => s"(no output: $e)" }
    val now = System.nanoTime()
    val (seconds, blocked) = ((now - startedNs) / 1e9, (now - waitStartedNs) / 1e9)
    p.exitValue() match {
      case 0 => logInfo(f"trspark: settings checked by $python in $seconds%.2f s (start-up waited $blocked%.2f s for it)")
      case ConfCheck.ExitBad =>
        // The check's own line starts with "trspark: "; a library may print after it.
        val lines = text.linesIterator.toSeq
        if (lines.size > 1) logWarning(s"trspark: the settings check printed:\n$text")
        throw new SparkException(lines.findLast(_.startsWith("trspark: ")).orElse(lines.lastOption)
          .getOrElse(s"trspark: bad settings (exit ${ConfCheck.ExitBad})"))
      case code =>
        val last = text.linesIterator.toSeq.lastOption.getOrElse("")
        logWarning(s"trspark: could not check the spark.trspark.* settings with '$python -m ${ConfCheck.Module}' " +
          s"(exit code $code: $last); going on without that check")
    }
  }
}

object ConfCheck extends Logging {
  val Module = "trspark.live.confcheck"
  val ExitBad = 2
  /** Longest wait in `registerMetrics`; a history store that hangs must not hang the application. */
  val TimeoutS = 60.0

  /** Launch the check (returns at once); a missing interpreter gives a check that only warns. */
  def start(python: String, confJson: String): ConfCheck = {
    val started = System.nanoTime()
    val builder = new ProcessBuilder(python, "-m", Module).redirectErrorStream(true)
    builder.environment().put("TRSPARK_CONF", confJson)
    try {
      val p = builder.start()
      p.getOutputStream.close()
      // Drained on its own thread so a long traceback never blocks the child on a full pipe.
      val out = CompletableFuture.supplyAsync(() => new String(p.getInputStream.readAllBytes(), StandardCharsets.UTF_8))
      new ConfCheck(python, Some(p), out, started)
    } catch {
      case NonFatal(e) =>
        logWarning(s"trspark: cannot run '$python -m $Module' to check the spark.trspark.* settings " +
          s"(${e.getMessage}); going on without that check")
        new ConfCheck(python, None, CompletableFuture.completedFuture(""), started)
    }
  }
}
