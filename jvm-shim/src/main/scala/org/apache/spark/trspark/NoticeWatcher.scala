package org.apache.spark.trspark

import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import java.time.{Duration, Instant, OffsetDateTime, ZonedDateTime}
import java.time.format.DateTimeFormatter
import java.util.Locale
import java.util.concurrent.{Executors, ScheduledExecutorService, ThreadFactory, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger, AtomicLong}

import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import com.fasterxml.jackson.databind.node.ObjectNode

import org.apache.spark.SparkConf
import org.apache.spark.internal.Logging
import org.apache.spark.util.SignalUtils

/**
 * Executor -> driver: this executor will be gone at `deadlineEpochMillis` (a termination notice).
 * Travels as JSON text like every plugin message (see `Wire`): `toJson` / `fromJson`.
 */
case class TerminationNotice(executorId: String, deadlineEpochMillis: Long, source: String) {
  def toJson: ObjectNode = TerminationNotice.mapper.createObjectNode().put("type", TerminationNotice.Type)
    .put("executor", executorId).put("deadline", deadlineEpochMillis).put("source", source)
}

object TerminationNotice {
  val Type = "notice"
  private val mapper = new ObjectMapper()
  def fromJson(node: JsonNode): TerminationNotice = TerminationNotice(
    node.path("executor").asText(), node.path("deadline").asLong(), node.path("source").asText())
}

/**
 * The `spark.trspark.notice.*` settings (same names, defaults and allowed values as
 * `trspark/config.py`).
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

  private def fail(key: String, raw: String, allowed: String): Nothing =
    throw new IllegalArgumentException(s"$Prefix$key='$raw' is not valid; allowed: $allowed")

  private def seconds(conf: SparkConf, key: String, default: Double): Double = {
    val raw = conf.get(Prefix + key, default.toString)
    Try(raw.trim.toDouble).toOption.filter(v => v > 0 && !v.isInfinite).getOrElse(fail(key, raw, "seconds > 0"))
  }

  /** Parse and validate; a bad value throws one line naming the key and what is allowed. */
  def apply(conf: SparkConf): NoticeSettings = {
    val rawSource = conf.get(Prefix + "source", "none")
    val source = rawSource.trim.toLowerCase(Locale.ROOT)
    if (!Sources.contains(source)) fail("source", rawSource, Sources.mkString(" | "))
    val rawUrl = conf.get(Prefix + "url", "").trim
    val url = if (rawUrl.isEmpty) defaultUrl(source) else {
      val ok = Try(new URI(rawUrl.replace(ExecutorIdToken, "0"))).toOption
        .exists(u => Set("http", "https").contains(u.getScheme) && u.getHost != null)
      if (!ok) fail("url", rawUrl, "an http:// base URL, e.g. http://169.254.169.254 (empty = the cloud's default)")
      rawUrl.stripSuffix("/")
    }
    val rawSignal = conf.get(Prefix + "signal", DefaultSignal).trim
    val signal = rawSignal.toUpperCase(Locale.ROOT).stripPrefix("SIG")
    if (!signal.matches("[A-Z0-9]+")) fail("signal", rawSignal, "a signal name such as PWR or TERM, or none")
    NoticeSettings(source, url, seconds(conf, "interval", DefaultIntervalS), seconds(conf, "window", DefaultWindowS),
      if (signal == "NONE") "none" else signal)
  }
}

/** What one poll of a metadata service said. */
sealed trait PollResult
object PollResult {
  /** The service answered: no termination is scheduled. */
  case object NoNotice extends PollResult
  /** Termination is scheduled at `deadlineEpochMillis`. */
  final case class Notice(deadlineEpochMillis: Long) extends PollResult
  /** No usable answer (unreachable, refused, or not in the expected format); `reason` says why. */
  final case class Unusable(reason: String) extends PollResult
}

/**
 * How each cloud announces the end of a spot / preemptible VM, parsed exactly as the service
 * answers (see `docs/notices.md`):
 *
 *  - AWS `GET /latest/meta-data/spot/instance-action`: 404 = none; 200 JSON with `action`
 *    (terminate | stop | hibernate) and an ISO-8601 UTC `time` (two minutes ahead). IMDSv2
 *    (session token from `PUT /latest/api/token`) when the service offers it, IMDSv1 otherwise.
 *  - GCP `GET /computeMetadata/v1/instance/preempted` with `Metadata-Flavor: Google`:
 *    `FALSE` / `TRUE`. No time is given: deadline = first `TRUE` seen + window (~30 s on GCP).
 *  - Azure `GET /metadata/scheduledevents?api-version=2020-07-01` with `Metadata: true`: JSON
 *    `Events`; a `Preempt` or `Terminate` event for this VM (or naming no VM) is a notice, due at
 *    its RFC-1123 `NotBefore` (empty `NotBefore` = already started: now + window).
 */
object NoticeEndpoints {
  val AwsTokenPath = "/latest/api/token"
  val AwsPath = "/latest/meta-data/spot/instance-action"
  val GcpPath = "/computeMetadata/v1/instance/preempted"
  val AzurePath = "/metadata/scheduledevents?api-version=2020-07-01"
  val AzureNamePath = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
  val AzureNoticeTypes: Set[String] = Set("Preempt", "Terminate")
  private val mapper = new ObjectMapper()

  /** AWS instance-action answer -> result (`nowMs` unused: AWS always gives the time). */
  def parseAws(status: Int, body: String): PollResult = status match {
    case 404 => PollResult.NoNotice
    case 200 =>
      Try(mapper.readTree(body)).toOption.flatMap(n => Option(n).map(_.path("time").asText(""))) match {
        case Some(time) if time.nonEmpty =>
          parseIso(time).map(PollResult.Notice(_): PollResult)
            .getOrElse(PollResult.Unusable(s"AWS instance-action time '$time' is not ISO-8601"))
        case _ => PollResult.Unusable(s"AWS instance-action answer without a time: ${body.take(80)}")
      }
    case 401 => PollResult.Unusable("AWS metadata refused the request (401: IMDSv2 token missing or expired)")
    case other => PollResult.Unusable(s"AWS metadata answered HTTP $other")
  }

  /** GCP preempted answer -> result; the deadline is `nowMs + windowMs`. */
  def parseGcp(status: Int, body: String, nowMs: Long, windowMs: Long): PollResult = status match {
    case 200 => body.trim.toUpperCase(Locale.ROOT) match {
      case "TRUE" => PollResult.Notice(nowMs + windowMs)
      case "FALSE" => PollResult.NoNotice
      case other => PollResult.Unusable(s"GCP preempted answer '${other.take(40)}' is neither TRUE nor FALSE")
    }
    case 403 => PollResult.Unusable("GCP metadata refused the request (403: Metadata-Flavor: Google header not accepted)")
    case other => PollResult.Unusable(s"GCP metadata answered HTTP $other")
  }

  /**
   * Azure Scheduled Events answer -> result: the earliest `Preempt`/`Terminate` event whose
   * `Resources` name `vmName` (any event when `vmName` is empty or the event names no VM).
   */
  def parseAzure(status: Int, body: String, vmName: String, nowMs: Long, windowMs: Long): PollResult = status match {
    case 200 =>
      val root = Try(mapper.readTree(body)).toOption.filter(n => n != null && n.path("Events").isArray)
      root match {
        case None => PollResult.Unusable(s"Azure scheduled events answer without an Events list: ${body.take(80)}")
        case Some(node) =>
          val deadlines = node.path("Events").elements().asScala.filter { event =>
            val resources = event.path("Resources").elements().asScala.map(_.asText()).toSeq
            AzureNoticeTypes.contains(event.path("EventType").asText()) &&
              (vmName.isEmpty || resources.isEmpty || resources.contains(vmName))
          }.map { event =>
            val notBefore = event.path("NotBefore").asText("").trim
            if (notBefore.isEmpty) Some(nowMs + windowMs) else parseRfc1123(notBefore)
          }.toSeq
          if (deadlines.contains(None)) PollResult.Unusable("Azure event NotBefore is not an RFC-1123 time")
          else if (deadlines.isEmpty) PollResult.NoNotice
          else PollResult.Notice(deadlines.flatten.min)
      }
    case 400 => PollResult.Unusable("Azure metadata refused the request (400: Metadata: true header not accepted)")
    case other => PollResult.Unusable(s"Azure metadata answered HTTP $other")
  }

  def parseIso(text: String): Option[Long] =
    Try(OffsetDateTime.parse(text).toInstant.toEpochMilli).orElse(Try(Instant.parse(text).toEpochMilli)).toOption

  def parseRfc1123(text: String): Option[Long] =
    Try(ZonedDateTime.parse(text, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant.toEpochMilli).toOption
}

/**
 * Executor-side watcher for termination notices: polls the configured cloud metadata service
 * every `intervalS` seconds on a daemon thread, and (optionally) takes a POSIX signal (SIGPWR)
 * as a notice. On the first notice it calls `onNotice(deadlineEpochMillis, source)` exactly once
 * and stops polling. It never throws out of its thread: an unreachable or refusing service
 * means "no notice"; each new kind of problem is logged once at INFO, repeats at DEBUG.
 *
 * The executor plugin's use (see `docs/notices.md`):
 * {{{
 *   val watcher = new NoticeWatcher(NoticeSettings(ctx.conf()).forExecutor(ctx.executorID()),
 *     (deadline, source) => ctx.send(Wire.encode(TerminationNotice(ctx.executorID(), deadline, source))))
 *   watcher.start(); watcher.installSignalHandler()      // ... and watcher.stop() in shutdown()
 * }}}
 *
 * @param settings what to poll and how often.
 * @param onNotice called once with the deadline (ms since the epoch, UTC) and the source
 *                 (`aws`, `gcp`, `azure` or `signal:PWR`).
 */
class NoticeWatcher(settings: NoticeSettings, onNotice: (Long, String) => Unit) extends Logging {
  import NoticeWatcher._

  private val fired = new AtomicBoolean(false)
  // A signal handler cannot be unregistered from SignalUtils: after stop() it must do nothing.
  @volatile private var stopped = false
  private val pollCount = new AtomicLong(0)
  @volatile private var lastProblem = ""
  @volatile private var awsToken: Option[(String, Long)] = None // (token, expiry ms)
  @volatile private var azureVmName: Option[String] = None
  private lazy val http = HttpClient.newBuilder()
    .connectTimeout(ConnectTimeout)
    .followRedirects(HttpClient.Redirect.NEVER)
    .proxy(HttpClient.Builder.NO_PROXY) // metadata services must never be asked through a proxy
    .build()
  private def clock(): Long = System.currentTimeMillis()
  private val timer: ScheduledExecutorService = Executors.newSingleThreadScheduledExecutor(daemon("trspark-notice"))

  /** Polls made so far (for tests and the status log). */
  def polls: Long = pollCount.get()
  /** The last problem seen ("" = none). */
  def problem: String = lastProblem
  def hasFired: Boolean = fired.get()

  /** Start polling (no-op for `source = none`). */
  def start(): Unit = if (settings.polls) {
    val periodMs = math.max(1L, (settings.intervalS * 1000).round)
    timer.scheduleWithFixedDelay(() => pollOnce(), 0L, periodMs, TimeUnit.MILLISECONDS)
    logInfo(s"trspark: watching ${settings.source} termination notices at ${settings.baseUrl} every " +
      s"${settings.intervalS} s")
  }

  def stop(): Unit = {
    stopped = true
    timer.shutdownNow()
  }

  /**
   * Take `settings.signal` (SIGPWR by default) as a notice with deadline now + window. Chained
   * through Spark's `SignalUtils`, so Spark's own decommission handler (registered by the
   * executor backend when `spark.decommission.enabled=true`) still runs. Our action reports the
   * signal as handled, so it no longer terminates the JVM when no decommission handler exists.
   */
  def installSignalHandler(): Unit = if (settings.signal != "none") {
    // Spark logs a warning itself when the signal cannot be watched (e.g. not on UNIX).
    SignalUtils.register(settings.signal) {
      fire(clock() + settings.windowMillis, s"signal:${settings.signal}")
      true
    }
  }

  /** Report a notice; only the first call before [[stop]] reaches `onNotice`. Safe from any thread. */
  def fire(deadlineEpochMillis: Long, source: String): Unit = {
    if (!stopped && fired.compareAndSet(false, true)) {
      val inS = (deadlineEpochMillis - clock()) / 1000.0
      logWarning(f"trspark: termination notice from $source: this executor ends at " +
        s"${Instant.ofEpochMilli(deadlineEpochMillis)} (in $inS%.1f s)")
      timer.shutdown()
      try onNotice(deadlineEpochMillis, source)
      catch { case NonFatal(e) => logWarning(s"trspark: termination notice callback failed: $e") }
    }
  }

  /** One poll; everything it can throw is caught (the thread must keep running). */
  def pollOnce(): Unit = if (!fired.get()) {
    val result = try poll() catch {
      case NonFatal(e) => PollResult.Unusable(s"${settings.source} metadata at ${settings.baseUrl} unreachable ($e)")
    }
    pollCount.incrementAndGet()
    result match {
      case PollResult.Notice(deadline) => fire(deadline, settings.source)
      case PollResult.NoNotice => lastProblem = ""
      case PollResult.Unusable(reason) =>
        if (reason != lastProblem) logInfo(s"trspark: no termination notice: $reason (further repeats at DEBUG)")
        else logDebug(s"trspark: no termination notice: $reason")
        lastProblem = reason
    }
  }

  private def poll(): PollResult = settings.source match {
    case "aws" =>
      val (status, body) = get(NoticeEndpoints.AwsPath, awsHeaders())
      if (status == 401) awsToken = None // expired or revoked: ask for a new one next time
      NoticeEndpoints.parseAws(status, body)
    case "gcp" =>
      val (status, body) = get(NoticeEndpoints.GcpPath, Seq("Metadata-Flavor" -> "Google"))
      NoticeEndpoints.parseGcp(status, body, clock(), settings.windowMillis)
    case "azure" =>
      val (status, body) = get(NoticeEndpoints.AzurePath, Seq("Metadata" -> "true"))
      NoticeEndpoints.parseAzure(status, body, vmName(), clock(), settings.windowMillis)
    case other => PollResult.Unusable(s"unknown notice source '$other'")
  }

  /** IMDSv2 session-token header when the service issues tokens; IMDSv1 (none) otherwise. */
  private def awsHeaders(): Seq[(String, String)] = {
    val now = clock()
    val token = awsToken.filter(_._2 > now).map(_._1).orElse {
      val request = HttpRequest.newBuilder(uri(NoticeEndpoints.AwsTokenPath)).timeout(RequestTimeout)
        .header("X-aws-ec2-metadata-token-ttl-seconds", AwsTokenTtlS.toString)
        .PUT(HttpRequest.BodyPublishers.noBody()).build()
      val fresh = Try(http.send(request, HttpResponse.BodyHandlers.ofString())).toOption
        .filter(_.statusCode() == 200).map(_.body().trim).filter(_.nonEmpty)
      // Renew a minute before expiry so a poll never carries a token about to lapse.
      awsToken = fresh.map(t => (t, now + (AwsTokenTtlS - 60) * 1000L))
      fresh
    }
    token.map(t => Seq("X-aws-ec2-metadata-token" -> t)).getOrElse(Nil)
  }

  /** This VM's name (Azure events list every VM of the availability set); "" = unknown = accept all. */
  private def vmName(): String = azureVmName.getOrElse {
    val name = Try(get(NoticeEndpoints.AzureNamePath, Seq("Metadata" -> "true"))).toOption
      .collect { case (200, body) => body.trim }.getOrElse("")
    azureVmName = Some(name)
    name
  }

  private def uri(path: String): URI = URI.create(settings.baseUrl + path)

  private def get(path: String, headers: Seq[(String, String)]): (Int, String) = {
    val builder = HttpRequest.newBuilder(uri(path)).timeout(RequestTimeout).GET()
    headers.foreach { case (k, v) => builder.header(k, v) }
    val response = http.send(builder.build(), HttpResponse.BodyHandlers.ofString())
    (response.statusCode(), response.body())
  }
}

object NoticeWatcher {
  /** Metadata services are link-local and answer in milliseconds; anything slower is "no answer". */
  val ConnectTimeout: Duration = Duration.ofMillis(500)
  val RequestTimeout: Duration = Duration.ofMillis(1000)
  val AwsTokenTtlS = 21600

  /** Daemon threads, so a watcher never keeps an executor JVM alive. */
  private def daemon(name: String): ThreadFactory = (r: Runnable) => {
    val t = new Thread(r, name)
    t.setDaemon(true)
    t
  }
}

/**
 * A callback that records what it was called with (py4j tests and diagnostics): the number of
 * calls, the last deadline and source.
 */
class NoticeRecorder extends ((Long, String) => Unit) {
  val calls = new AtomicInteger(0)
  val deadline = new AtomicLong(0L)
  @volatile var source: String = ""
  override def apply(deadlineEpochMillis: Long, from: String): Unit = {
    deadline.set(deadlineEpochMillis)
    source = from
    calls.incrementAndGet()
  }
}
