"""The backup stack: newest first per source, a slot limit, drops, cancellation on consumption."""

from __future__ import annotations

from engine_world import MB, add_executors, map_stage, run_task

from trspark.engine.commands import Backup, CancelBackup
from trspark.engine.events import REMOTE, BlockBackedUp, ExecutorLost, ShuffleConsumed
from trspark.engine.state import JobState
from trspark.engine.tr.backup_stack import BackupStack, plan_for


def _state_with_blocks() -> JobState:
    """Stage 0 (3 tasks on a, shuffle 0) -> stage 1 (1 task on b, shuffle 1) -> stage 2 reads shuffle 1."""
    state = JobState()
    events = add_executors(["a", "b"], cores=2) + [
        map_stage(0, 3, 0),
        map_stage(1, 1, 1, parents=[0], parent_shuffles=[0]),
        map_stage(2, 1, None, parents=[1], parent_shuffles=[1]),
    ]
    for p in range(3):
        events += run_task(0, p, "a", start=float(p), seconds=1.0, write=MB, shuffle_id=0)
    for event in events:
        state.apply(event)
    return state


def _released(commands: list) -> list[tuple[int, int]]:  # type: ignore[type-arg]
    return [(c.shuffle_id, c.map_index) for c in commands if isinstance(c, Backup)]


def test_newest_first_one_in_flight_per_source() -> None:
    state = _state_with_blocks()
    stack = BackupStack(max_in_flight=1)
    for p in range(3):
        stack.push(plan_for(state.outputs[(0, p)], "a", REMOTE))
    assert _released(stack.release(state)) == [(0, 2)]
    assert _released(stack.release(state)) == []  # slot busy
    stack.finished((0, 2))
    assert _released(stack.release(state)) == [(0, 1)]


def test_two_slots_release_two_newest() -> None:
    state = _state_with_blocks()
    stack = BackupStack(max_in_flight=2)
    for p in range(3):
        stack.push(plan_for(state.outputs[(0, p)], "a", "b"))
    assert _released(stack.release(state)) == [(0, 2), (0, 1)]


def test_a_newer_plan_replaces_an_older_one() -> None:
    state = _state_with_blocks()
    stack = BackupStack()
    stack.push(plan_for(state.outputs[(0, 0)], "a", "b"))
    stack.push(plan_for(state.outputs[(0, 0)], "a", REMOTE))
    released = [c for c in stack.release(state) if isinstance(c, Backup)]
    assert [(c.map_index, c.target) for c in released] == [(0, REMOTE)]
    stack.finished((0, 0))
    assert stack.release(state) == []


def test_unplanned_block_is_not_released() -> None:
    state = _state_with_blocks()
    stack = BackupStack()
    stack.push(plan_for(state.outputs[(0, 1)], "a", REMOTE))
    stack.unplan((0, 1))
    assert stack.release(state) == []


def test_pending_backup_dropped_once_its_consumers_are_safe() -> None:
    state = _state_with_blocks()
    stack = BackupStack()
    stack.push(plan_for(state.outputs[(0, 0)], "a", REMOTE))
    for event in run_task(1, 0, "b", start=5.0, seconds=1.0, write=MB, shuffle_id=1):
        state.apply(event)
    state.apply(BlockBackedUp(time=7.0, shuffle_id=1, map_index=0, target=REMOTE, bytes=MB))
    assert state.consumers_safe(0)
    assert stack.release(state) == []
    assert stack.dropped == 1


def test_block_already_safe_or_target_dead_is_dropped() -> None:
    state = _state_with_blocks()
    stack = BackupStack(max_in_flight=3)
    stack.push(plan_for(state.outputs[(0, 0)], "a", REMOTE))
    stack.push(plan_for(state.outputs[(0, 1)], "a", "b"))
    state.apply(BlockBackedUp(time=4.0, shuffle_id=0, map_index=0, target=REMOTE, bytes=MB))
    state.apply(ExecutorLost(time=4.0, executor_id="b"))
    assert stack.release(state) == []
    assert stack.dropped == 2


def test_consumed_shuffle_cancels_released_backups() -> None:
    state = _state_with_blocks()
    stack = BackupStack()
    stack.push(plan_for(state.outputs[(0, 2)], "a", REMOTE))
    stack.push(plan_for(state.outputs[(0, 1)], "a", REMOTE))
    assert _released(stack.release(state)) == [(0, 2)]
    state.apply(ShuffleConsumed(time=9.0, shuffle_id=0))
    assert stack.cancel_consumed(0) == [CancelBackup(shuffle_id=0, map_index=2)]
    assert stack.release(state) == []
    assert not stack.is_busy((0, 1))


def test_lost_source_forgets_pending_backups_and_awaits_the_failure_of_released_ones() -> None:
    state = _state_with_blocks()
    stack = BackupStack()
    stack.push(plan_for(state.outputs[(0, 2)], "a", REMOTE))
    stack.push(plan_for(state.outputs[(0, 1)], "a", REMOTE))
    stack.release(state)
    stack.executor_lost("a")
    assert stack.pending_count() == 0
    assert list(stack.in_flight) == [(0, 2)]
    stack.finished((0, 2))  # the driver's BackupFailed
    assert not stack.in_flight


def test_copies_in_flight_are_counted_per_target_until_they_end() -> None:
    state = _state_with_blocks()
    stack = BackupStack(max_in_flight=3)
    stack.push(plan_for(state.outputs[(0, 0)], "a", REMOTE))
    stack.push(plan_for(state.outputs[(0, 1)], "a", "b"))
    stack.push(plan_for(state.outputs[(0, 2)], "a", "b"))
    assert (stack.in_flight_to(REMOTE), stack.in_flight_to("b"), stack.peer_loads()) == (0, 0, {})  # planned only
    stack.release(state)
    assert (stack.in_flight_to(REMOTE), stack.in_flight_to("b"), stack.peer_loads()) == (1, 2, {"b": 2})
    assert stack.peer_loads(exclude=(0, 2)) == {"b": 1}
    stack.finished((0, 2), target=REMOTE)  # another target's report: this copy goes on
    assert stack.in_flight_to("b") == 2
    stack.finished((0, 2), target="b")
    assert stack.peer_loads(exclude=(0, 1)) == {} and stack.in_flight_to("b") == 1
    state.apply(ShuffleConsumed(time=9.0, shuffle_id=0))
    stack.cancel_consumed(0)
    assert (stack.in_flight_to(REMOTE), stack.in_flight_to("b"), stack.peer_loads()) == (0, 0, {})
