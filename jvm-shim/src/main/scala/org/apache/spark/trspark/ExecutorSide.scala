package org.apache.spark.trspark

import java.util.{Map => JMap}
import java.util.concurrent.{ConcurrentHashMap, Executors, TimeUnit}
import java.util.concurrent.atomic.AtomicInteger

import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.api.plugin.{ExecutorPlugin, PluginContext}
import org.apache.spark.deploy.SparkHadoopUtil
import org.apache.spark.internal.Logging
import org.apache.spark.shuffle.{IndexShuffleBlockResolver, ShuffleBlockInfo}
import org.apache.spark.storage.{ShuffleDataBlockId, ShuffleIndexBlockId, StorageLevel}

/**
 * Executor side: asks the driver for backup work every [[TRExecutorPlugin.PollMs]] ms (the
 * plugin API only lets executors talk to the driver) and copies one map output at a time,
 * either to the remote store ([[RemoteBackups]]) or to a peer's block manager the way
 * `BlockManagerDecommissioner` migrates shuffle files (`uploadBlockSync` of the data block,
 * then the index block, whose arrival makes the driver re-point the output to the peer).
 */
class TRExecutorPlugin extends ExecutorPlugin with Logging {
  private var ctx: PluginContext = _
  private var conf: TRConf = _
  private lazy val remote = new RemoteBackups(conf.remotePath, ctx.conf().getAppId,
    SparkHadoopUtil.get.newConfiguration(ctx.conf()))
  private val cancelled = ConcurrentHashMap.newKeySet[(Int, Long)]()
  private val poller = Executors.newSingleThreadScheduledExecutor(Daemon.factory("trspark-backup-poll"))
  // Backups run one at a time on their own thread so polling (and so cancelling) goes on meanwhile.
  private val worker = Executors.newSingleThreadExecutor(Daemon.factory("trspark-backup"))
  private val inFlight = new AtomicInteger(0)

  private var notices: Option[NoticeWatcher] = None

  override def init(context: PluginContext, extraConf: JMap[String, String]): Unit = {
    ctx = context
    conf = TRConf(context.conf())
    if (conf.usesEngine) {
      val settings = NoticeSettings(context.conf()).forExecutor(context.executorID())
      val watcher = new NoticeWatcher(settings,
        (deadline, source) => ctx.send(Wire.encode(TerminationNotice(ctx.executorID(), deadline, source))),
        (at, _) => ctx.send(Wire.encode(RebalanceRecommendation(ctx.executorID(), at))))
      reportPool(watcher, settings.source)
      watcher.start()
      watcher.installSignalHandler()
      notices = Some(watcher)
    }
    if (conf.backupsEnabled) {
      poller.scheduleWithFixedDelay(() => pollOnce(), TRExecutorPlugin.PollMs, TRExecutorPlugin.PollMs,
        TimeUnit.MILLISECONDS)
    }
  }

  /**
   * Tell the driver this executor's pool before `init` returns: a blocking ask, since Spark
   * offers the executor no task until then, so the engine knows the pool before the first task.
   */
  private def reportPool(watcher: NoticeWatcher, metadataSource: String): Unit = {
    val (pool, source) = ExecutorPool.detect(sys.env.get(ExecutorPool.EnvVar), watcher.metadataPool(), metadataSource,
      ctx.conf().get(TRConf.Prefix + "pool", "default").trim)
    try ctx.ask(Wire.encode(PoolReport(ctx.executorID(), pool, source)))
    catch { case NonFatal(e) => logWarning(s"trspark: cannot report pool $pool to the driver: $e") }
  }

  override def shutdown(): Unit = {
    notices.foreach(_.stop())
    poller.shutdownNow()
    worker.shutdownNow()
  }

  private def pollOnce(): Unit = try {
    // Take at most a couple of tasks: the rest stay on the driver, where cancelling is free.
    val capacity = math.max(0, TRExecutorPlugin.MaxInFlight - inFlight.get())
    Wire.decode(ctx.ask(Wire.encode(PollWork(ctx.executorID(), capacity))).asInstanceOf[String]) match {
      case Work(tasks, cancels, deletes) =>
        cancels.foreach(cancelled.add)
        deletes.foreach { case (shuffleId, mapId) => deletePeerCopy(shuffleId, mapId) }
        tasks.foreach { task =>
          inFlight.incrementAndGet()
          worker.execute(() => try run(task) finally inFlight.decrementAndGet())
        }
      case _ =>
    }
  } catch {
    case NonFatal(e) => logDebug(s"trspark: poll failed: $e")
  }

  private def run(task: BackupTask): Unit = {
    if (cancelled.remove((task.shuffleId, task.mapId))) return
    val started = System.nanoTime()
    try {
      val (bytes, indexCrc, dataCrc) =
        if (task.target == Target.Remote) toRemote(task) else toPeer(task)
      ctx.send(Wire.encode(BackupDone(ctx.executorID(), task, bytes, (System.nanoTime() - started) / 1e9, indexCrc, dataCrc)))
    } catch {
      case _: RemoteBackups.Cancelled =>
        remote.delete(task.shuffleId, task.mapId)
      case NonFatal(e) =>
        logWarning(s"trspark: backup of shuffle ${task.shuffleId} map ${task.mapId} to ${task.target} failed: $e")
        val missing = e.isInstanceOf[java.io.FileNotFoundException] // this executor lost the output's files
        Try(ctx.send(Wire.encode(BackupFailedMsg(ctx.executorID(), task, e.toString, missing))))
    }
  }

  /** Delete the files of another executor's map output that this executor holds as a peer copy. */
  private def deletePeerCopy(shuffleId: Int, mapId: Long): Unit = worker.execute { () =>
    try resolver.removeDataByMap(shuffleId, mapId)
    catch { case NonFatal(e) => logWarning(s"trspark: cannot delete peer copy of shuffle $shuffleId map $mapId: $e") }
  }

  private def resolver: IndexShuffleBlockResolver = SparkEnv.get.blockManager.migratableResolver match {
    case r: IndexShuffleBlockResolver => r
    case other => throw new UnsupportedOperationException(s"shuffle resolver ${other.getClass.getName}")
  }

  private def toRemote(task: BackupTask): (Long, Long, Long) = {
    val index = resolver.getIndexFile(task.shuffleId, task.mapId)
    if (!index.exists()) throw new java.io.FileNotFoundException(s"no map output file $index")
    val data = resolver.getDataFile(task.shuffleId, task.mapId)
    remote.write(task.shuffleId, task.mapId, index, data, task.throttle,
      () => cancelled.contains((task.shuffleId, task.mapId)))
  }

  private def toPeer(task: BackupTask): (Long, Long, Long) = {
    val bm = SparkEnv.get.blockManager
    val blocks = bm.migratableResolver.getMigrationBlocks(ShuffleBlockInfo(task.shuffleId, task.mapId))
    if (blocks.isEmpty) throw new java.io.FileNotFoundException(s"no map output for $task")
    // Data before index: the index's arrival is what re-points the output to the peer.
    val ordered = blocks.sortBy { case (id, _) => if (id.isInstanceOf[ShuffleDataBlockId]) 0 else 1 }
    ordered.foreach { case (blockId, buffer) =>
      if (cancelled.contains((task.shuffleId, task.mapId))) throw new RemoteBackups.Cancelled
      bm.blockTransferService.uploadBlockSync(task.peerHost, task.peerPort, task.target, blockId, buffer,
        StorageLevel.DISK_ONLY, null)
    }
    // Bytes of the map output itself (index + data), as counted for remote copies; a checksum
    // file Spark may migrate along is not part of it.
    val outputBytes = ordered.collect {
      case (_: ShuffleDataBlockId, buffer) => buffer.size()
      case (_: ShuffleIndexBlockId, buffer) => buffer.size()
    }.sum
    (outputBytes, 0L, 0L)
  }

  private def Try[T](body: => T): Unit = try body catch { case NonFatal(_) => }
}

object TRExecutorPlugin {
  val PollMs = 150L
  val MaxInFlight = 2
}

/** Daemon threads with a name, so a stuck trspark thread never keeps a JVM alive. */
object Daemon {
  def factory(name: String): java.util.concurrent.ThreadFactory = (r: Runnable) => {
    val t = new Thread(r, name)
    t.setDaemon(true)
    t
  }
}
