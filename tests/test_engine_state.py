"""JobState: the engine's view of the job, rebuilt from hand-made event sequences."""

from __future__ import annotations

import pytest
from engine_world import MB, add_executors, map_stage, run_task

from trspark.engine.events import (
    REMOTE,
    BlockBackedUp,
    BlockLost,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    JobEnded,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.state import JobState


def _state(*groups: list) -> JobState:  # type: ignore[type-arg]
    state = JobState()
    for group in groups:
        for event in group:
            state.apply(event)
    return state


def _two_stage_job() -> JobState:
    """Stage 0 (2 map tasks on a and b, shuffle 0) -> stage 1 reads shuffle 0."""
    return _state(
        add_executors(["a", "b"], time=0.0, cores=2),
        [map_stage(0, 2, 0, time=0.0)],
        run_task(0, 0, "a", start=0.0, seconds=4.0, write=10 * MB, read=30 * MB, shuffle_id=0),
        run_task(0, 1, "b", start=0.0, seconds=6.0, write=20 * MB, read=30 * MB, shuffle_id=0),
        [map_stage(1, 3, None, time=6.0, parents=[0], parent_shuffles=[0])],
    )


def test_ages_count_from_vm_start_when_known() -> None:
    state = _state(add_executors(["a"], time=10.0, vm_started=4.0))
    state.now = 30.0
    assert state.executors["a"].age(state.now) == pytest.approx(26.0)


def test_stage_stats_give_unfinished_count_and_mean_time() -> None:
    state = _two_stage_job()
    s0, s1 = state.stages[0], state.stages[1]
    assert (s0.unfinished, s0.mean_task_seconds(1.0)) == (0, pytest.approx(5.0))
    assert s0.mean_write_bytes() == pytest.approx(15 * MB)
    assert (s1.unfinished, s1.pending_count) == (3, 3)
    state.apply(TaskStarted(time=7.0, stage_id=1, partition=0, executor_id="a"))
    assert s1.pending_count == 2
    assert [s.stage_id for s in state.runnable_stages()] == [1]


def test_map_outputs_know_their_place_and_size() -> None:
    state = _two_stage_job()
    block = state.outputs[(0, 1)]
    assert (block.executor_id, block.bytes, block.seconds) == ("b", 20 * MB, 6.0)
    assert [b.block_id for b in state.outputs_on("a")] == [(0, 0)]


def test_eviction_loses_unprotected_outputs_and_reopens_their_partitions() -> None:
    state = _two_stage_job()
    state.apply(BlockBackedUp(time=7.0, shuffle_id=0, map_index=1, target=REMOTE, bytes=20 * MB))
    state.apply(ExecutorLost(time=8.0, executor_id="a"))
    state.apply(ExecutorLost(time=9.0, executor_id="b"))
    assert (0, 0) not in state.outputs
    assert state.outputs[(0, 1)].on_remote
    assert state.stages[0].finished == {1}
    assert state.lifetimes["default"] == [(8.0, True), (9.0, True)]


def test_peer_backup_outlives_its_source_but_not_its_peer() -> None:
    state = _two_stage_job()
    state.apply(BlockBackedUp(time=7.0, shuffle_id=0, map_index=0, target="b", bytes=10 * MB))
    state.apply(ExecutorLost(time=8.0, executor_id="a"))
    assert state.outputs[(0, 0)].holders() == ["b"]
    state.apply(ExecutorLost(time=9.0, executor_id="b"))
    assert (0, 0) not in state.outputs


def test_rerun_of_a_lost_output_counts_as_recomputation() -> None:
    state = _two_stage_job()
    state.apply(BlockLost(time=8.0, shuffle_id=0, map_index=0))
    for event in run_task(0, 0, "b", start=10.0, seconds=4.0, write=10 * MB, shuffle_id=0):
        state.apply(event)
    assert state.first_recompute_time == pytest.approx(10.0)
    assert state.recompute_seconds == pytest.approx(4.0)


def test_running_work_lost_with_its_executor_is_counted() -> None:
    state = _two_stage_job()
    state.apply(TaskStarted(time=7.0, stage_id=1, partition=0, executor_id="a"))
    state.apply(ExecutorLost(time=10.0, executor_id="a"))
    assert state.lost_work_seconds == pytest.approx(3.0)
    assert state.stages[1].pending_count == 3
    # Spark may report the attempt's end after the loss: it was counted when its executor went.
    state.apply(TaskEnded(time=10.5, stage_id=1, partition=0, executor_id="a", duration=3.5, successful=False,
                          reason="executor_lost"))
    assert state.lost_work_seconds == pytest.approx(3.0)


def test_consumed_shuffle_marks_blocks_safe_and_notice_sets_deadline() -> None:
    state = _two_stage_job()
    state.apply(ExecutorNotice(time=7.0, executor_id="a", deadline=37.0))
    assert state.executors["a"].notice_deadline == 37.0
    assert not state.consumers_safe(0)
    state.apply(ShuffleConsumed(time=9.0, shuffle_id=0))
    assert all(state.is_safe(b) for b in state.outputs.values())
    assert state.consumers_safe(0)


def test_consumers_safe_once_reader_outputs_are_on_remote() -> None:
    state = _state(
        add_executors(["a"], cores=1),
        [map_stage(0, 1, 0), map_stage(1, 1, 1, parents=[0], parent_shuffles=[0])],
        run_task(0, 0, "a", start=0.0, seconds=1.0, write=MB, shuffle_id=0),
        run_task(1, 0, "a", start=1.0, seconds=1.0, write=MB, shuffle_id=1),
    )
    assert not state.consumers_safe(0)
    state.apply(BlockBackedUp(time=3.0, shuffle_id=1, map_index=0, target=REMOTE, bytes=MB))
    assert state.consumers_safe(0)


def test_a_sql_querys_shuffle_stays_needed_until_the_query_ends() -> None:
    """A later query stage of the same query can read the shuffle again (a reused exchange)."""
    state = _state(
        add_executors(["a"], cores=1),
        [JobSubmitted(time=0.0, job_id=0, stage_ids=(0, 1), num_tasks=(1, 1), shuffle_ids=(0, 1),
                      parents=((), (0,)), sql_execution=7)],
        [map_stage(0, 1, 0), map_stage(1, 1, 1, parents=[0], parent_shuffles=[0])],
        run_task(0, 0, "a", start=0.0, seconds=1.0, write=MB, shuffle_id=0),
        run_task(1, 0, "a", start=1.0, seconds=1.0, write=MB, shuffle_id=1),
        [BlockBackedUp(time=3.0, shuffle_id=1, map_index=0, target=REMOTE, bytes=MB),
         StageCompleted(time=3.0, stage_id=1), JobEnded(time=3.0, job_id=0)],
    )
    assert not state.consumers_safe(0)
    state.apply(ShuffleConsumed(time=4.0, shuffle_id=0))  # the query ended
    assert state.consumers_safe(0)


def test_resubmitted_attempt_runs_only_missing_partitions() -> None:
    state = _two_stage_job()
    state.apply(StageSubmitted(time=9.0, stage_id=0, num_tasks=2, shuffle_id=0, attempt=1, pending_partitions=(0,)))
    assert state.stages[0].finished == {1}
    assert state.stages[0].attempt == 1


def test_only_evictions_count_as_observed_lifetimes() -> None:
    state = _state(add_executors(["0", "1"], time=0.0))
    state.apply(ExecutorLost(time=5.0, executor_id="0", reason="evicted"))
    state.apply(ExecutorLost(time=7.0, executor_id="1", reason="app"))
    assert state.lifetimes["default"] == [(5.0, True), (7.0, False)]


def test_a_lost_executor_leaves_only_its_lifetime_and_late_events_from_it_are_harmless() -> None:
    state = _two_stage_job()
    state.apply(TaskStarted(time=7.0, stage_id=1, partition=0, executor_id="a"))
    state.apply(ExecutorLost(time=10.0, executor_id="a", reason="evicted"))
    assert list(state.executors) == ["b"] and state.total_cores() == 2
    assert state.lifetimes["default"] == [(10.0, True)]
    # Spark reports the lost executor's task (and a stale backup to it) after the loss.
    state.apply(TaskEnded(time=10.5, stage_id=1, partition=0, executor_id="a", duration=3.5, successful=False,
                          reason="executor_lost"))
    state.apply(BlockBackedUp(time=10.6, shuffle_id=0, map_index=1, target="a", bytes=20 * MB))
    assert state.outputs[(0, 1)].holders() == ["b"] and "a" not in state.executors
    state.apply(ExecutorAdded(time=11.0, executor_id="a", host="h", cores=1))  # an id may come back
    assert state.executors["a"].alive and state.total_cores() == 3


def test_the_warm_mean_leaves_out_each_executors_first_task() -> None:
    state = _state(add_executors(["a", "b"]), [map_stage(0, 4, 0)])
    assert state.mean_warm_task_seconds() == state.mean_task_seconds() == 1.0  # nothing ended: the default
    for p, (ex, seconds) in enumerate([("a", 9.0), ("b", 7.0)]):  # two cold first tasks
        for event in run_task(0, p, ex, start=0.0, seconds=seconds, write=MB, shuffle_id=0):
            state.apply(event)
    assert state.mean_warm_task_seconds() == pytest.approx(8.0), "no warm task yet: the mean of all"
    for p, (ex, seconds) in enumerate([("a", 1.0), ("b", 2.0)], start=2):
        for event in run_task(0, p, ex, start=9.0, seconds=seconds, write=MB, shuffle_id=0):
            state.apply(event)
    assert state.mean_warm_task_seconds() == pytest.approx(1.5)
    assert state.mean_task_seconds() == pytest.approx(19.0 / 4)


def test_a_consumed_shuffle_is_retired_on_the_next_event_with_the_stages_done_with_it() -> None:
    state = _two_stage_job()
    for event in [e for p in range(3) for e in run_task(1, p, "a", start=7.0 + p, seconds=1.0)]:
        state.apply(event)
    state.apply(StageCompleted(time=10.0, stage_id=0))
    state.apply(StageCompleted(time=10.0, stage_id=1))
    mean = state.mean_task_seconds()
    state.apply(ShuffleConsumed(time=10.0, shuffle_id=0))
    # Policies handling this event still see the outputs (to drop their backups) ...
    assert [b.block_id for b in state.shuffle_outputs(0)] == [(0, 0), (0, 1)]
    state.apply(Tick(time=11.0))
    # ... the next event finds them gone, with both stages: nothing reads or runs them any more.
    assert (state.outputs, state.stages, state.outputs_on("a")) == ({}, {}, [])
    assert (state.shuffle_stage, state.shuffle_readers) == ({}, {})
    assert state.mean_task_seconds() == pytest.approx(mean) == pytest.approx((4 + 6 + 3) / 5)
    assert state.consumers_safe(0)


def test_a_shuffle_whose_readers_output_is_still_needed_waits_for_it_to_be_consumed() -> None:
    # Adaptive execution: stage 1 reads shuffle 0 and writes shuffle 1, which a later job's
    # stage 2 reads. The shim reports shuffle 0 once stage 1 ended; if shuffle 1 is lost before
    # stage 2 read it, Spark re-runs stage 1, which reads shuffle 0 again.
    state = _state(
        add_executors(["a", "b"], time=0.0, cores=2),
        [map_stage(0, 2, 0)],
        run_task(0, 0, "a", start=0.0, seconds=4.0, write=10 * MB, shuffle_id=0),
        run_task(0, 1, "b", start=0.0, seconds=6.0, write=20 * MB, shuffle_id=0),
        [StageCompleted(time=6.0, stage_id=0), map_stage(1, 1, 1, time=6.0, parents=[0], parent_shuffles=[0])],
        run_task(1, 0, "a", start=6.0, seconds=1.0, write=MB, shuffle_id=1),
        [StageCompleted(time=7.0, stage_id=1)],
    )
    state.apply(ShuffleConsumed(time=7.0, shuffle_id=0))
    assert state.consumed_now == [] and 0 not in state.consumed_shuffles
    assert not any(b.consumed for b in state.shuffle_outputs(0)) and not state.consumers_safe(0)
    state.apply(Tick(time=8.0))
    assert [b.block_id for b in state.shuffle_outputs(0)] == [(0, 0), (0, 1)], "still needed: kept"
    state.apply(ShuffleConsumed(time=9.0, shuffle_id=1))  # the later job read shuffle 1
    assert state.consumed_now == [1, 0] and state.consumed_shuffles == {0, 1}
    state.apply(Tick(time=10.0))
    assert state.consumed_now == [] and state.outputs == {}


def test_a_stage_still_reading_an_unconsumed_shuffle_is_kept() -> None:
    state = _state(
        add_executors(["a"], cores=1),
        [map_stage(0, 1, 0), map_stage(1, 1, 1), map_stage(2, 1, None, parents=[0, 1], parent_shuffles=[0, 1])],
        run_task(0, 0, "a", start=0.0, seconds=1.0, write=MB, shuffle_id=0),
        run_task(1, 0, "a", start=1.0, seconds=1.0, write=MB, shuffle_id=1),
        run_task(2, 0, "a", start=2.0, seconds=1.0),
        [StageCompleted(time=3.0, stage_id=s) for s in (0, 1, 2)],
        [ShuffleConsumed(time=3.0, shuffle_id=0), Tick(time=4.0)],
    )
    assert sorted(state.stages) == [1, 2] and list(state.outputs) == [(1, 0)]
    state.apply(ShuffleConsumed(time=5.0, shuffle_id=1))
    state.apply(Tick(time=6.0))
    assert state.stages == {} and state.outputs == {}


def test_a_late_output_of_a_consumed_shuffle_is_not_kept() -> None:
    state = _two_stage_job()
    state.apply(ShuffleConsumed(time=7.0, shuffle_id=0))
    state.apply(TaskStarted(time=7.5, stage_id=0, partition=0, executor_id="b"))  # a speculative copy, still running
    state.apply(Tick(time=8.0))
    assert 0 in state.stages and state.outputs == {}
    for event in run_task(0, 0, "b", start=7.5, seconds=1.0, write=10 * MB, shuffle_id=0)[1:]:
        state.apply(event)
    assert state.outputs == {} and state.executors["b"].running == set()


def test_an_ended_jobs_graph_is_forgotten_unless_a_running_job_shares_its_stages() -> None:
    # Job 0: stage 0 (shuffle 0) -> stage 1. Job 1 reuses stage 0 and adds stage 2 reading it.
    state = _state([
        JobSubmitted(time=0.0, job_id=0, stage_ids=(0, 1), num_tasks=(2, 1), shuffle_ids=(0, None), parents=((), (0,))),
        JobSubmitted(time=0.0, job_id=1, stage_ids=(0, 2), num_tasks=(2, 1), shuffle_ids=(0, None), parents=((), (0,))),
    ])
    assert [s.stage_id for s in state.unsubmitted_readers(0)] == [1, 2]
    state.apply(JobEnded(time=1.0, job_id=0))
    assert sorted(state.planned) == [0, 2]
    assert [s.stage_id for s in state.unsubmitted_readers(0)] == [2]
    state.apply(JobEnded(time=2.0, job_id=1))
    assert (state.planned, state.planned_readers, state.job_stages) == ({}, {}, {})
    state.apply(JobEnded(time=3.0))  # a driver that does not name the job: nothing to forget, no error


def test_a_reader_is_forgotten_although_its_writer_left_with_an_earlier_job() -> None:
    # Job 1's graph lists stage 1 reading stage 0 without listing stage 0, which job 0 owns.
    state = _state([
        JobSubmitted(time=0.0, job_id=0, stage_ids=(0,), num_tasks=(2,), shuffle_ids=(0,), parents=((),)),
        JobSubmitted(time=0.0, job_id=1, stage_ids=(1,), num_tasks=(1,), shuffle_ids=(None,), parents=((0,),)),
    ])
    state.apply(JobEnded(time=1.0, job_id=0))
    state.apply(JobEnded(time=2.0, job_id=1))
    assert (state.planned, state.planned_readers) == ({}, {})
    assert state.unsubmitted_readers(0) == []


def test_the_state_keeps_the_cost_models_lineage_in_step() -> None:
    # One model for every executor, a point mass for one with a notice: what lifetime_of says.
    from cost_model.lifetimes import Deterministic, Exponential
    from cost_model.lineage import Lineage

    prior = Exponential(mean=100.0)

    def lifetime_of(view):  # type: ignore[no-untyped-def]
        return prior if view.notice_deadline is None else Deterministic(at=view.notice_deadline - view.started)

    lineage = Lineage()
    state = JobState(lineage=lineage, lifetime_of=lifetime_of)
    for group in (
        add_executors(["a", "b", "c"], time=0.0, cores=2),
        [map_stage(0, 2, 0, time=0.0)],
        run_task(0, 0, "a", start=0.0, seconds=4.0, write=10 * MB, read=0, shuffle_id=0),
        run_task(0, 1, "b", start=0.0, seconds=6.0, write=20 * MB, read=0, shuffle_id=0),
        [map_stage(1, 1, 1, time=6.0, parents=[0], parent_shuffles=[0])],
        run_task(1, 0, "c", start=6.0, seconds=2.0, write=MB, read=30 * MB, shuffle_id=1),
    ):
        for event in group:
            state.apply(event)
    out = lineage.output(0, 1)
    assert (out.producer, out.run_time, out.size, lineage.parents(1)) == ("b", 6.0, 20 * MB, {0})
    state.apply(BlockBackedUp(time=9.0, shuffle_id=0, map_index=0, target="c", bytes=10 * MB))
    state.apply(BlockBackedUp(time=9.0, shuffle_id=0, map_index=1, target=REMOTE, bytes=20 * MB))
    assert lineage.output(0, 0).locations == {"a", "c"} and lineage.output(0, 1).remote
    state.drop_copy((0, 0), "c")  # the driver says c does not hold it after all
    assert lineage.output(0, 0).locations == {"a"}
    state.apply(ExecutorNotice(time=10.0, executor_id="a", deadline=40.0, kind="notice"))
    assert isinstance(lineage.executor("a").model, Deterministic) and lineage.executor("b").model is prior
    state.apply(ExecutorLost(time=11.0, executor_id="b", reason="evicted"))
    assert not lineage.has_executor("b") and lineage.output(0, 1).locations == set()
    state.apply(ShuffleConsumed(time=12.0, shuffle_id=0))  # stage 1's own output is still needed
    assert lineage.has_output(0, 0) and lineage.has_output(1, 0)
    state.apply(ShuffleConsumed(time=13.0, shuffle_id=1))  # now both are consumed, and forgotten
    assert not lineage.has_shuffle(0) and not lineage.has_shuffle(1)


def test_a_map_output_reported_after_its_executor_was_lost_is_no_output() -> None:
    # Spark may post a task's success after the executor's removal; the output went with the
    # executor, and Spark runs the partition again.
    state = _state(add_executors(["a", "b"], time=0.0), [map_stage(0, 2, 0, time=0.0)],
                   run_task(0, 0, "b", start=0.0, seconds=2.0, write=MB, shuffle_id=0))
    state.apply(TaskStarted(time=1.0, stage_id=0, partition=1, executor_id="a"))
    state.apply(ExecutorLost(time=3.0, executor_id="a", reason="evicted"))
    state.apply(TaskEnded(time=3.1, stage_id=0, partition=1, executor_id="a", duration=2.0, successful=True,
                          shuffle_write_bytes=MB, shuffle_id=0))
    assert list(state.outputs) == [(0, 0)]
    assert state.stages[0].finished == {0} and state.stages[0].pending_count == 1
    assert state.lost_work_seconds == pytest.approx(2.0)  # a's task, counted once, when a went


def _state_with_lineage() -> tuple[JobState, object]:
    from cost_model.lifetimes import Exponential
    from cost_model.lineage import Lineage

    lineage = Lineage()
    return JobState(lineage=lineage, lifetime_of=lambda view: Exponential(mean=100.0)), lineage


def test_a_block_lost_report_takes_every_copy_the_engine_knew_of() -> None:
    # The driver reports an output lost when no copy it can serve is left: the store's copy
    # unreadable, or a peer copy Spark would not use. The state and the lineage both follow.
    state, lineage = _state_with_lineage()
    for group in (add_executors(["a", "b"], time=0.0), [map_stage(0, 2, 0, time=0.0)],
                  run_task(0, 0, "a", start=0.0, seconds=2.0, write=MB, shuffle_id=0),
                  run_task(0, 1, "a", start=0.0, seconds=2.0, write=MB, shuffle_id=0),
                  [BlockBackedUp(time=3.0, shuffle_id=0, map_index=0, target=REMOTE, bytes=MB),
                   BlockBackedUp(time=3.0, shuffle_id=0, map_index=1, target="b", bytes=MB)]):
        for event in group:
            state.apply(event)
    state.apply(BlockLost(time=4.0, shuffle_id=0, map_index=0))
    state.apply(BlockLost(time=4.0, shuffle_id=0, map_index=1))
    assert state.outputs == {} and state.stages[0].finished == set()
    for index in (0, 1):
        out = lineage.output(0, index)  # type: ignore[attr-defined]
        assert out.locations == set() and not out.remote  # lost: charged as re-runs from now on


def test_a_consumed_shuffle_a_later_job_reads_stays_out_of_the_lineage() -> None:
    # Iterative jobs: each reads the shuffle the job before wrote and consumed. Losing it costs
    # nothing, and keeping it would grow the lineage by one shuffle per job.
    state, lineage = _state_with_lineage()
    for event in add_executors(["a"], time=0.0):
        state.apply(event)
    t = 1.0
    for job in range(20):
        parents = [job - 1] if job else []
        events = [map_stage(job, 1, job, time=t, parents=parents, parent_shuffles=parents)]
        events += run_task(job, 0, "a", start=t, seconds=1.0, write=MB, shuffle_id=job)
        events += [StageCompleted(time=t + 1, stage_id=job), ShuffleConsumed(time=t + 1, shuffle_id=job),
                   JobEnded(time=t + 1, succeeded=True, job_id=job)]
        for event in events:
            state.apply(event)
        t += 2
    assert len(lineage.shuffle_ids()) <= 1  # type: ignore[attr-defined]


def test_the_lifetime_knowledge_forgets_executors_that_came_and_went() -> None:
    # An application that runs for days sees thousands of executors noticed or flagged and lost.
    from trspark.engine.events import ExecutorRebalance
    from trspark.engine.settings import TRConfig
    from trspark.engine.tr.policy import TRPolicy

    policy = TRPolicy(TRConfig(lifetime="exponential:mean=3600", rebalance_hazard_factor=4.0))
    t = 0.0
    for k in range(50):
        noticed, flagged = f"n{k}", f"r{k}"
        for event in [*add_executors([noticed, flagged], time=t), ExecutorNotice(time=t + 1, executor_id=noticed, deadline=t + 30),
                      ExecutorRebalance(time=t + 1, executor_id=flagged), Tick(time=t + 1.5),
                      ExecutorLost(time=t + 2, executor_id=noticed), ExecutorLost(time=t + 2, executor_id=flagged, reason="removed")]:
            policy.handle(event)
        t += 3
    assert not policy.knowledge._known and not policy.knowledge._raised  # type: ignore[attr-defined]


def test_a_repeated_executor_added_naming_its_pool_keeps_a_rebalance_seen_before() -> None:
    from trspark.engine.events import ExecutorRebalance

    state = _state(add_executors(["a"], time=0.0), [ExecutorRebalance(time=2.0, executor_id="a", since=1.5)])
    state.apply(ExecutorAdded(time=3.0, executor_id="a", pool="spot"))
    assert state.executors["a"].pool == "spot" and state.executors["a"].rebalance_at == 1.5
