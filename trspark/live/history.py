"""Executor lifetime history: record what we observe, fit the next application's model from it.

Every application records each executor's lifetime -- *observed* when the executor was evicted,
*right-censored* when it was still alive (or removed for another reason) at the end -- to a
history store on any fsspec URL (a local path, ``file://``, ``abfs://container/prefix`` on Azure
Blob through adlfs, ...). The next application of the same pool fits its lifetime model from
that history (:func:`fit_lifetime`).

Layout (append-only; object stores cannot append, so each flush writes one new object)::

    <url>/<pool>/<app_id>/part-<seq:06d>-<token>.jsonl

one JSON object per line: ``{"pool", "app_id", "executor_id", "duration", "observed"}``
(``duration`` in seconds). Readers take the union of all parts, so concurrent applications never
collide. Many parts are merged into one under ``<url>/<pool>/_compacted/`` by
:mod:`trspark.live.history_compaction`, which writes the merged part before it deletes any.

The application's records are written by :mod:`trspark.live.recorder`. When the store cannot be
reached at run time the recorder keeps the records in memory, warns once, and retries on the next
flush; start-up validation (:func:`check_url`) fails fast instead.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import fsspec
import numpy as np

from cost_model.lifetimes import LifetimeModel, from_spec
from trspark.setting_parsers import is_pool_name

log = logging.getLogger(__name__)

#: Listings of a pool's parts a load tries while compactions merge parts under it.
LOAD_ATTEMPTS = 3
#: Fewer observed evictions than this: keep the configured model (too little evidence).
MIN_EVENTS_PARAMETRIC = 5
#: At least this many observed evictions: Kaplan--Meier (no shape assumed) instead of Weibull.
MIN_EVENTS_NONPARAMETRIC = 30


@dataclass(frozen=True)
class LifetimeRecord:
    pool: str
    app_id: str
    executor_id: str
    duration: float
    """Seconds from the executor's start to its eviction (observed) or to the end of observation."""
    observed: bool
    """True = evicted (an event); False = right-censored (still alive / removed for another reason)."""


class HistoryError(RuntimeError):
    """The history store URL cannot be used."""


def store_fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem of a store URL and the store's root path on it."""
    if url.startswith(("abfs://", "az://")) and "AZURE_STORAGE_CONNECTION_STRING" in os.environ:
        fs = fsspec.filesystem("abfs", connection_string=os.environ["AZURE_STORAGE_CONNECTION_STRING"])
        return fs, url.split("://", 1)[1].rstrip("/")
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/")


def check_url(url: str) -> None:
    """Fail fast (``HistoryError`` naming the key) if ``spark.trspark.history.url`` is unusable."""
    try:
        fs, root = store_fs(url)
        if _is_local(fs) and not fs.exists(root):
            # Checking a setting makes no folder: the first record written makes it.
            _check_local_folder_can_be_made(root)
            return
        # Object stores have no real folders: prove we can write, list and delete one probe object.
        probe = f"{root}/_probe-{uuid.uuid4().hex}"
        fs.makedirs(root, exist_ok=True)
        fs.pipe(probe, b"")
        fs.ls(root)
        fs.rm(probe)
    except Exception as exc:  # any backend error means the same thing to the user
        raise HistoryError(
            f"spark.trspark.history.url={url!r} is not reachable: {type(exc).__name__}: {exc}; "
            "allowed: an fsspec URL the driver can list and write (local path, file://, abfs://container/prefix)"
        ) from exc


def _is_local(fs: fsspec.AbstractFileSystem) -> bool:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return "file" in protocols or "local" in protocols


def _check_local_folder_can_be_made(root: str) -> None:
    """Raise ``OSError`` unless a folder can be made in the nearest existing folder above ``root``.

    Proven by making one and removing it: permission bits say nothing to root, or in ``/proc``.
    """
    ancestor = os.path.dirname(os.path.abspath(root))
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise NotADirectoryError(f"{ancestor!r} is not a folder")
    os.rmdir(tempfile.mkdtemp(prefix="_probe-", dir=ancestor))


class HistoryStore:
    """Append-only lifetime records under one URL, partitioned by pool and application."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._token = uuid.uuid4().hex[:8]
        self._seq = 0

    def append(self, records: Sequence[LifetimeRecord]) -> None:
        """Write ``records`` as one new part object (raises on any store error; nothing partial is read)."""
        if not records:
            return
        fs, root = store_fs(self.url)
        pool, app_id = records[0].pool, records[0].app_id
        self.write_part(fs, f"{root}/{folder_name(pool)}/{folder_name(app_id)}", records)

    def write_part(self, fs: fsspec.AbstractFileSystem, folder: str, records: Iterable[LifetimeRecord]) -> None:
        """``records`` as one new part under ``folder``: written under a temporary name, then moved,
        so that a reader never sees a half-written part (raises on any store error)."""
        fs.makedirs(folder, exist_ok=True)
        name = self.next_part_name()
        tmp, part = f"{folder}/_tmp-{name}", f"{folder}/{name}"
        with fs.open(tmp, "w") as fh:
            fh.write("".join(json.dumps(asdict(r), separators=(",", ":")) + "\n" for r in records))
        try:
            fs.mv(tmp, part)
        except Exception:
            # An object store moves by copy, then delete: if only the delete failed the part is in
            # place, and raising would have its records written twice.
            if not fs.exists(part):
                raise

    def next_part_name(self) -> str:
        """A part's name no other writer uses: this store's sequence number and a random token."""
        self._seq += 1
        return f"part-{self._seq:06d}-{self._token}.jsonl"

    def pools(self) -> list[str]:
        """The pools with records in the store (their folder names), sorted."""
        fs, root = store_fs(self.url)
        if not fs.isdir(root):
            return []
        return sorted(path.rstrip("/").rsplit("/", 1)[-1] for path in fs.ls(root, detail=False) if fs.isdir(path))

    def load(self, pool: str) -> list[LifetimeRecord]:
        """All records of ``pool`` (every application, every part), each exact duplicate once.

        Duplicates come from a compaction cut short or two at once
        (:mod:`trspark.live.history_compaction`); two real lifetimes never match in every field.
        """
        fs, root = store_fs(self.url)
        if fs.exists(root) and not fs.isdir(root):
            # Something else sits where the store should be: unusable, not empty.
            raise NotADirectoryError(f"{self.url} is not a folder of lifetime records")
        folder = f"{root}/{folder_name(pool)}"
        if not fs.exists(folder):
            return []
        for attempt in range(1, LOAD_ATTEMPTS + 1):
            try:
                out, unreadable = read_parts(fs, sorted(p for p in fs.find(folder) if is_part(p)))
                break
            except FileNotFoundError:
                # A compaction merged a listed part before it was read; its merged part is in place
                # before any part goes, so a new listing finds every record.
                if attempt == LOAD_ATTEMPTS:
                    raise
        if unreadable:  # one damaged line must not cost the pool its whole history
            log.warning("lifetime history %s: %d record(s) of pool %r unreadable, skipped", self.url, unreadable, pool)
        return out


def read_parts(fs: fsspec.AbstractFileSystem, paths: Iterable[str], *,
               gone: list[str] | None = None) -> tuple[list[LifetimeRecord], int]:
    """The records of the parts at ``paths``, each exact duplicate once, and the unreadable lines.

    A part that no longer exists raises ``FileNotFoundError``, or with ``gone`` is added to it.
    """
    out: dict[LifetimeRecord, None] = {}  # ordered, one of each
    unreadable = 0
    for path in paths:
        try:
            records, bad = read_part(fs, path)
        except FileNotFoundError:
            if gone is None:
                raise
            gone.append(path)
            continue
        out.update(dict.fromkeys(records))
        unreadable += bad
    return list(out), unreadable


def is_part(path: str) -> bool:
    """Whether ``path`` names a written part (not a temporary one, not another file)."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("part-") and name.endswith(".jsonl")


def read_part(fs: fsspec.AbstractFileSystem, path: str) -> tuple[list[LifetimeRecord], int]:
    """The records of one part, and how many of its lines are no record."""
    records, unreadable = [], 0
    with fs.open(path, "rb") as fh:  # bytes: a line that is not UTF-8 is one unreadable record
        for line in fh:
            if line.strip():
                record = _parse_record(line)
                records += [record] if record is not None else []
                unreadable += record is None
    return records, unreadable


def _parse_record(line: bytes) -> LifetimeRecord | None:
    """One line of a part, or None if it is no record. Fields a newer trspark may add are ignored."""
    try:
        data = json.loads(line)  # UnicodeDecodeError, for bytes that are not UTF-8, is a ValueError
        record = LifetimeRecord(**{name: data[name] for name in LifetimeRecord.__dataclass_fields__})
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    duration = record.duration
    valid = (isinstance(record.pool, str) and isinstance(record.app_id, str) and isinstance(record.executor_id, str)
             and isinstance(record.observed, bool) and isinstance(duration, (int, float))
             and not isinstance(duration, bool) and math.isfinite(duration) and duration >= 0)
    return record if valid else None


def folder_name(name: str) -> str:
    """``name`` as one path component: other characters become ``_``, and so does a leading dot
    (``..`` would climb out of the store's root)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return "_" + safe[1:] if safe.startswith(".") else safe or "_"


@dataclass(frozen=True)
class FitResult:
    model: LifetimeModel
    method: str
    """``configured`` (too few events), ``weibull`` (censored MLE) or ``kaplan-meier``."""
    events: int
    censored: int


def fit_lifetime(records: Iterable[LifetimeRecord], configured: str | LifetimeModel) -> FitResult:
    """Choose and fit the lifetime model for the next application.

    The rule (documented in the README):

    * fewer than ``MIN_EVENTS_PARAMETRIC`` (5) observed evictions: the configured model;
    * 5 to 29 evictions: a Weibull fitted by maximum likelihood with right-censoring
      (``scipy.stats.weibull_min.fit`` on ``CensoredData``, location fixed at 0) -- two
      parameters are as much as a small sample supports, and Weibull contains the exponential;
    * 30 or more: Kaplan--Meier (``cost_model.lifetimes.Empirical``), which assumes no shape.
    """
    recs = list(records)
    base = from_spec(configured) if isinstance(configured, str) else configured
    durations = np.array([max(r.duration, 1e-9) for r in recs], dtype=float)
    observed = np.array([r.observed for r in recs], dtype=bool)
    events = int(observed.sum())
    censored = len(recs) - events
    if events < MIN_EVENTS_PARAMETRIC:
        return FitResult(base, "configured", events, censored)
    if events >= MIN_EVENTS_NONPARAMETRIC:
        from cost_model.lifetimes import Empirical

        return FitResult(Empirical.fit(durations, observed), "kaplan-meier", events, censored)
    from scipy import stats  # imported here: only a fit from history needs scipy.stats

    from cost_model.lifetimes import Weibull

    data = stats.CensoredData(uncensored=durations[observed], right=durations[~observed])
    shape, _, scale = stats.weibull_min.fit(data, floc=0)
    return FitResult(Weibull(shape=float(shape), scale=float(scale)), "weibull", events, censored)


class Prior(NamedTuple):
    """The lifetime spec an application starts from, a one-line account of the choice, and whether the store answered."""

    spec: str
    account: str
    reachable: bool = True


class OtherPools(NamedTuple):
    """``(pool, fitted spec)`` of the pools :func:`priors_of_other_pools` fitted, one account per pool, and
    whether the store answered."""

    fitted: list[tuple[str, str]]
    accounts: list[str]
    reachable: bool = True


def priors_of_other_pools(url: str, known: Collection[str], configured: str) -> OtherPools:
    """``(pool, fitted spec)`` for each pool in the store but ``known`` whose records support a fit, and accounts.

    Executors record under the pool they report (``TRSPARK_POOL``, instance metadata) even when
    no ``spark.trspark.pool.<name>.lifetime`` names it; such a pool gets a model of its own once
    its history holds enough evictions (:func:`fit_lifetime`), else it keeps ``configured``, the shared model.
    """
    try:
        store, known_folders = HistoryStore(url), {folder_name(pool) for pool in known}
        found = [(name, store.load(name)) for name in store.pools() if name not in known_folders]
    except Exception as exc:  # the store is optional at run time
        return OtherPools([], [f"lifetime history {url} unreachable ({type(exc).__name__}: {exc}); "
                               f"other pools use {configured}"], reachable=False)
    fitted, accounts = [], []
    for folder, records in found:
        pool = records[0].pool if records else folder
        fit = _fitted(records, configured, pool)
        if fit is None:
            continue
        accounts.append(_account(pool, len(records), fit))
        if fit.method != "configured" and is_pool_name(pool):
            fitted.append((pool, fit.model.spec()))
    return OtherPools(fitted, accounts)


def prior_from_history(url: str, pool: str, configured: str) -> Prior:
    """The lifetime spec the next application starts from, and a one-line account of the choice.

    An unreachable store at run time degrades to ``configured`` (the caller logs the account as
    a warning); nothing is written here.
    """
    try:
        records = HistoryStore(url).load(pool)
    except Exception as exc:  # the store is optional at run time
        return Prior(configured, f"lifetime history {url} unreachable ({type(exc).__name__}: {exc}); using {configured}",
                     reachable=False)
    fit = _fitted(records, configured, pool)
    if fit is None:
        return Prior(configured, f"lifetime model for pool {pool!r}: the configured {configured}")
    return Prior(fit.model.spec(), _account(pool, len(records), fit))


def _fitted(records: list[LifetimeRecord], configured: str, pool: str) -> FitResult | None:
    """:func:`fit_lifetime`, or None with a warning: records no model fits (a damaged store) must
    leave the configured model, not stop the engine of every later application of the pool."""
    try:
        return fit_lifetime(records, configured)
    except Exception as exc:  # an overflowing scale, a fit that does not converge
        log.warning("lifetime history of pool %r: %d record(s) cannot be fitted (%s: %s); using %s",
                    pool, len(records), type(exc).__name__, exc, configured)
        return None


def _account(pool: str, records: int, fit: FitResult) -> str:
    """One line saying which model ``pool`` starts from and why."""
    return (f"lifetime model for pool {pool!r} from {records} record(s) ({fit.events} evictions, "
            f"{fit.censored} censored): {fit.method} -> {fit.model.spec()[:120]}")
