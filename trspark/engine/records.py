"""The tables of one application's state and the questions the policies ask of them.

:class:`JobRecords` holds executors, stages, map outputs and the job graph;
:class:`~trspark.engine.state.JobState` adds the event handlers that change them.
"""

from __future__ import annotations

from collections.abc import Collection, ItemsView, Iterator

from cost_model.lineage import Lineage
from trspark.engine.events import REMOTE
from trspark.engine.views import BlockId, ExecutorView, LifetimeOf, MapOutput, PlannedStage, StageView

_NO_OUTPUTS: dict[BlockId, MapOutput] = {}
"""The outputs of a shuffle without any (never changed)."""


class JobRecords:
    """Executors, stages and map outputs of one application, and the read-only questions on them.

    Parameters
    ----------
    default_task_seconds : float
        Task run time assumed for a stage before any of its tasks finished (s).
    lineage : Lineage, optional
        The cost model's lineage to feed (the policies that price blocks give one).
    lifetime_of : callable, optional
        The lifetime law of an executor (required with ``lineage``).
    """

    def __init__(self, default_task_seconds: float = 1.0, *, lineage: Lineage | None = None,
                 lifetime_of: LifetimeOf | None = None) -> None:
        if (lineage is None) != (lifetime_of is None):
            raise ValueError("JobState: give both 'lineage' and 'lifetime_of', or neither")
        self.lineage = lineage
        self._lifetime_of = lifetime_of
        self.default_task_seconds = default_task_seconds
        self.now = 0.0
        self.executors: dict[str, ExecutorView] = {}
        """The alive executors. A lost one is dropped (its lifetime stays in ``lifetimes``): a
        long application with spot churn sees thousands come and go."""
        self.stages: dict[int, StageView] = {}
        self.outputs: dict[BlockId, MapOutput] = {}
        self.shuffle_stage: dict[int, int] = {}
        """shuffle id -> the stage that writes it."""
        self.shuffle_readers: dict[int, set[int]] = {}
        """shuffle id -> stages that read it."""
        self.consumed_shuffles: set[int] = set()
        self.open_shuffles: set[int] = set()
        """Shuffles of a running SQL query: a later query stage may still read them, until the
        driver reports them consumed (at the query's end)."""
        self._readers_done: set[int] = set()
        """Shuffles a driver said were consumed (their readers finished) while a reader's own
        output is still needed: consumed once it is (see :meth:`_shuffle_consumed`)."""
        self.consumed_now: list[int] = []
        """The shuffles the last event consumed (a ``ShuffleConsumed`` may consume none, or its
        own shuffle and the parents that waited on it)."""
        self.planned: dict[int, PlannedStage] = {}
        """stage id -> the stage as the job's graph announced it (``JobSubmitted``)."""
        self.planned_readers: dict[int, set[int]] = {}
        """shuffle id -> stages of a submitted job's graph that read it (submitted or not yet)."""
        self.job_stages: dict[int, tuple[int, ...]] = {}
        """job id -> the stage ids of its graph, from ``JobSubmitted`` until its ``JobEnded``."""
        self._retiring: set[int] = set()
        """Shuffles consumed by the previous event: retired when the next event arrives."""
        self._tasks_done = 0
        self._task_seconds_done = 0.0
        """Finished tasks and their run time over the whole application (retired stages too)."""
        self._warm_tasks_done = 0
        self._warm_seconds_done = 0.0
        """The same, without the first task of each executor JVM (see :meth:`mean_warm_task_seconds`)."""
        self._alive_cores = 0
        self.safe_holders: set[str] = set()
        """Alive executors never evicted under their lifetime law (``stable``, no notice): a
        copy there is as safe as one on remote storage."""
        self.with_deadline: set[str] = set()
        """Alive executors whose death time is known (an ``ExecutorNotice`` with a deadline)."""
        self.notices_expired_now: list[str] = []
        """Executors whose termination notice expired at the current event (they outlived it)."""
        self._held: dict[str, set[BlockId]] = {}
        """executor -> outputs it holds a copy of (as writer or peer backup): O(own) eviction."""
        self._by_shuffle: dict[int, dict[BlockId, MapOutput]] = {}
        """shuffle -> its existing outputs (the same objects as :attr:`outputs`): O(own) per shuffle."""
        self._position: dict[BlockId, int] = {}
        """block -> rank of its key in :attr:`outputs` (insertion order; a replaced output keeps its
        key's place): sorts a few outputs into creation order without a scan of all of them."""
        self._next_position = 0
        self._naming: dict[str, set[BlockId]] = {}
        """executor -> outputs it wrote or received the newest peer copy of (``last_peer``), held or not."""
        self._unbacked: dict[int, set[BlockId]] = {}
        """shuffle -> its existing outputs without a finished backup (empty ``backups``): few, once a
        stage's outputs are copied, so counting the covered ones looks at these alone."""
        self._off_remote: set[BlockId] = set()
        """Existing unconsumed outputs without a copy on the remote store (kept exact by the state's
        handlers): a re-plan looks at these and not at every output of the job."""
        self.lifetimes: dict[str, list[tuple[float, bool]]] = {}
        """pool -> ``(lifetime seconds, observed eviction?)`` of executors that left (censored if not evicted)."""
        self.first_recompute_time: float | None = None
        self.recompute_seconds = 0.0
        """Task-seconds spent re-running map tasks whose output had been lost."""
        self.lost_work_seconds = 0.0
        """Task-seconds of running tasks killed by executor loss."""
        self.task_seconds_total = 0.0
        self.job_ended = False

    # ---- queries --------------------------------------------------------------------------
    def alive_executors(self) -> list[ExecutorView]:
        return list(self.executors.values())  # a lost executor is dropped from ``executors``

    def total_cores(self) -> int:
        """Cores of the alive executors (kept as a running count: asked on every decision)."""
        return self._alive_cores

    def active_stages(self) -> list[StageView]:
        return [s for s in self.stages.values() if s.active]

    def runnable_stages(self) -> list[StageView]:
        """Active stages with tasks waiting for a core (all their parent shuffles complete)."""
        return [s for s in self.active_stages() if s.pending_count and self._inputs_ready(s)]

    def _inputs_ready(self, stage: StageView) -> bool:
        for shuffle in stage.parent_shuffle_ids:
            writer = self.shuffle_stage.get(shuffle)
            if writer is not None and self.stages[writer].unfinished > 0:
                return False
        return True

    def live_outputs(self) -> Iterator[MapOutput]:
        """Map outputs that still exist and may still be read."""
        return (b for b in self.outputs.values() if not b.consumed)

    def outputs_on(self, executor_id: str) -> list[MapOutput]:
        """Unconsumed outputs with a copy on ``executor_id`` (in creation order)."""
        return self._in_order(self._held.get(executor_id, ()))

    def outputs_naming(self, executor_id: str) -> list[MapOutput]:
        """Unconsumed outputs ``executor_id`` wrote or received the newest peer copy of (in creation order).

        Whether it still holds them or not: an output keeps naming its writer after the writer was
        lost (``source_lost``), and the peer of its newest copy after that copy was lost.
        """
        return self._in_order(self._naming.get(executor_id, ()))

    def _in_order(self, keys: Collection[BlockId]) -> list[MapOutput]:
        """The unconsumed outputs among ``keys``, in the order of :attr:`outputs`."""
        outputs, position = self.outputs, self._position
        ordered = sorted((key for key in keys if key in outputs), key=position.__getitem__)
        return [block for block in map(outputs.__getitem__, ordered) if not block.consumed]

    def outputs_off_remote(self) -> Iterator[MapOutput]:
        """Unconsumed outputs without a copy on the remote store, newest first (the reverse order of :attr:`outputs`).

        A few among many are sorted; when they are most of the outputs, a scan newest first
        stops wherever the caller stops.
        """
        outputs, kept = self.outputs, self._off_remote
        if 4 * len(kept) >= len(outputs):
            return (b for b in reversed(outputs.values()) if b.block_id in kept)
        return reversed(self._in_order(kept))

    def shuffle_outputs(self, shuffle_id: int) -> list[MapOutput]:
        """Existing outputs of one shuffle, by map index."""
        of_shuffle = self._by_shuffle.get(shuffle_id, {})
        return [of_shuffle[k] for k in sorted(of_shuffle)]

    def unordered_outputs(self, shuffle_id: int) -> list[MapOutput]:
        """Existing outputs of one shuffle in no particular order (for counts, which need no sort)."""
        return list(self._by_shuffle.get(shuffle_id, {}).values())

    def shuffle_items(self, shuffle_id: int) -> ItemsView[BlockId, MapOutput]:
        """``(block id, output)`` of one shuffle's existing outputs, in no particular order: a live view, not a copy."""
        return self._by_shuffle.get(shuffle_id, _NO_OUTPUTS).items()

    def output_count(self, shuffle_id: int) -> int:
        """Existing outputs of one shuffle."""
        return len(self._by_shuffle.get(shuffle_id, _NO_OUTPUTS))

    def unbacked_outputs(self, shuffle_id: int) -> dict[BlockId, MapOutput]:
        """The existing outputs of one shuffle without a finished backup (none on remote storage or a peer)."""
        of_shuffle = self._by_shuffle.get(shuffle_id, _NO_OUTPUTS)
        return {key: of_shuffle[key] for key in self._unbacked.get(shuffle_id, ())}

    def holders_alive(self) -> bool:
        """Every executor holding a copy of an output is alive (a late task end of a lost one may break it)."""
        return all(e in self.executors for e in self._held)

    def writer_stage(self, shuffle_id: int) -> StageView | None:
        """The stage that writes ``shuffle_id``, if Spark submitted it and it is not retired."""
        return self.stages.get(self.shuffle_stage.get(shuffle_id, -1))

    def reader_stages(self, shuffle_id: int) -> list[StageView]:
        return [self.stages[s] for s in sorted(self.shuffle_readers.get(shuffle_id, ())) if s in self.stages]

    def unsubmitted_readers(self, shuffle_id: int) -> list[PlannedStage]:
        """Stages a job's graph says will read ``shuffle_id`` that Spark has not submitted yet."""
        # planned_readers holds only stages in self.planned: both lose a graph's stages together.
        return [self.planned[s] for s in sorted(self.planned_readers.get(shuffle_id, ())) if s not in self.stages]

    def is_safe(self, block: MapOutput) -> bool:
        """The block survives any eviction: consumed, on remote storage, or on a never-evicted executor."""
        return block.consumed or block.on_remote or self._on_safe_holder(block)

    def _on_safe_holder(self, block: MapOutput) -> bool:
        safe = self.safe_holders
        return bool(safe) and any(h in safe for h in block.holders())

    def consumers_safe(self, shuffle_id: int) -> bool:
        """Every reader of ``shuffle_id`` finished and its own outputs are safe (paper §2.3).

        Then the shuffle's blocks are no longer needed for any re-computation: lost reader
        outputs come back from their backups, not by re-running the readers. A shuffle of a
        running SQL query (:attr:`open_shuffles`) may still get readers, so it stays needed.
        """
        if shuffle_id in self.consumed_shuffles:
            return True
        readers = self.reader_stages(shuffle_id)
        if not readers or shuffle_id in self.open_shuffles:
            return False
        for stage in readers:
            if stage.unfinished > 0:
                return False
            if stage.shuffle_id is None or stage.shuffle_id in self.consumed_shuffles:
                continue  # a finished result stage, or one whose own readers are done, needs nothing more
            outputs, shuffle = self.outputs, stage.shuffle_id
            for p in range(stage.num_tasks):
                out = outputs.get((shuffle, p))
                if out is None or not (out.consumed or REMOTE in out.backups or self._on_safe_holder(out)):
                    return False  # is_safe, inlined: a hot loop
        return True

    def mean_task_seconds(self) -> float:
        """Mean run time of every successful task so far (s), retired stages included."""
        return self._task_seconds_done / self._tasks_done if self._tasks_done else self.default_task_seconds

    def mean_warm_task_seconds(self) -> float:
        """Mean run time (s) of the successful tasks that were not their executor's first one.

        A fresh JVM runs its first task several times slower (class loading, JIT, code
        generation), so its first task says little about the next ones. What a warm executor could still run before its
        deadline is judged by this mean; :meth:`mean_task_seconds` until a warm task has ended.
        """
        if not self._warm_tasks_done:
            return self.mean_task_seconds()
        return self._warm_seconds_done / self._warm_tasks_done

    # ---- the output indexes (kept by JobState's handlers) --------------------------------------
    def _placed(self, key: BlockId, writer: str, replaced: MapOutput | None) -> None:
        """A new output of ``writer`` (no backup yet) is stored under ``key``, replacing ``replaced``.

        A replaced output's key keeps its place in :attr:`outputs`; a new key takes the next.
        """
        if replaced is None:
            self._position[key] = self._next_position
            self._next_position += 1
        else:
            self._unname(replaced)
        self._name(writer, key)
        self._unbacked.setdefault(key[0], set()).add(key)
        self._off_remote.add(key)

    def _name(self, executor_id: str, key: BlockId) -> None:
        named = self._naming.get(executor_id)
        if named is None:
            named = self._naming[executor_id] = set()
        named.add(key)

    def _unname(self, block: MapOutput, *, peer_only: bool = False) -> None:
        """Take ``block`` out of :attr:`_naming` for its newest peer (and, unless ``peer_only``, its writer)."""
        key, writer, peer = block.block_id, block.executor_id, block.last_peer
        for executor_id in (peer,) if peer_only else (writer, peer):
            if executor_id is None or (peer_only and executor_id == writer):
                continue
            named = self._naming.get(executor_id)
            if named is not None:
                named.discard(key)
                if not named:
                    del self._naming[executor_id]

    def _removed(self, block: MapOutput) -> None:
        """``block`` left :attr:`outputs`: out of the indexes."""
        self._unname(block)
        del self._position[block.block_id]
        self._not_unbacked(block)
        self._off_remote.discard(block.block_id)

    def _not_unbacked(self, block: MapOutput) -> None:
        """``block`` is no longer an unbacked output: it got a finished backup, or left :attr:`outputs`."""
        unbacked = self._unbacked.get(block.shuffle_id)
        if unbacked is not None:
            unbacked.discard(block.block_id)
            if not unbacked:
                del self._unbacked[block.shuffle_id]

    def _copy_gone(self, block: MapOutput) -> None:
        """A copy of ``block`` was lost: without backups left, it is unbacked (again)."""
        if not block.backups:
            self._unbacked.setdefault(block.shuffle_id, set()).add(block.block_id)
        if not block.on_remote and not block.consumed:  # the remote copy may be the one lost
            self._off_remote.add(block.block_id)

    def _forget_copies(self, block: MapOutput) -> None:
        """No executor holds a copy of ``block`` in the index of what each one holds."""
        for holder in [block.executor_id, *block.backups]:
            self._held.get(holder, set()).discard(block.block_id)

    def _drop_output(self, block: MapOutput) -> None:
        """``block`` has no copy left: out of every index, and its partition is unfinished again."""
        self._forget_copies(block)
        self._by_shuffle.get(block.shuffle_id, {}).pop(block.block_id, None)
        del self.outputs[block.block_id]
        self._removed(block)
        stage = self.stages.get(block.stage_id)
        if stage is not None:
            stage.finished.discard(block.map_index)

    # ---- forgetting what no decision needs again ------------------------------------------
    # A long application (a notebook, a SQL server) runs thousands of jobs through one engine.
    # What no decision can need again is dropped, so memory and the per-event cost stay those of
    # the work in flight (bench/engine_long_app.py measures both).
    def _retire(self) -> None:
        """Drop the outputs of consumed shuffles, and their stages once nothing reads or runs them."""
        for shuffle in sorted(self._retiring):
            for key in self._by_shuffle.pop(shuffle, {}):
                block = self.outputs.pop(key, None)
                if block is not None:
                    self._forget_copies(block)
                    self._removed(block)
            writer = self.writer_stage(shuffle)
            for stage in [*self.reader_stages(shuffle), *([writer] if writer is not None else [])]:
                self._retire_stage(stage)
        self._retiring.clear()

    def _retire_stage(self, stage: StageView) -> None:
        """Forget a stage that is over: not running, its output and every input consumed.

        ``consumers_safe`` and ``_inputs_ready`` read a missing stage as "nothing needed"; a
        later job that re-submits the stage starts a fresh view of it.
        """
        if stage.active or stage.running:
            return
        shuffles = (*stage.parent_shuffle_ids, *(() if stage.shuffle_id is None else (stage.shuffle_id,)))
        if any(s not in self.consumed_shuffles for s in shuffles):
            return
        del self.stages[stage.stage_id]
        if stage.shuffle_id is not None and self.shuffle_stage.get(stage.shuffle_id) == stage.stage_id:
            del self.shuffle_stage[stage.shuffle_id]
        for shuffle in stage.parent_shuffle_ids:
            readers = self.shuffle_readers.get(shuffle)
            if readers is not None:
                readers.discard(stage.stage_id)
                if not readers:
                    del self.shuffle_readers[shuffle]

    def _forget_job_graph(self, job_id: int) -> None:
        """An ended job's graph: its stages no longer planned unless a running job lists them too."""
        ended = self.job_stages.pop(job_id, ())
        still_listed = {s for stages in self.job_stages.values() for s in stages}
        gone = {s for s in ended if s in self.planned and s not in still_listed}
        # Through every shuffle, not the gone stages' parents: a parent may have left with an
        # earlier job (a graph that does not list a reused stage), and its readers must go too.
        for shuffle_id, readers in list(self.planned_readers.items()):
            readers -= gone
            if not readers:
                del self.planned_readers[shuffle_id]
        for stage_id in gone:
            del self.planned[stage_id]
