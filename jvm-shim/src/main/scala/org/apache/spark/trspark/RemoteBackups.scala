package org.apache.spark.trspark

import java.io.{File, FileInputStream, InputStream, OutputStream}
import java.nio.charset.StandardCharsets
import java.util.UUID
import java.util.zip.CRC32

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileStatus, FileSystem, Path}

import org.apache.spark.network.util.JavaUtils
import org.apache.spark.shuffle.IndexShuffleBlockResolver.NOOP_REDUCE_ID
import org.apache.spark.storage.{ShuffleDataBlockId, ShuffleIndexBlockId}

/**
 * Remote backups in Spark's fallback-storage layout, so Spark's shuffle reader reads a map
 * output re-pointed to `FallbackStorage.FALLBACK_BLOCK_MANAGER_ID` straight from here:
 * `<root>/<appId>/<shuffleId>/<hash(name)>/<name>` with `hash = JavaUtils.nonNegativeHash`
 * (measured from `FallbackStorage.read` of Spark 4.3).
 *
 * Commit protocol (why a cut-off backup is never used): each file is written under a temporary
 * name and renamed; data first, then index, then the marker `shuffle_S_M_0.trspark-ok` holding
 * both lengths and CRC32s. The driver counts a backup only after the executor that wrote it read
 * it back ([[verify]]: the marker, the lengths and the checksums consistent), and checks it
 * again before re-pointing a lost output to it: a backup damaged or removed since is treated as
 * missing, and the output is recomputed. That second check re-reads the data only if the data
 * file was written anew since the first.
 */
class RemoteBackups(root: String, appId: String, hadoopConf: Configuration) {
  // Every path below is built from this id and numbers: an id such as ".." would put backups,
  // and the recursive delete at the application's end, outside the root.
  require(RemoteBackups.isAppId(appId), s"trspark: application id '$appId' cannot name a backup directory; " +
    "allowed: letters, digits, '.', '_' and '-', not starting with '.'")
  private val base = new Path(root)
  lazy val fs: FileSystem = FileSystem.get(base.toUri, hadoopConf)

  def appDir: Path = new Path(base, appId)

  private def place(shuffleId: Int, name: String): Path =
    new Path(base, s"$appId/$shuffleId/${JavaUtils.nonNegativeHash(name)}/$name")

  def indexPath(shuffleId: Int, mapId: Long): Path =
    place(shuffleId, ShuffleIndexBlockId(shuffleId, mapId, NOOP_REDUCE_ID).name)
  def dataPath(shuffleId: Int, mapId: Long): Path =
    place(shuffleId, ShuffleDataBlockId(shuffleId, mapId, NOOP_REDUCE_ID).name)
  def markerPath(shuffleId: Int, mapId: Long): Path =
    place(shuffleId, s"shuffle_${shuffleId}_${mapId}_$NOOP_REDUCE_ID.trspark-ok")

  /**
   * Copy one map output's local files here; returns (bytes, indexCrc, dataCrc).
   *
   * @param throttle bytes/s cap for this copy (0 = unlimited); stands for a slow blob store.
   * @param cancelled polled between chunks: abandon the copy (temporary files are deleted).
   */
  def write(shuffleId: Int, mapId: Long, index: File, data: File, throttle: Double,
      cancelled: () => Boolean): (Long, Long, Long) = {
    val (dataLen, dataCrc) = copy(data, dataPath(shuffleId, mapId), throttle, cancelled)
    val (indexLen, indexCrc) = copy(index, indexPath(shuffleId, mapId), throttle, cancelled)
    val marker = s"index=$indexLen data=$dataLen indexCrc=$indexCrc dataCrc=$dataCrc\n"
    commit(markerPath(shuffleId, mapId)) { out => out.write(marker.getBytes(StandardCharsets.UTF_8)) }
    (indexLen + dataLen, indexCrc, dataCrc)
  }

  /** [[write]] of the files at two local paths, never cancelled; the bytes written (for tools and tests). */
  def writeFiles(shuffleId: Int, mapId: Long, index: String, data: String): Long =
    write(shuffleId, mapId, new File(index), new File(data), 0.0, () => false)._1

  /** Write `target` via a temporary sibling and a rename, so `target` is complete or absent. */
  private def commit[T](target: Path)(body: OutputStream => T): T = {
    val tmp = new Path(target.getParent, s".${target.getName}.${UUID.randomUUID()}.trspark-tmp")
    val result = try {
      val out = fs.create(tmp, true)
      try body(out) finally out.close()
    } catch {
      case e: Throwable =>
        Try(fs.delete(tmp, false))
        throw e
    }
    fs.delete(target, false)
    if (!fs.rename(tmp, target)) {
      Try(fs.delete(tmp, false))
      throw new java.io.IOException(s"could not rename $tmp to $target")
    }
    result
  }

  private def copy(file: File, target: Path, throttle: Double, cancelled: () => Boolean): (Long, Long) =
    commit(target) { written =>
      val out = if (target.getName.endsWith(".data")) RemoteBackups.damagedForTests(written) else written
      // A map output whose partitions are all empty may have no data file: back up an empty one.
      val in: InputStream =
        if (!file.exists()) InputStream.nullInputStream()
        else RemoteBackups.openSource(new FileInputStream(file))
      try RemoteBackups.pump(in, out, throttle, cancelled) finally in.close()
    }

  /**
   * What is wrong with the committed backup, if anything: `missing` (the marker or a file is
   * absent), `truncated` (a file's length differs from the marker's), `corrupt` (unreadable -- a
   * checksumming file system refuses damaged bytes -- or a CRC32 differs from the marker's or from
   * the one computed when the copy was written).
   *
   * @param checkedData the data file's [[Stamp]] when its bytes were last found intact: a data
   *   file that still has it is not read again (a blob store's file changes only by being written
   *   anew, which gives it a new modification time). Its length is still checked.
   */
  def problem(shuffleId: Int, mapId: Long, indexCrc: Long, dataCrc: Long,
      checkedData: Option[Stamp] = None): Option[String] = {
    val fields = Try {
      val marker = fs.open(markerPath(shuffleId, mapId))
      val text = try new String(marker.readAllBytes(), StandardCharsets.UTF_8) finally marker.close()
      text.trim.split(" ").map(_.split("=", 2)).collect { case Array(k, v) => k -> v.toLong }.toMap
    }.toOption
    val files = Seq((indexPath(shuffleId, mapId), "index", "indexCrc", indexCrc, None),
      (dataPath(shuffleId, mapId), "data", "dataCrc", dataCrc, checkedData))
    def check(path: Path, marker: Map[String, Long], len: String, crc: String, expected: Long,
        checked: Option[Stamp]): Option[String] =
      Try(fs.getFileStatus(path)).toOption match {
        case None => Some("missing")
        case Some(status) if status.getLen != marker(len) => Some("truncated")
        case Some(status) if checked.contains(Stamp(status)) => None
        case _ => Try {
          val in = fs.open(path)
          try RemoteBackups.pump(in, OutputStream.nullOutputStream(), 0, () => false) finally in.close()
        }.toOption match {
          case Some((n, c)) if n == marker(len) && c == marker(crc) && c == expected => None
          case _ => Some("corrupt")
        }
      }
    fields match {
      case Some(f) if files.forall { case (_, len, crc, _, _) => f.contains(len) && f.contains(crc) } =>
        files.iterator.map { case (path, len, crc, expected, checked) => check(path, f, len, crc, expected, checked) }
          .collectFirst { case Some(p) => p }
      case _ => Some("missing")
    }
  }

  /**
   * Read a backup just written back against the CRC32s its writer computed: its data file's
   * [[Stamp]] when intact, else the problem (the copy is then deleted). The writer reads it, not
   * the driver: every executor checks its own copies side by side, where one driver thread
   * would download all of them.
   */
  def verify(shuffleId: Int, mapId: Long, indexCrc: Long, dataCrc: Long): Either[String, Option[Stamp]] = {
    // Taken before the re-read: a file written anew meanwhile gets another stamp, and is read again at a loss.
    val stamp = dataStamp(shuffleId, mapId)
    problem(shuffleId, mapId, indexCrc, dataCrc) match {
      case None => Right(stamp)
      case Some(p) =>
        delete(shuffleId, mapId)
        Left(p)
    }
  }

  /** The data file's [[Stamp]] now, if it can be read. */
  def dataStamp(shuffleId: Int, mapId: Long): Option[Stamp] =
    Try(Stamp(fs.getFileStatus(dataPath(shuffleId, mapId)))).toOption

  def delete(shuffleId: Int, mapId: Long): Unit = Seq(markerPath(shuffleId, mapId),
    indexPath(shuffleId, mapId), dataPath(shuffleId, mapId)).foreach(p => Try(fs.delete(p, false)))

  /** Every copy of one shuffle, with any temporary file a cancelled copy left behind. */
  def deleteShuffle(shuffleId: Int): Unit = Try(fs.delete(new Path(appDir, shuffleId.toString), true))

  def deleteApp(): Unit = Try(fs.delete(appDir, true))
}

/** A file's length (bytes) and modification time (ms since the epoch): it changes when the file is written anew. */
final case class Stamp(length: Long, modified: Long)

object Stamp {
  def apply(status: FileStatus): Stamp = Stamp(status.getLen, status.getModificationTime)
}

object RemoteBackups {
  class Cancelled extends RuntimeException("backup cancelled")

  /**
   * The executor no longer holds the map output it was to copy. Its own type, because a
   * `FileNotFoundException` may also come from the store (a directory removed under a copy), and
   * the two mean opposite things: the output is gone, or only its copy failed.
   */
  class SourceMissing(message: String) extends java.io.IOException(message)

  /** A copy written whole but read back damaged ([[RemoteBackups.verify]]'s problem); it is deleted. */
  class Rejected(val problem: String) extends java.io.IOException(s"remote copy failed verification ($problem)")

  /** Opens this executor's own map output file, its absence reported as [[SourceMissing]]. */
  def openSource(open: => InputStream): InputStream =
    try open catch {
      case e: java.io.FileNotFoundException => throw new SourceMissing(s"map output file gone: $e")
    }

  /**
   * Test-only system property naming a file: while that file exists, every data file this
   * executor writes to the store has one byte flipped on its way, as by a faulty network or store.
   */
  val CorruptRemoteCopyWhileProperty = "trspark.test.corruptRemoteCopyWhile"

  def damagedForTests(out: OutputStream): OutputStream =
    Option(System.getProperty(CorruptRemoteCopyWhileProperty)).filter(new File(_).exists()).fold(out) { _ =>
      new java.io.FilterOutputStream(out) {
        private var flipped = false
        // A copy of the chunk is damaged: the caller computes its CRC32 from its own buffer.
        override def write(b: Array[Byte], off: Int, len: Int): Unit =
          if (flipped || len == 0) out.write(b, off, len)
          else {
            val chunk = java.util.Arrays.copyOfRange(b, off, off + len)
            chunk(len / 2) = (chunk(len / 2) ^ 0x5a).toByte
            flipped = true
            out.write(chunk)
          }
      }
    }

  private val AppId = "[A-Za-z0-9][A-Za-z0-9._-]{0,254}".r

  /** True for an application id usable as one path component (`trspark gc` applies the same rule). */
  def isAppId(id: String): Boolean = id != null && AppId.matches(id)

  /** Copy `in` to `out` in 1 MiB chunks; returns (bytes, CRC32). Sleeps to stay under `throttle` B/s. */
  def pump(in: InputStream, out: OutputStream, throttle: Double, cancelled: () => Boolean): (Long, Long) = {
    val crc = new CRC32
    val buffer = new Array[Byte](1 << 20)
    val started = System.nanoTime()
    var total = 0L
    var n = in.read(buffer)
    while (n >= 0) {
      if (cancelled()) throw new Cancelled
      out.write(buffer, 0, n)
      crc.update(buffer, 0, n)
      total += n
      if (throttle > 0) {
        val aheadMs = (total / throttle * 1000 - (System.nanoTime() - started) / 1e6).toLong
        if (aheadMs > 0) Thread.sleep(aheadMs)
      }
      n = in.read(buffer)
    }
    (total, crc.getValue)
  }
}
