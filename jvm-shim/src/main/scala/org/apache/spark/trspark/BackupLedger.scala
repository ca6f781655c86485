package org.apache.spark.trspark

import scala.collection.mutable

/** One map output the driver knows of, and where its copies are. */
final class OutputRecord(val shuffleId: Int, val mapIndex: Int, val mapId: Long, val source: String,
    val bytes: Long) {
  /** Remote copy state: none, running, done (verified). */
  var remote: CopyState = CopyState.None
  var remoteCrcs: (Long, Long) = (0L, 0L)
  /** The remote data file's stamp when it was last read intact, by its writer (None: read it again at a loss). */
  var remoteChecked: Option[Stamp] = None
  /** Peer executor id -> state of the copy in its block manager. */
  val peers: mutable.Map[String, CopyState] = mutable.Map.empty
  /**
   * Spark counts the source's files of this output lost, though the source lives: a reducer
   * failed to fetch from it, and Spark then drops every output there. Readers are not sent back to it.
   */
  var sourceLost: Boolean = false

  def hasCopy: Boolean = remote == CopyState.Done || peers.values.exists(_ == CopyState.Done)
  def busy: Boolean = remote == CopyState.Running || peers.values.exists(_ == CopyState.Running)
  override def toString: String = s"shuffle $shuffleId map $mapIndex (id $mapId on $source)"
}

sealed trait CopyState
object CopyState {
  case object None extends CopyState
  case object Running extends CopyState
  case object Done extends CopyState
}

/**
 * The driver's book of map outputs and their backups, keyed by (shuffleId, mapIndex). Only
 * the newest output of a map index is kept: a re-run replaces the record (its stale copies are
 * returned so the caller can delete them). Not thread-safe: the driver plugin locks around it.
 */
final class BackupLedger {
  private val outputs = mutable.HashMap.empty[(Int, Int), OutputRecord]

  def get(shuffleId: Int, mapIndex: Int): Option[OutputRecord] = outputs.get((shuffleId, mapIndex))

  def byMapId(shuffleId: Int, mapId: Long): Option[OutputRecord] =
    outputs.valuesIterator.find(o => o.shuffleId == shuffleId && o.mapId == mapId)

  /** Record a new output; returns the record it replaced, if that one was a different map attempt. */
  def add(record: OutputRecord): Option[OutputRecord] = {
    val old = outputs.put((record.shuffleId, record.mapIndex), record)
    old.filter(_.mapId != record.mapId)
  }

  def remove(shuffleId: Int, mapIndex: Int): Option[OutputRecord] = outputs.remove((shuffleId, mapIndex))

  /** Forget every output of `shuffleId`; returns them. */
  def removeShuffle(shuffleId: Int): Seq[OutputRecord] = {
    val gone = outputs.values.filter(_.shuffleId == shuffleId).toSeq
    gone.foreach(o => outputs.remove((o.shuffleId, o.mapIndex)))
    gone
  }

  /** Outputs written by, or with a copy on, `executorId`. */
  def touching(executorId: String): Seq[OutputRecord] =
    outputs.values.filter(o => o.source == executorId || o.peers.contains(executorId)).toSeq

  def all: Seq[OutputRecord] = outputs.values.toSeq
  def ofShuffle(shuffleId: Int): Seq[OutputRecord] = outputs.values.filter(_.shuffleId == shuffleId).toSeq
}
