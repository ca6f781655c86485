package org.apache.spark.trspark

import java.net.{HttpURLConnection, Proxy, URI}
import java.nio.charset.StandardCharsets
import java.time.Instant
import java.util.concurrent.{Executors, ScheduledExecutorService, ThreadFactory, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger, AtomicLong}

import scala.util.Try
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import com.fasterxml.jackson.databind.node.ObjectNode

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

/** Executor -> driver: an AWS rebalance recommendation (elevated interruption risk) since `atEpochMillis`. */
case class RebalanceRecommendation(executorId: String, atEpochMillis: Long) {
  def toJson: ObjectNode = Json.obj(RebalanceRecommendation.Type).put("executor", executorId).put("at", atEpochMillis)
}

object RebalanceRecommendation {
  val Type = "rebalance"
  def fromJson(node: JsonNode): RebalanceRecommendation =
    RebalanceRecommendation(node.path("executor").asText(), node.path("at").asLong())
}

object TerminationNotice {
  val Type = "notice"
  private val mapper = new ObjectMapper()
  def fromJson(node: JsonNode): TerminationNotice = TerminationNotice(
    node.path("executor").asText(), node.path("deadline").asLong(), node.path("source").asText())
}

/**
 * Executor-side watcher for termination notices: polls the configured cloud metadata service
 * every `intervalS` seconds on a daemon thread, and (optionally) takes a POSIX signal (SIGPWR)
 * as a notice. On the first notice it calls `onNotice(deadlineEpochMillis, source)` exactly once
 * and stops polling. It never throws out of its thread: an unreachable or refusing service
 * means "no notice"; each new kind of problem is logged once at INFO, repeats at DEBUG.
 *
 * The executor plugin's use (see `docs/notices-and-pools.md`):
 * {{{
 *   val watcher = new NoticeWatcher(NoticeSettings(ctx.conf()).forExecutor(ctx.executorID()),
 *     (deadline, source) => ctx.send(Wire.encode(TerminationNotice(ctx.executorID(), deadline, source))))
 *   watcher.start(); watcher.installSignalHandler()      // ... and watcher.stop() in shutdown()
 * }}}
 *
 * @param settings what to poll and how often.
 * @param onNotice called once with the deadline (ms since the epoch, UTC) and the source
 *                 (`aws`, `gcp`, `azure` or `signal:PWR`).
 * @param onRebalance called at most once, before any notice, with the time of an AWS rebalance
 *                 recommendation (ms since the epoch) and `aws-rebalance`: the instance is at
 *                 elevated risk of interruption, with no deadline yet.
 */
class NoticeWatcher(settings: NoticeSettings, onNotice: (Long, String) => Unit,
    onRebalance: (Long, String) => Unit) extends Logging {
  import NoticeWatcher._

  /** A watcher that ignores rebalance recommendations. */
  def this(settings: NoticeSettings, onNotice: (Long, String) => Unit) = this(settings, onNotice, (_, _) => ())

  private val rebalanced = new AtomicBoolean(false)

  private val fired = new AtomicBoolean(false)
  // A signal handler cannot be unregistered from SignalUtils: after stop() it must do nothing.
  @volatile private var stopped = false
  private val pollCount = new AtomicLong(0)
  @volatile private var lastProblem = ""
  @volatile private var awsToken: Option[(String, Long)] = None // (token, expiry ms)
  // After a failed token request, IMDSv1 until then (epoch ms): an unanswered request (an IMDSv2
  // hop limit of 1 in a container) would otherwise hold every poll for a whole request timeout.
  @volatile private var awsTokenRetryAt = 0L
  @volatile private var azureVmName: Option[String] = None
  private var azureNameFailures = 0 // only the poll thread reads the name
  private def clock(): Long = System.currentTimeMillis()
  private val periodMs = math.max(1L, (settings.intervalS * 1000).round)
  // When the last poll that saw no notice started. A notice that carries no time (GCP's
  // `preempted`, an Azure event without NotBefore) was posted after it, so its deadline is at the
  // earliest `lastClearMs + window` (and no earlier than the poll that sees it); counting the
  // window from when the notice is seen would put the deadline up to one interval late.
  @volatile private var lastClearMs: Option[Long] = None
  private val timer: ScheduledExecutorService = Executors.newSingleThreadScheduledExecutor(daemon("trspark-notice"))

  /** Polls made so far (for tests and the status log). */
  def polls: Long = pollCount.get()
  /** The last problem seen ("" = none). */
  def problem: String = lastProblem
  def hasFired: Boolean = fired.get()
  /** When the last poll that saw no notice started (epoch ms; -1 = none yet), for tests. */
  def lastClear: Long = lastClearMs.getOrElse(-1L)

  /** Start polling (no-op for `source = none`). */
  def start(): Unit = if (settings.polls) {
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
      !stopped // once stopped, the signal goes on to the handlers before it (or terminates the JVM)
    }
  }

  /** Report a notice; only the first call before [[stop]] reaches `onNotice`. Safe from any thread. */
  def fire(deadlineEpochMillis: Long, source: String): Unit = {
    if (!stopped && fired.compareAndSet(false, true)) {
      val inS = (deadlineEpochMillis - clock()) / 1000.0
      logWarning(s"trspark: termination notice from $source: this executor ends at " +
        f"${Instant.ofEpochMilli(deadlineEpochMillis)} (in $inS%.1f s)")
      timer.shutdown()
      try onNotice(deadlineEpochMillis, source)
      catch { case NonFatal(e) => logWarning(s"trspark: termination notice callback failed: $e") }
    }
  }

  /** One poll; everything it can throw is caught (the thread must keep running). */
  def pollOnce(): Unit = if (!fired.get()) {
    val started = clock()
    // The VM still runs, so a notice seen now is at most one window old: without a clear poll
    // since (the first poll, or failed ones longer than the window) its deadline is this poll's start.
    val postedAfter = math.max(lastClearMs.getOrElse(Long.MinValue), started - settings.windowMillis)
    val result = try poll(started, postedAfter) catch {
      case NonFatal(e) => PollResult.Unusable(s"${settings.source} metadata at ${settings.baseUrl} unreachable ($e)")
    }
    result match {
      case PollResult.Notice(deadline) => fire(deadline, settings.source)
      case PollResult.NoNotice =>
        lastProblem = ""
        lastClearMs = Some(started)
        if (settings.source == "aws" && !rebalanced.get() && pollCount.get() % RebalanceEveryPolls == 0) pollRebalance()
      case PollResult.Unusable(reason) =>
        if (reason != lastProblem) logInfo(s"trspark: no termination notice: $reason (further repeats at DEBUG)")
        else logDebug(s"trspark: no termination notice: $reason")
        lastProblem = reason
    }
    // Counted last: whoever sees the count also sees this poll's outcome.
    pollCount.incrementAndGet()
  }

  /** AWS only: one request for a rebalance recommendation (every [[RebalanceEveryPolls]] polls); reported once. */
  private def pollRebalance(): Unit = {
    val seen = try {
      val (status, body) = get(NoticeEndpoints.AwsRebalancePath, awsHeaders())
      NoticeEndpoints.parseAwsRebalance(status, body, clock())
    } catch { case NonFatal(_) => None } // the notice poll itself reports an unreachable service
    seen.foreach { at =>
      if (!stopped && rebalanced.compareAndSet(false, true)) {
        logWarning(s"trspark: AWS rebalance recommendation since ${Instant.ofEpochMilli(at)}")
        try onRebalance(at, "aws-rebalance")
        catch { case NonFatal(e) => logWarning(s"trspark: rebalance callback failed: $e") }
      }
    }
  }

  /** One request at `started`; `postedAfter`: the earliest time a notice seen now can have been posted (ms). */
  private def poll(started: Long, postedAfter: Long): PollResult = settings.source match {
    case "aws" =>
      val (status, body) = get(NoticeEndpoints.AwsPath, awsHeaders())
      if (status == 401) { awsToken = None; awsTokenRetryAt = 0L } // expired, revoked or required: ask at once
      NoticeEndpoints.parseAws(status, body, started)
    case "gcp" =>
      val (status, body) = get(NoticeEndpoints.GcpPath, Seq("Metadata-Flavor" -> "Google"))
      NoticeEndpoints.parseGcp(status, body, postedAfter, settings.windowMillis)
    case "azure" =>
      val (status, body) = get(NoticeEndpoints.AzurePath, Seq("Metadata" -> "true"))
      vmName() match {
        case Some(name) => NoticeEndpoints.parseAzure(status, body, name, postedAfter, settings.windowMillis)
        case None => PollResult.Unusable("Azure metadata gave no VM name yet, so its scheduled events are not read")
      }
    case other => PollResult.Unusable(s"unknown notice source '$other'")
  }

  /**
   * This VM's pool from the instance metadata (`spot` or `ondemand`, see [[NoticeEndpoints]]);
   * None when no source is configured or the service gives no usable answer. One request
   * (two on GCP when the VM is not preemptible), made once at executor start.
   */
  def metadataPool(): Option[String] = if (!settings.polls) None else {
    val answer = try settings.source match {
      case "aws" => (NoticeEndpoints.parseAwsLifecycle _).tupled(get(NoticeEndpoints.AwsLifecyclePath, awsHeaders()))
      case "gcp" =>
        val flavor = Seq("Metadata-Flavor" -> "Google")
        (NoticeEndpoints.parseGcpPreemptible _).tupled(get(NoticeEndpoints.GcpPreemptiblePath, flavor)) match {
          case Some(true) => Some(NoticeEndpoints.SpotPool)
          // Spot VMs may answer FALSE here; their provisioning model says SPOT.
          case _ => (NoticeEndpoints.parseGcpProvisioning _).tupled(get(NoticeEndpoints.GcpProvisioningPath, flavor))
        }
      case "azure" =>
        (NoticeEndpoints.parseAzurePriority _).tupled(get(NoticeEndpoints.AzurePriorityPath, Seq("Metadata" -> "true")))
      case _ => None
    } catch { case NonFatal(e) => logInfo(s"trspark: no pool from ${settings.source} metadata: $e"); None }
    if (answer.isEmpty) logInfo(s"trspark: ${settings.source} metadata at ${settings.baseUrl} names no pool")
    answer
  }

  /** IMDSv2 session-token header when the service issues tokens; IMDSv1 (none) otherwise. */
  private def awsHeaders(): Seq[(String, String)] = {
    val now = clock()
    val token = awsToken.filter(_._2 > now).map(_._1).orElse(if (now < awsTokenRetryAt) None else {
      val ttl = Seq("X-aws-ec2-metadata-token-ttl-seconds" -> AwsTokenTtlS.toString)
      val fresh = Try(request("PUT", NoticeEndpoints.AwsTokenPath, ttl)).toOption
        .collect { case (200, body) => body.trim }.filter(_.nonEmpty)
      // Renew a minute before expiry so a poll never carries a token about to lapse.
      awsToken = fresh.map(t => (t, now + (AwsTokenTtlS - 60) * 1000L))
      if (fresh.isEmpty) awsTokenRetryAt = clock() + AwsTokenRetryMs
      fresh
    })
    token.map(t => Seq("X-aws-ec2-metadata-token" -> t)).getOrElse(Nil)
  }

  /**
   * This VM's name (Azure events list every VM of the scale set), read until the service gives
   * it. Meanwhile this VM's events cannot be told from the others': a transient failure (a 429
   * under throttling) would otherwise let another VM's event drain this one. After
   * [[AzureNameAttempts]] failed reads it is given up on: "" = unknown = accept every event.
   */
  private def vmName(): Option[String] = azureVmName.orElse {
    val name = Try(get(NoticeEndpoints.AzureNamePath, Seq("Metadata" -> "true"))).toOption
      .collect { case (200, body) if body.trim.nonEmpty => body.trim }
    azureNameFailures = if (name.isEmpty) azureNameFailures + 1 else 0
    azureVmName = name.orElse(if (azureNameFailures >= AzureNameAttempts) Some("") else None)
    if (name.isEmpty && azureVmName.contains("")) {
      logWarning(s"trspark: Azure metadata gave no VM name in $AzureNameAttempts tries; every scheduled " +
        "Preempt or Terminate event of the scale set counts as this executor's notice")
    }
    azureVmName
  }

  private def uri(path: String): URI = URI.create(settings.baseUrl + path)

  private def get(path: String, headers: Seq[(String, String)]): (Int, String) = request("GET", path, headers)

  /**
   * One request: (status, body). Through `HttpURLConnection`, not `java.net.http.HttpClient`,
   * whose asynchronous machinery cost an idle executor several ms of CPU per second at a poll a
   * second (much of it JIT compilation, still at work 90 s after a job). Reading the whole body
   * and closing the stream, without `disconnect()`, returns the connection to the JDK's
   * keep-alive cache for the next poll. Metadata services must never be asked through a proxy.
   *
   * A request takes at most 2 x [[RequestTimeoutMs]]: the watchdog cuts off headers that are not
   * in by the deadline, and the body is read until the deadline, each read bounded by the read
   * timeout.
   */
  private def request(method: String, path: String, headers: Seq[(String, String)]): (Int, String) = {
    val connection = uri(path).toURL.openConnection(Proxy.NO_PROXY).asInstanceOf[HttpURLConnection]
    connection.setConnectTimeout(ConnectTimeoutMs)
    connection.setReadTimeout(RequestTimeoutMs)
    connection.setInstanceFollowRedirects(false)
    connection.setUseCaches(false)
    connection.setRequestMethod(method)
    headers.foreach { case (k, v) => connection.setRequestProperty(k, v) }
    val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RequestTimeoutMs)
    // The read timeout bounds each read only, so headers that trickle in are cut off by the
    // watchdog. It must not close a body being read: the JDK then drains the body on its
    // cleaner thread under the stream's lock, and a read of this thread would wait for that
    // drain (as long as the service trickles, up to minutes).
    val phase = new AtomicInteger(Headers)
    val watchdog = Watchdog.schedule((() => if (phase.compareAndSet(Headers, CutOff)) connection.disconnect()): Runnable,
      RequestTimeoutMs.toLong, TimeUnit.MILLISECONDS)
    try {
      val status = try connection.getResponseCode catch { case NonFatal(_) if phase.get() == CutOff => throw cutShort() }
      if (!phase.compareAndSet(Headers, Body)) throw cutShort()
      val stream = Option(if (status >= 400) connection.getErrorStream else connection.getInputStream)
      val body = stream.map { in =>
        try new String(readBefore(in, deadline), StandardCharsets.UTF_8)
        catch { case e: java.io.IOException => connection.disconnect(); throw e }
        finally in.close()
      }
      (status, body.getOrElse(""))
    } finally watchdog.cancel(false)
  }
}

object NoticeWatcher {
  // A request's phases: the watchdog may cut it off only while it waits for headers.
  private val Headers = 0
  private val Body = 1
  private val CutOff = 2

  /** The failure of a request whose answer was not whole within [[RequestTimeoutMs]]. */
  private def cutShort() = new java.net.SocketTimeoutException(s"no whole answer within $RequestTimeoutMs ms")

  /** All of `in`, unless it is not over by `deadline` (System.nanoTime) or longer than [[MaxAnswerBytes]]. */
  private def readBefore(in: java.io.InputStream, deadline: Long): Array[Byte] = {
    val out = new java.io.ByteArrayOutputStream()
    val buffer = new Array[Byte](4096)
    var n = in.read(buffer)
    while (n >= 0) {
      out.write(buffer, 0, n)
      if (System.nanoTime() - deadline > 0 || out.size() > MaxAnswerBytes) {
        throw cutShort()
      }
      n = in.read(buffer)
    }
    out.toByteArray
  }

  /** Metadata answers are a few hundred bytes; a larger one is no metadata service's. */
  val MaxAnswerBytes = 1 << 20

  /** Metadata services are link-local and answer in milliseconds; anything slower is "no answer". */
  val ConnectTimeoutMs = 500
  val RequestTimeoutMs = 1000
  val AwsTokenTtlS = 21600
  /** IMDSv1 this long after a failed token request before asking for a token again (ms). */
  val AwsTokenRetryMs = 60000L
  /** Reads of the Azure VM name before it counts as unknown for good. */
  val AzureNameAttempts = 5
  /**
   * AWS: notice polls per rebalance-recommendation poll (the first poll asks for both). A
   * recommendation comes minutes before an interruption, if at all, so asking every 5 s at the
   * default interval loses little of it and saves an idle executor most of a request a second.
   */
  val RebalanceEveryPolls = 5

  /** Closes connections whose headers are not in by the deadline; one thread for every watcher of the JVM. */
  private lazy val Watchdog: ScheduledExecutorService =
    Executors.newSingleThreadScheduledExecutor(daemon("trspark-notice-watchdog"))

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
