package org.apache.spark.trspark

import java.net.URI
import java.util.Locale

import scala.util.Try

import org.apache.spark.SparkConf

/**
 * The `spark.trspark.notice.*` settings (same names, defaults and allowed values as
 * `trspark/keys.py`).
 *
 * @param source   `none | aws | gcp | azure`: which metadata service to poll.
 * @param baseUrl  scheme://host[:port][/prefix] of that service (the cloud's link-local address by
 *                 default); `{executorId}` in it is replaced by the executor's id, so executors
 *                 sharing a host in tests can stand for different VMs.
 * @param intervalS seconds between two polls.
 * @param windowS  seconds assumed between a notice and the end when the source gives no time
 *                 (GCP, SIGPWR, an Azure event without `NotBefore`).
 * @param signal   POSIX signal taken as a notice (`PWR` = SIGPWR, Spark's decommission signal),
 *                 or `none`.
 */
case class NoticeSettings(source: String, baseUrl: String, intervalS: Double, windowS: Double, signal: String) {
  def polls: Boolean = source != "none"
  def windowMillis: Long = (windowS * 1000).round
  def forExecutor(executorId: String): NoticeSettings =
    copy(baseUrl = baseUrl.replace(NoticeSettings.ExecutorIdToken, executorId))
}

object NoticeSettings {
  val Prefix = "spark.trspark.notice."
  val Sources: Seq[String] = Seq("none", "aws", "gcp", "azure")
  val DefaultIntervalS = 1.0
  val DefaultWindowS = 30.0
  val DefaultSignal = "PWR"
  val ExecutorIdToken = "{executorId}"

  /** Where each cloud's instance metadata service answers (link-local, no proxy, no DNS for AWS/Azure). */
  def defaultUrl(source: String): String = source match {
    case "gcp" => "http://metadata.google.internal"
    case _ => "http://169.254.169.254"
  }

  private def fail(key: String, raw: String, allowed: String): Nothing = TRConf.fail("notice." + key, raw, allowed)

  private def seconds(conf: SparkConf, key: String, default: Double): Double =
    TRConf.positiveSeconds(conf, "notice." + key, default)

  /** Parse and validate; a bad value throws one line naming the key and what is allowed. */
  def apply(conf: SparkConf): NoticeSettings = {
    val rawSource = conf.get(Prefix + "source", "none")
    val source = rawSource.trim.toLowerCase(Locale.ROOT)
    if (!Sources.contains(source)) fail("source", rawSource, Sources.mkString(" | "))
    val rawUrl = conf.get(Prefix + "url", "").trim
    val url = if (rawUrl.isEmpty) defaultUrl(source) else {
      // URI takes any port number; the executors' connections refuse one above 65535 at every poll.
      val ok = Try(new URI(rawUrl.replace(ExecutorIdToken, "0"))).toOption
        .exists(u => Set("http", "https").contains(u.getScheme) && u.getHost != null && u.getPort <= 65535)
      if (!ok) fail("url", rawUrl, "an http:// or https:// base URL, e.g. http://169.254.169.254 (empty = the cloud's default)")
      rawUrl.stripSuffix("/")
    }
    val rawSignal = conf.get(Prefix + "signal", DefaultSignal).trim
    val signal = rawSignal.toUpperCase(Locale.ROOT).stripPrefix("SIG")
    if (!signal.matches("[A-Z0-9]+")) fail("signal", rawSignal, "a signal name such as PWR or TERM, or none")
    NoticeSettings(source, url, seconds(conf, "interval", DefaultIntervalS), seconds(conf, "window", DefaultWindowS),
      if (signal == "NONE") "none" else signal)
  }
}
