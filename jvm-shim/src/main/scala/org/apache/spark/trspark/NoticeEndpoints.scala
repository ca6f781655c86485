package org.apache.spark.trspark

import java.time.{Instant, LocalDateTime, OffsetDateTime, ZoneOffset, ZonedDateTime}
import java.time.format.DateTimeFormatter
import java.util.Locale

import scala.jdk.CollectionConverters._
import scala.util.Try

import com.fasterxml.jackson.databind.ObjectMapper

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
 * answers (see `docs/notices-and-pools.md`):
 *
 *  - AWS `GET /latest/meta-data/spot/instance-action`: 404 = none; 200 JSON with `action`
 *    (terminate | stop | hibernate) and an ISO-8601 UTC `time` (two minutes ahead; `hibernate`
 *    starts at once, so it is due by the poll that sees it). IMDSv2
 *    (session token from `PUT /latest/api/token`) when the service offers it, IMDSv1 otherwise.
 *  - GCP `GET /computeMetadata/v1/instance/preempted` with `Metadata-Flavor: Google`:
 *    `FALSE` / `TRUE`. No time is given: deadline = the last `FALSE` poll's start + window
 *    (~30 s on GCP), the earliest the termination can come.
 *  - Azure `GET /metadata/scheduledevents?api-version=2020-07-01` with `Metadata: true`: JSON
 *    `Events`; a `Preempt` or `Terminate` event for this VM (or naming no VM; names compared
 *    without case) is a notice, due at its RFC-1123 `NotBefore` (empty or unreadable `NotBefore`
 *    = already started: the last clear poll's start + window).
 *
 * `postedAfterMs` is the earliest time a notice without a time can have been posted: the
 * watcher passes the start of its last poll that saw none, or one window before this poll if later.
 */
object NoticeEndpoints {
  val AwsTokenPath = "/latest/api/token"
  val AwsPath = "/latest/meta-data/spot/instance-action"
  val GcpPath = "/computeMetadata/v1/instance/preempted"
  val AzurePath = "/metadata/scheduledevents?api-version=2020-07-01"
  val AzureNamePath = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
  val AzureNoticeTypes: Set[String] = Set("Preempt", "Terminate")
  private val mapper = new ObjectMapper()

  // Instance life cycle (which pool this VM is in); read once at executor start.
  val AwsLifecyclePath = "/latest/meta-data/instance-life-cycle"
  val GcpPreemptiblePath = "/computeMetadata/v1/instance/scheduling/preemptible"
  val GcpProvisioningPath = "/computeMetadata/v1/instance/scheduling/provisioning-model"
  val AzurePriorityPath = "/metadata/instance/compute/priority?api-version=2021-02-01&format=text"
  /** Pool names the metadata's answers map to. */
  val SpotPool = "spot"
  val OnDemandPool = "ondemand"

  val AwsRebalancePath = "/latest/meta-data/events/recommendations/rebalance"

  /**
   * AWS rebalance recommendation: 404 = none; 200 JSON `{"noticeTime": "<ISO-8601>"}` = this
   * spot instance is at elevated risk of interruption (no deadline). Some(notice time, ms; `nowMs`
   * when the answer has no readable time) or None.
   */
  def parseAwsRebalance(status: Int, body: String, nowMs: Long): Option[Long] =
    if (status != 200) None
    else Some(Try(mapper.readTree(body).path("noticeTime").asText("")).toOption.flatMap(parseIso).getOrElse(nowMs))

  /** AWS `instance-life-cycle`: `spot` -> spot; `on-demand`, `scheduled`, `capacity-block` -> ondemand. */
  def parseAwsLifecycle(status: Int, body: String): Option[String] =
    if (status != 200) None else body.trim.toLowerCase(Locale.ROOT) match {
      case "spot" => Some(SpotPool)
      case "on-demand" | "scheduled" | "capacity-block" => Some(OnDemandPool)
      case _ => None
    }

  /** GCP `scheduling/preemptible` (`TRUE` / `FALSE`): TRUE -> spot; FALSE -> ask the provisioning model. */
  def parseGcpPreemptible(status: Int, body: String): Option[Boolean] =
    if (status != 200) None else body.trim.toUpperCase(Locale.ROOT) match {
      case "TRUE" => Some(true)
      case "FALSE" => Some(false)
      case _ => None
    }

  /** GCP `scheduling/provisioning-model`: `SPOT` -> spot; `STANDARD` (or any other model) -> ondemand. */
  def parseGcpProvisioning(status: Int, body: String): Option[String] =
    if (status != 200 || body.trim.isEmpty) None
    else Some(if (body.trim.toUpperCase(Locale.ROOT) == "SPOT") SpotPool else OnDemandPool)

  /** Azure IMDS `compute/priority`: `Spot` (or the older `Low`) -> spot; `Regular` -> ondemand. */
  def parseAzurePriority(status: Int, body: String): Option[String] =
    if (status != 200) None else body.trim.toLowerCase(Locale.ROOT) match {
      case "spot" | "low" => Some(SpotPool)
      case "regular" => Some(OnDemandPool)
      case _ => None
    }

  /** AWS instance-action answer -> result, as seen by a poll at an unknown time. */
  def parseAws(status: Int, body: String): PollResult = parseAws(status, body, Long.MaxValue)

  /**
   * AWS instance-action answer seen by a poll that started at `seenMs` -> result. A `hibernate`
   * action comes without the two minutes' warning (hibernation begins at the notice), so it is due
   * no later than `seenMs`, whatever its `time` says.
   */
  def parseAws(status: Int, body: String, seenMs: Long): PollResult = status match {
    case 404 => PollResult.NoNotice
    case 200 =>
      val node = Try(mapper.readTree(body)).toOption.flatMap(Option(_))
      val dueBy = if (node.exists(_.path("action").asText("") == "hibernate")) seenMs else Long.MaxValue
      node.map(_.path("time").asText("")) match {
        case Some(time) if time.nonEmpty =>
          parseIso(time).map(t => PollResult.Notice(math.min(t, dueBy)): PollResult)
            .getOrElse(PollResult.Unusable(s"AWS instance-action time '$time' is not ISO-8601"))
        case _ => PollResult.Unusable(s"AWS instance-action answer without a time: ${body.take(80)}")
      }
    case 401 => PollResult.Unusable("AWS metadata refused the request (401: IMDSv2 token missing or expired)")
    case other => PollResult.Unusable(s"AWS metadata answered HTTP $other")
  }

  /** GCP preempted answer -> result; the deadline is `postedAfterMs + windowMs`. */
  def parseGcp(status: Int, body: String, postedAfterMs: Long, windowMs: Long): PollResult = status match {
    case 200 => body.trim.toUpperCase(Locale.ROOT) match {
      case "TRUE" => PollResult.Notice(postedAfterMs + windowMs)
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
  def parseAzure(status: Int, body: String, vmName: String, postedAfterMs: Long, windowMs: Long): PollResult = status match {
    case 200 =>
      val root = Try(mapper.readTree(body)).toOption.filter(n => n != null && n.path("Events").isArray)
      root match {
        case None => PollResult.Unusable(s"Azure scheduled events answer without an Events list: ${body.take(80)}")
        case Some(node) =>
          val deadlines = node.path("Events").elements().asScala.filter { event =>
            val resources = event.path("Resources").elements().asScala.map(_.asText()).toSeq
            // Azure resource names are case-insensitive.
            AzureNoticeTypes.contains(event.path("EventType").asText()) &&
              (vmName.isEmpty || resources.isEmpty || resources.exists(_.equalsIgnoreCase(vmName)))
          }.map { event =>
            // An event whose NotBefore is empty or unreadable is still a notice: it counts as
            // already started, the earliest it can be (a needless backup beats a missed notice).
            parseRfc1123(event.path("NotBefore").asText("").trim).getOrElse(postedAfterMs + windowMs)
          }.toSeq
          if (deadlines.isEmpty) PollResult.NoNotice else PollResult.Notice(deadlines.min)
      }
    case 400 => PollResult.Unusable("Azure metadata refused the request (400: Metadata: true header not accepted)")
    case other => PollResult.Unusable(s"Azure metadata answered HTTP $other")
  }

  /** An ISO-8601 time; one without a zone is UTC, as every AWS metadata time is. */
  def parseIso(text: String): Option[Long] =
    Try(OffsetDateTime.parse(text).toInstant.toEpochMilli).orElse(Try(Instant.parse(text).toEpochMilli))
      .orElse(Try(LocalDateTime.parse(text).toInstant(ZoneOffset.UTC).toEpochMilli)).toOption

  def parseRfc1123(text: String): Option[Long] =
    Try(ZonedDateTime.parse(text, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant.toEpochMilli).toOption
}
