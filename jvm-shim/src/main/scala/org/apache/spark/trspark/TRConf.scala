package org.apache.spark.trspark

import java.net.URI

import scala.util.Try

import org.apache.hadoop.fs.{FileSystem, Path}

import org.apache.spark.SparkConf
import org.apache.spark.deploy.SparkHadoopUtil

/**
 * The `spark.trspark.*` settings the JVM side acts on, validated once at plugin start-up.
 *
 * The Python side (`trspark/keys.py`) validates every key; this mirrors the ones the shim
 * itself uses, with the same names, defaults and "allowed" wording, so a bad value stops
 * SparkContext creation with one line naming the key and what is allowed.
 */
case class TRConf(
    mode: String,
    targets: String,
    remotePath: String,
    engineTimeoutS: Double,
    engineStartTimeoutS: Double,
    engineQueueCapacity: Int,
    periodS: Double,
    python: String,
    throttleBytesPerS: Double) {

  /** Modes whose decisions come from the Python engine (the others are built in). */
  def usesEngine: Boolean = !TRConf.BuiltinModes.contains(mode)
  def backupsEnabled: Boolean = mode != "never"
}

object TRConf {
  val Prefix = "spark.trspark."
  val Modes: Seq[String] = Seq("tr", "always", "never", "stage", "interval", "efm", "pado")
  val BuiltinModes: Set[String] = Set("always", "never")
  val Targets: Seq[String] = Seq("both", "local", "remote")
  /** Spark's own key that makes executors read map outputs re-pointed to the fallback id. */
  val FallbackPathKey = "spark.storage.decommission.fallbackStorage.path"
  /** Default of `spark.trspark.engine.startTimeout`: how long the engine process may take to
   *  connect and say Hello (it imports numpy/scipy, slow on a loaded machine). */
  val EngineStartTimeoutS = 120.0

  def fail(key: String, raw: String, allowed: String, why: String = ""): Nothing =
    throw new IllegalArgumentException(s"trspark: $Prefix$key='$raw' is not valid${if (why.isEmpty) "" else s" ($why)"}; allowed: $allowed")

  private def choice(conf: SparkConf, key: String, default: String, options: Seq[String]): String = {
    val raw = conf.get(Prefix + key, default)
    val value = raw.trim.toLowerCase(java.util.Locale.ROOT)
    if (!options.contains(value)) fail(key, raw, options.mkString(" | "))
    value
  }

  /** `spark.trspark.<key>` as seconds > 0, or the one-line error naming the key. */
  def positiveSeconds(conf: SparkConf, key: String, default: Double): Double = {
    val raw = conf.get(Prefix + key, default.toString)
    seconds(raw).filter(_ > 0).getOrElse(fail(key, raw, s"seconds > 0: $SecondsExample"))
  }

  /** Spark's time suffixes in seconds (`trspark/setting_parsers.py` TIME_UNITS), longest first where one ends another. */
  val TimeUnits: Seq[(String, Double)] =
    Seq("us" -> 1e-6, "ms" -> 1e-3, "min" -> 60.0, "s" -> 1.0, "m" -> 60.0, "h" -> 3600.0, "d" -> 86400.0)
  val SecondsExample = "a number, or with a unit: 500ms, 30s, 2min, 1h"

  /** Finite seconds from "30", "0.5", "500ms", "30s", "2min" or "1h" (a bare number is seconds); None otherwise. */
  def seconds(raw: String): Option[Double] = {
    val text = raw.trim.toLowerCase(java.util.Locale.ROOT)
    val (number, scale) = TimeUnits.collectFirst { case (unit, factor) if text.endsWith(unit) =>
      (text.dropRight(unit.length), factor) }.getOrElse((text, 1.0))
    decimal(number).map(_ * scale).filter(v => !v.isInfinite && !v.isNaN)
  }

  /**
   * `text` as a number where Python's `float` reads it the same: Java's parser alone also takes a
   * type suffix (`1f`, `2d`) and hexadecimal (`0x1p3`), which the Python check refuses.
   */
  private def decimal(text: String): Option[Double] =
    if (text.exists("fFdDxXpP".contains(_))) None else Try(text.toDouble).toOption

  private def integer(conf: SparkConf, key: String, default: Int, lo: Int, hi: Int, allowed: String): Int = {
    val raw = conf.get(Prefix + key, default.toString)
    // ASCII digits only: Integer.parseInt also reads other scripts' digits, which the Python check refuses.
    Some(raw.trim).filter(_.matches("[+-]?[0-9]+")).flatMap(t => Try(t.toInt).toOption)
      .filter(v => lo <= v && v <= hi).getOrElse(fail(key, raw, allowed))
  }

  /** Bytes/s from "50m", "1.5g", "400000" (k/m/g = 1e3/1e6/1e9); 0 means unlimited. */
  private def rate(conf: SparkConf, key: String): Double = {
    val raw = conf.get(Prefix + key, "0")
    val text = raw.trim.toLowerCase(java.util.Locale.ROOT).stripSuffix("b/s").stripSuffix("/s")
    val scale = text.lastOption match {
      case Some('k') => 1e3
      case Some('m') => 1e6
      case Some('g') => 1e9
      case _ => 1.0
    }
    val number = if (scale != 1.0) text.dropRight(1) else text
    decimal(number).map(_ * scale).filter(v => v >= 0 && !v.isInfinite)
      .getOrElse(fail(key, raw, "bytes/s >= 0 (0 = unlimited), e.g. 50m"))
  }

  private def remotePath(conf: SparkConf): String = {
    val raw = conf.get(Prefix + "remote.path", "").trim
    if (raw.isEmpty) defaultRemotePath(conf)
    else {
      val why = Try(new URI(raw)).fold(_.getMessage, u =>
        if (u.getScheme != null && u.getPath != null) "" else "a URL with a scheme and a path, e.g. file:///mnt/backups")
      if (why.nonEmpty) fail("remote.path", raw, "a Hadoop FileSystem URL (file://, hdfs://, s3a://, abfs://)", why)
      raw.stripSuffix("/")
    }
  }

  /**
   * `file://<first spark.local.dir>/trspark-backups`, the folder made absolute: the driver hands
   * this value to the executors, and a relative folder would read as a host name there. With
   * backups on, a folder a URL cannot hold (a space) stops start-up naming `spark.local.dir`.
   */
  private def defaultRemotePath(conf: SparkConf): String = {
    val localDir = conf.get("spark.local.dir", System.getProperty("java.io.tmpdir")).split(",").head.trim
    val path = s"file://${new java.io.File(localDir).getAbsolutePath}/trspark-backups"
    val backupsOn = conf.get(Prefix + "mode", "tr").trim.toLowerCase(java.util.Locale.ROOT) != "never"
    Try(new URI(path)).failed.toOption.filter(_ => backupsOn).foreach { e =>
      throw new IllegalArgumentException(s"trspark: spark.local.dir='$localDir' gives no default " +
        s"${Prefix}remote.path ('$path': ${e.getMessage}); allowed: set ${Prefix}remote.path, or a " +
        "spark.local.dir whose path has no space or other character a URL cannot hold")
    }
    path
  }

  /**
   * Stop the driver's start-up when `spark.trspark.remote.path`'s scheme has no Hadoop FileSystem
   * on the classpath: every backup would fail, with one warning at the first, and the application
   * would run with no output protected. The driver only: an executor would fail to start instead.
   */
  def checkRemoteFileSystem(conf: SparkConf, path: String, key: String = Prefix + "remote.path"): Unit = {
    Try(FileSystem.getFileSystemClass(new URI(path).getScheme, SparkHadoopUtil.get.newConfiguration(conf))).failed.foreach { e =>
      throw new IllegalArgumentException(s"trspark: $key='$path' is not valid; allowed: a Hadoop FileSystem URL " +
        s"whose scheme has a FileSystem on the classpath (file://, hdfs://; s3a:// needs hadoop-aws, abfs:// " +
        s"hadoop-azure): ${e.getMessage}")
    }
  }

  /**
   * `path` with the default Hadoop file system's scheme when it names none, as Spark's fallback
   * storage reads such a path (`file:` locally, the cluster's `fs.defaultFS` elsewhere).
   */
  def qualified(conf: SparkConf, path: String): String =
    if (Try(new URI(path).getScheme).toOption.flatMap(Option(_)).isDefined) path
    else Try {
      val p = new Path(path)
      p.getFileSystem(SparkHadoopUtil.get.newConfiguration(conf)).makeQualified(p).toString
    }.getOrElse(path)

  /**
   * Backups need Spark's map ids (task attempt ids). With `spark.shuffle.useOldFetchProtocol` a map
   * output's id is its partition, the same for every attempt, so a late copy of an old attempt
   * would pass for the new one's: after a re-point an indeterminate stage's readers would read it.
   */
  def checkFetchProtocol(conf: SparkConf): Unit =
    if (conf.getBoolean("spark.shuffle.useOldFetchProtocol", false)) {
      throw new IllegalArgumentException("trspark: spark.shuffle.useOldFetchProtocol=true gives every attempt of a map task " +
        s"the same map id, so trspark cannot tell their copies apart; allowed with it: ${Prefix}mode=never")
    }

  /** A pool name: part of a key and of a history folder (`trspark/keys.py` is_pool_name). */
  def isPoolName(name: String): Boolean = name.matches("[A-Za-z0-9_-][A-Za-z0-9_.-]*")
  val PoolNameRule = "letters, digits, _, - and . (not first)"

  /**
   * `spark.trspark.pool` and the `spark.trspark.pool.<name>.lifetime` keys: a bad pool name stops
   * start-up here; a spec itself (`stable` or a lifetime spec) is parsed by the Python check ([[ConfCheck]]).
   */
  private def checkPoolKeys(conf: SparkConf): Unit = {
    conf.getOption(Prefix + "pool").foreach { raw =>
      if (!isPoolName(raw.trim)) fail("pool", raw, s"a pool name: $PoolNameRule")
    }
    conf.getAllWithPrefix(Prefix + "pool.").foreach { case (suffix, raw) => checkPoolLifetime(suffix, raw) }
  }

  private def checkPoolLifetime(suffix: String, raw: String): Unit = {
    val name = suffix.stripSuffix(".lifetime")
    if (!suffix.endsWith(".lifetime") || !isPoolName(name)) {
      throw new IllegalArgumentException(s"trspark: '${Prefix}pool.$suffix' is not a valid pool setting; allowed: " +
        s"${Prefix}pool.<name>.lifetime with <name> of $PoolNameRule")
    }
    if (raw.trim.isEmpty) fail(s"pool.$suffix", raw, "stable (never evicted) or a lifetime spec as for spark.trspark.lifetime")
  }

  def apply(conf: SparkConf): TRConf = {
    checkPoolKeys(conf)
    build(conf)
  }

  private def build(conf: SparkConf): TRConf = TRConf(
    mode = choice(conf, "mode", "tr", Modes),
    targets = choice(conf, "backup.targets", "both", Targets),
    remotePath = remotePath(conf),
    engineTimeoutS = positiveSeconds(conf, "engine.timeout", 2.0),
    engineStartTimeoutS = positiveSeconds(conf, "engine.startTimeout", EngineStartTimeoutS),
    engineQueueCapacity = integer(conf, "engine.queueCapacity", 10000, 1, 10000000, "an integer 1..10000000 (events)"),
    periodS = positiveSeconds(conf, "period", 5.0),
    python = conf.get(Prefix + "python", "").trim,
    throttleBytesPerS = rate(conf, "backup.throttle"))
}
