"""Compaction of the lifetime history: many small parts of a pool merged into one.

Each loss of an executor writes one part (:class:`~trspark.live.history.HistoryStore`), and the
engine reads every part of every pool before it starts. On an object store each part costs a
request, so a pool with thousands of parts could hold the engine past
``spark.trspark.engine.startTimeout`` and leave every later application on always-checkpoint.
No store library merges objects, hence this module.

A compaction reads the parts of one pool outside the running application's own folder, writes
their records as one part under ``<url>/<pool>/_compacted/`` (under a temporary name, then
moved), and only then deletes the parts it read. A part written meanwhile is not among them and
stays, and a part another compaction deleted meanwhile is left to that one. Two compactions at
once, or one cut short between its write and its deletes, may leave some records twice;
:meth:`HistoryStore.load` drops exact duplicates, and the next compaction keeps one of each.
"""

from __future__ import annotations

import logging
import threading

from trspark.live.history import HistoryStore, folder_name, is_part, read_parts, store_fs

log = logging.getLogger("trspark.live.history")

#: A pool is compacted once it has at least this many parts outside the running application.
COMPACT_AT_PARTS = 64

#: Folder (one per pool) that holds the merged parts; no application id is spelt so.
COMPACTED_FOLDER = "_compacted"


def compact_pool(store: HistoryStore, pool_folder: str, keep_app: str, *, at_parts: int | None = None) -> int:
    """Merge the parts of ``pool_folder`` outside application ``keep_app``'s folder into one; returns the parts merged (0: none).

    Nothing is merged below ``at_parts`` parts (:data:`COMPACT_AT_PARTS`). Raises on a store error before the merged part is
    in place (nothing deleted then); a delete that fails afterwards is logged and left for later.
    """
    fs, root = store_fs(store.url)
    folder = f"{root}/{pool_folder}"
    own = f"{folder}/{folder_name(keep_app)}/"  # the running application still writes there
    parts = sorted(p for p in fs.find(folder) if is_part(p) and not p.startswith(own))
    if len(parts) < (COMPACT_AT_PARTS if at_parts is None else at_parts):
        return 0
    gone: list[str] = []  # another compaction took them first: its merged part holds their records
    records, _ = read_parts(fs, parts, gone=gone)
    missing = set(gone)
    read = [path for path in parts if path not in missing]
    if not read:
        return 0
    store.write_part(fs, f"{folder}/{COMPACTED_FOLDER}", records)
    for path in read:
        try:
            fs.rm(path)
        except FileNotFoundError:
            pass  # another compaction took it first
        except Exception as exc:  # left for the next compaction; its records are read once
            log.debug("lifetime history: part %s not deleted after compaction: %s", path, exc)
    return len(read)


def compact_history(store: HistoryStore, keep_app: str, *, at_parts: int | None = None) -> None:
    """:func:`compact_pool` for every pool of the store; a store error is logged, never raised."""
    try:
        for pool_folder in store.pools():
            merged = compact_pool(store, pool_folder, keep_app, at_parts=at_parts)
            if merged:
                log.info("lifetime history %s: %d part(s) of pool %r merged into one", store.url, merged, pool_folder)
    except Exception as exc:  # the store is optional at run time; the next application tries again
        log.warning("lifetime history %s: compaction stopped (%s: %s)", store.url, type(exc).__name__, exc)


def compact_in_background(store: HistoryStore, keep_app: str) -> threading.Thread:
    """:func:`compact_history` on a daemon thread: the engine does not wait for the store."""
    thread = threading.Thread(target=compact_history, args=(store, keep_app), name="trspark-history-compaction",
                              daemon=True)
    thread.start()
    return thread
