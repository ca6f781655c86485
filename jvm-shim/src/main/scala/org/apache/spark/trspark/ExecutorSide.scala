package org.apache.spark.trspark

import java.util.{Map => JMap}
import java.util.concurrent.{ConcurrentHashMap, ConcurrentSkipListSet, Executors, TimeUnit}
import java.util.concurrent.atomic.AtomicLong
import java.util.zip.CRC32

import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.api.plugin.{ExecutorPlugin, PluginContext}
import org.apache.spark.deploy.SparkHadoopUtil
import org.apache.spark.internal.Logging
import org.apache.spark.network.buffer.{ManagedBuffer, NioManagedBuffer}
import org.apache.spark.shuffle.{IndexShuffleBlockResolver, ShuffleBlockInfo}
import org.apache.spark.storage.{BlockId, ShuffleDataBlockId, ShuffleIndexBlockId, StorageLevel}

/**
 * Executor side: asks the driver for backup work every [[TRExecutorPlugin.PollMs]] ms (the
 * plugin API only lets executors talk to the driver), every [[TRExecutorPlugin.QuietPollMs]] ms
 * while the driver answers that the application is quiet, and copies one map output at a time,
 * either to the remote store ([[RemoteBackups]]) or to a peer's block manager the way
 * `BlockManagerDecommissioner` migrates shuffle files (`uploadBlockSync` of the data block,
 * then the index block, whose arrival makes the driver re-point the output to the peer).
 */
class TRExecutorPlugin extends ExecutorPlugin with Logging {
  private var ctx: PluginContext = _
  private var conf: TRConf = _
  private var metrics: ExecutorMetrics = _
  private lazy val remote = new RemoteBackups(conf.remotePath, ctx.conf().getAppId,
    SparkHadoopUtil.get.newConfiguration(ctx.conf()))
  // Output -> how many copies had been handed out when its cancel arrived. A cancel stops the
  // copies of that output handed out before it, never one the driver requests after it.
  private val cancelled = new ConcurrentHashMap[(Int, Long), java.lang.Long]()
  private val handedOut = new AtomicLong(0)
  private val poller = Executors.newSingleThreadScheduledExecutor(Daemon.factory("trspark-backup-poll"))
  // Backups run one at a time on their own thread so polling (and so cancelling) goes on meanwhile.
  private val worker = Executors.newSingleThreadExecutor(Daemon.factory("trspark-backup"))
  // The numbers of the copies handed out and not yet ended: a cancel older than all of them can
  // stop nothing any more, so it is forgotten.
  private val inFlight = new ConcurrentSkipListSet[java.lang.Long]()

  // While the driver reports a quiet application, polls wait until `quietUntil` (System.nanoTime);
  // a task start or a notice here ends the wait at the next beat (see `wake`).
  @volatile private var quietUntil = 0L
  @volatile private var woken = false

  private var notices: Option[NoticeWatcher] = None
  /** Set when this executor shuts down: a copy interrupted by that is no store failure to report. */
  @volatile private var stopping = false

  override def init(context: PluginContext, extraConf: JMap[String, String]): Unit = {
    ctx = context
    conf = TRConf(context.conf())
    metrics = new ExecutorMetrics(context.metricRegistry())
    val settings = NoticeSettings(context.conf()).forExecutor(context.executorID())
    val watcher = new NoticeWatcher(settings,
      (deadline, source) => { wake(); ctx.send(Wire.encode(TerminationNotice(ctx.executorID(), deadline, source))) },
      (at, _) => ctx.send(Wire.encode(RebalanceRecommendation(ctx.executorID(), at))))
    // Every mode reports the pool: the event log then bills each executor's hours to its own pool.
    reportPool(watcher, settings.source)
    if (conf.usesEngine) {
      watcher.start()
      watcher.installSignalHandler()
      notices = Some(watcher)
    } else watcher.stop() // only the engine acts on notices
    if (conf.backupsEnabled) {
      poller.scheduleWithFixedDelay(() => beat(), TRExecutorPlugin.PollMs, TRExecutorPlugin.PollMs,
        TimeUnit.MILLISECONDS)
    }
  }

  /**
   * Tell the driver this executor's pool before `init` returns: a blocking ask, since Spark
   * offers the executor no task until then, so the engine knows the pool before the first task.
   */
  private def reportPool(watcher: NoticeWatcher, metadataSource: String): Unit = {
    sys.env.get(ExecutorPool.EnvVar).map(_.trim).filter(v => v.nonEmpty && !TRConf.isPoolName(v)).foreach { v =>
      logWarning(s"trspark: ${ExecutorPool.EnvVar}='$v' is not a pool name (${TRConf.PoolNameRule}); ignored")
    }
    val (pool, source) = ExecutorPool.detect(sys.env.get(ExecutorPool.EnvVar), watcher.metadataPool(), metadataSource,
      ctx.conf().get(TRConf.Prefix + "pool", "default").trim)
    try ctx.ask(Wire.encode(PoolReport(ctx.executorID(), pool, source)))
    catch { case NonFatal(e) => logWarning(s"trspark: cannot report pool $pool to the driver: $e") }
  }

  override def shutdown(): Unit = {
    stopping = true
    notices.foreach(_.stop())
    poller.shutdownNow()
    worker.shutdownNow()
  }

  override def onTaskStart(): Unit = wake()

  /** Poll at the next beat: a task started here (its output may need a copy) or a notice came. */
  private def wake(): Unit = {
    woken = true
    quietUntil = 0L
  }

  /** Poll, unless the driver said the application is quiet and nothing woke this executor since. */
  private def beat(): Unit = {
    val until = quietUntil
    if (woken || until == 0L || System.nanoTime() - until >= 0) pollOnce()
  }

  private def pollOnce(): Unit = try {
    woken = false
    metrics.polls.inc()
    // Take at most a couple of tasks: the rest stay on the driver, where cancelling is free.
    val capacity = math.max(0, TRExecutorPlugin.MaxInFlight - inFlight.size())
    Wire.decode(ctx.ask(Wire.encode(PollWork(ctx.executorID(), capacity))).asInstanceOf[String]) match {
      case Work(tasks, cancels, deletes, checks, quiet) =>
        quietUntil = if (quiet && !woken) System.nanoTime() + TRExecutorPlugin.QuietPollMs * 1000000L else 0L
        forgetStaleCancels()
        cancels.foreach(output => cancelled.put(output, handedOut.get()))
        deletes.foreach { case (shuffleId, mapId) => deletePeerCopy(shuffleId, mapId) }
        checks.foreach(c => worker.execute(() => checkPeerCopy(c)))
        tasks.foreach { task =>
          val number = handedOut.incrementAndGet()
          inFlight.add(number)
          worker.execute(() => try run(task, number) finally inFlight.remove(number))
        }
      case _ =>
    }
  } catch {
    case NonFatal(e) => logDebug(s"trspark: poll failed: $e")
  }

  /** Drop the cancels that no copy still in flight was handed out before. */
  private def forgetStaleCancels(): Unit = {
    val oldest = Option(inFlight.ceiling(Long.MinValue)).map(_.longValue).getOrElse(Long.MaxValue)
    cancelled.values().removeIf(_.longValue < oldest)
  }

  /** Copy `task`, the `number`-th handed to this executor, unless a cancel of its output came after it. */
  private def run(task: BackupTask, number: Long): Unit = {
    val isCancelled = () => Option(cancelled.get((task.shuffleId, task.mapId))).exists(number <= _)
    if (isCancelled()) { stopped(task); return }
    val started = System.nanoTime()
    try {
      val (bytes, indexCrc, dataCrc, verified) =
        if (task.target == Target.Remote) toRemote(task, isCancelled) else toPeer(task, isCancelled)
      val nanos = System.nanoTime() - started
      ctx.send(Wire.encode(BackupDone(ctx.executorID(), task, bytes, nanos / 1e9, indexCrc, dataCrc, verified)))
      metrics.written(task.target, bytes, nanos)
    } catch {
      case _: RemoteBackups.Cancelled =>
        // The files a cancelled remote copy wrote are deleted here; not for a peer copy, whose remote twin may be in use.
        if (task.target == Target.Remote) remote.delete(task.shuffleId, task.mapId)
        stopped(task)
      case NonFatal(_) if stopping =>
      case rejected: RemoteBackups.Rejected =>
        metrics.copiesFailed.inc()
        Try(ctx.send(Wire.encode(BackupFailedMsg(ctx.executorID(), task, rejected.problem, rejected = true))))
      case NonFatal(e) =>
        metrics.copiesFailed.inc()
        logWarning(s"trspark: backup of shuffle ${task.shuffleId} map ${task.mapId} to ${task.target} failed: $e")
        val missing = e.isInstanceOf[RemoteBackups.SourceMissing] // this executor lost the output's files
        Try(ctx.send(Wire.encode(BackupFailedMsg(ctx.executorID(), task, e.toString, missing))))
    }
  }

  /**
   * `task` stopped on a cancel. A peer copy sends its data block first, so the peer may hold that
   * block (or an earlier cancelled copy's): the driver, told so, has the peer delete what is not
   * wanted. Only this executor knows when the copy stopped sending; a delete before then could
   * come before the block lands.
   */
  private def stopped(task: BackupTask): Unit = {
    metrics.copiesCancelled.inc()
    if (task.target != Target.Remote) Try(ctx.send(Wire.encode(BackupFailedMsg(ctx.executorID(), task, "cancelled"))))
  }

  /** Delete the files of another executor's map output that this executor holds as a peer copy.
   *  Counted only when a file was there: the driver also asks after a cancelled copy that sent nothing. */
  private def deletePeerCopy(shuffleId: Int, mapId: Long): Unit = worker.execute { () =>
    try {
      val held = resolver.getIndexFile(shuffleId, mapId).exists() || resolver.getDataFile(shuffleId, mapId).exists()
      resolver.removeDataByMap(shuffleId, mapId)
      if (held) metrics.peerCopiesDeleted.inc()
    } catch { case NonFatal(e) => logWarning(s"trspark: cannot delete peer copy of shuffle $shuffleId map $mapId: $e") }
  }

  /** Re-read a peer copy this executor received and report whether it matches its source's CRC32s. */
  private def checkPeerCopy(check: PeerCheck): Unit = {
    def scan(file: java.io.File): Option[(Long, Long)] =
      if (!file.exists()) None
      else Some {
        val in = new java.io.FileInputStream(file)
        try RemoteBackups.pump(in, java.io.OutputStream.nullOutputStream(), 0, () => false) finally in.close()
      }
    val problem = try {
      val index = scan(resolver.getIndexFile(check.shuffleId, check.mapId))
      // An output whose partitions are all empty has no data file: its CRC32 is that of no bytes.
      val data = scan(resolver.getDataFile(check.shuffleId, check.mapId)).orElse(Some((0L, new CRC32().getValue)))
      if (index.isEmpty) "missing"
      else if (index.get._2 != check.indexCrc || data.get._2 != check.dataCrc) "corrupt"
      else ""
    } catch { case NonFatal(e) => s"unreadable ($e)" }
    metrics.checked(problem)
    Try(ctx.send(Wire.encode(PeerChecked(ctx.executorID(), check, problem))))
  }

  private def resolver: IndexShuffleBlockResolver = SparkEnv.get.blockManager.migratableResolver match {
    case r: IndexShuffleBlockResolver => r
    case other => throw new UnsupportedOperationException(s"shuffle resolver ${other.getClass.getName}")
  }

  private def toRemote(task: BackupTask, isCancelled: () => Boolean): (Long, Long, Long, Option[Stamp]) = {
    val index = resolver.getIndexFile(task.shuffleId, task.mapId)
    if (!index.exists()) throw new RemoteBackups.SourceMissing(s"no map output file $index")
    val data = resolver.getDataFile(task.shuffleId, task.mapId)
    val (bytes, indexCrc, dataCrc) = remote.write(task.shuffleId, task.mapId, index, data, task.throttle, isCancelled)
    remote.verify(task.shuffleId, task.mapId, indexCrc, dataCrc) match {
      case Right(stamp) => (bytes, indexCrc, dataCrc, stamp)
      case Left(problem) => throw new RemoteBackups.Rejected(problem)
    }
  }

  private def toPeer(task: BackupTask, isCancelled: () => Boolean): (Long, Long, Long, Option[Stamp]) = {
    val bm = SparkEnv.get.blockManager
    val blocks = bm.migratableResolver.getMigrationBlocks(ShuffleBlockInfo(task.shuffleId, task.mapId))
    if (blocks.isEmpty) throw new RemoteBackups.SourceMissing(s"no map output for $task")
    // Data before index: a complete copy is in place when the index arrives, which makes Spark
    // re-point the output to the peer (the driver points it back to the source until the peer checked it).
    val ordered = blocks.sortBy { case (id, _) => if (id.isInstanceOf[ShuffleDataBlockId]) 0 else 1 }
    // CRC32s of the bytes sent, computed here at the source: the peer re-reads its copy against them.
    var (indexCrc, dataCrc) = (0L, new CRC32().getValue)
    ordered.foreach { case (blockId, buffer) =>
      if (isCancelled()) throw new RemoteBackups.Cancelled
      // The throttle paces this pass, so a block leaves no sooner than its bytes / throttle after
      // the one before it: a throttled peer copy is as slow as a remote one, over a slow network.
      val crc = {
        val in = RemoteBackups.openSource(buffer.createInputStream())
        try RemoteBackups.pump(in, java.io.OutputStream.nullOutputStream(), task.throttle, isCancelled)._2
        finally in.close()
      }
      blockId match {
        case _: ShuffleDataBlockId => dataCrc = crc
        case _: ShuffleIndexBlockId => indexCrc = crc
        case _ =>
      }
      bm.blockTransferService.uploadBlockSync(task.peerHost, task.peerPort, task.target, blockId,
        TRExecutorPlugin.damagedForTests(blockId, buffer), StorageLevel.DISK_ONLY, null)
    }
    // Bytes of the map output itself (index + data), as counted for remote copies; a checksum
    // file Spark may migrate along is not part of it.
    val outputBytes = ordered.collect {
      case (_: ShuffleDataBlockId, buffer) => buffer.size()
      case (_: ShuffleIndexBlockId, buffer) => buffer.size()
    }.sum
    (outputBytes, indexCrc, dataCrc, None)
  }

  private def Try[T](body: => T): Unit = try body catch { case NonFatal(_) => }
}

object TRExecutorPlugin {
  val PollMs = 150L
  /** Between polls while the application is quiet: no job runs and no copy is pending (ms). */
  val QuietPollMs = 1000L
  val MaxInFlight = 2

  /**
   * Test hook (tests only, never set it in production): with the executor JVM's system property
   * `trspark.test.corruptPeerCopy` set, a peer copy's data block is sent with its first byte
   * flipped (damage in transit), so live tests can show the peer's check rejecting it.
   */
  val CorruptPeerCopyProperty = "trspark.test.corruptPeerCopy"

  def damagedForTests(blockId: BlockId, buffer: ManagedBuffer): ManagedBuffer =
    if (System.getProperty(CorruptPeerCopyProperty) == null || !blockId.isInstanceOf[ShuffleDataBlockId] ||
      buffer.size() == 0) buffer
    else {
      val bytes = buffer.nioByteBuffer()
      val copy = java.nio.ByteBuffer.allocate(bytes.remaining())
      copy.put(bytes).flip()
      copy.put(0, (copy.get(0) ^ 0x5a).toByte)
      new NioManagedBuffer(copy)
    }
}

/** Daemon threads with a name, so a stuck trspark thread never keeps a JVM alive. */
object Daemon {
  def factory(name: String): java.util.concurrent.ThreadFactory = (r: Runnable) => {
    val t = new Thread(r, name)
    t.setDaemon(true)
    t
  }
}
