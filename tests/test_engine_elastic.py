"""Dynamic allocation: removals are no evictions, and idle executors with saved outputs are released."""

from __future__ import annotations

import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from trspark.engine.commands import Backup, ReleaseExecutor
from trspark.engine.events import (
    LOSS_REASONS,
    REMOTE,
    BlockBackedUp,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    JobSubmitted,
    ReleaseKept,
    ShuffleConsumed,
    StageCompleted,
    TaskStarted,
    Tick,
)
from trspark.engine.protocol import ProtocolError, from_json, to_json
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.views import observed_lifetime
from trspark.keys import ConfigError
from trspark.live.config import from_spark_conf
from trspark.live.history import HistoryStore
from trspark.live.recorder import HistoryObserver, LifetimeRecorder

IDLE = 3.0


def _policy(min_executors: int = 0, release_idle: float = IDLE):  # type: ignore[no-untyped-def]
    # Lifetimes so long that Algorithm 2 never copies by itself: only the tests' backups count.
    config = TRConfig(lifetime="exponential:mean=1e9", duplication=False, scheduling=False, safety_belt=False,
                      release_idle=release_idle, release_min_executors=min_executors)
    return make_policy("tr", config)


def _released(commands: list) -> list[str]:  # type: ignore[type-arg]
    return [c.executor_id for c in commands if isinstance(c, ReleaseExecutor)]


def _one_output_on_a():  # type: ignore[no-untyped-def]
    """Executors a, b; one map output of shuffle 0 written by a (its stage ends at 1 s), not read yet."""
    policy = _policy()
    events = add_executors(["a", "b"]) + [map_stage(0, 1, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=1.0, write=8 * MB, shuffle_id=0)
    events += [StageCompleted(time=1.0, stage_id=0)]
    feed(policy, events)
    return policy


def test_an_idle_executor_is_released_only_once_its_live_output_is_saved_elsewhere() -> None:
    policy = _one_output_on_a()
    assert _released(feed(policy, [Tick(time=2.0), Tick(time=4.5)])) == ["b"], \
        "b holds nothing and is idle 4.5 s >= 3 s; a holds an unsaved output"
    assert _released(feed(policy, [Tick(time=9.0)])) == []
    saved = BlockBackedUp(time=9.5, shuffle_id=0, map_index=0, target=REMOTE, bytes=8 * MB)
    out = feed(policy, [saved, Tick(time=10.0)])
    (release,) = [c for c in out if isinstance(c, ReleaseExecutor)]
    assert (release.executor_id, release.idle) == ("a", True)
    assert _released(feed(policy, [Tick(time=15.0)])) == [], "released once"
    assert policy.summary()["executors_released_idle"] == 2
    feed(policy, [ExecutorLost(time=16.0, executor_id="a", reason="released")])
    assert policy.summary()["executors_released_idle"] == 2, "a release counts once it is done, too"


def test_no_release_before_the_idle_time_nor_while_a_task_runs() -> None:
    policy = _policy()
    events = add_executors(["a"]) + [map_stage(0, 2, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=1.0, shuffle_id=0)
    events += [ShuffleConsumed(time=1.0, shuffle_id=0)]
    assert _released(feed(policy, events + [Tick(time=3.9)])) == [], "idle 2.9 s < 3 s"
    assert _released(feed(policy, [TaskStarted(time=3.95, stage_id=0, partition=1, executor_id="a"),
                                   Tick(time=10.0)])) == [], "a task runs there"


def test_no_release_while_a_stage_is_active() -> None:
    # A fresh executor that has not had its first task yet is idle, but the stage needs it.
    policy = _policy()
    feed(policy, add_executors(["a"]) + [map_stage(0, 4, 0, time=1.0)])
    assert _released(feed(policy, [Tick(time=10.0)])) == []


def test_consumed_outputs_do_not_keep_an_executor() -> None:
    policy = _one_output_on_a()
    feed(policy, [ShuffleConsumed(time=2.0, shuffle_id=0)])
    assert sorted(_released(feed(policy, [Tick(time=5.0)]))) == ["a", "b"]


def test_dynamic_allocation_floor_keeps_min_executors() -> None:
    policy = _policy(min_executors=1)
    feed(policy, add_executors(["a", "b", "c"]))
    assert _released(feed(policy, [Tick(time=5.0), Tick(time=10.0)])) == ["a", "b"]


def test_a_peer_copy_saves_an_output_only_while_its_holder_stays() -> None:
    # a wrote the output, b holds its peer copy: one of them may go (b, idle longest), not both.
    policy = _one_output_on_a()
    feed(policy, [BlockBackedUp(time=1.5, shuffle_id=0, map_index=0, target="b", bytes=8 * MB)])
    assert _released(feed(policy, [Tick(time=5.0), Tick(time=10.0)])) == ["b"]


def test_release_off_by_default_and_a_task_on_a_kept_executor_makes_it_releasable_again() -> None:
    off = _policy(release_idle=0.0)
    feed(off, add_executors(["a", "b"]))
    assert _released(feed(off, [Tick(time=100.0)])) == []
    policy = _policy()
    feed(policy, add_executors(["a"]))
    assert _released(feed(policy, [Tick(time=5.0)])) == ["a"]
    # The driver found a busy and kept it: a later idle spell releases it again.
    events = run_task(0, 0, "a", start=6.0, seconds=1.0, shuffle_id=None)
    done = StageCompleted(time=7.0, stage_id=0)
    assert _released(feed(policy, [map_stage(0, 1, None, time=6.0), *events, done, Tick(time=11.0)])) == ["a"]


@pytest.mark.parametrize("reason", ["removed", "released", "killed", "app", "decommissioned"])
def test_a_removal_is_censored_in_the_engine_and_the_history(reason: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    state = JobState()
    state.apply(ExecutorAdded(time=1.0, executor_id="a"))
    lost = ExecutorLost(time=11.0, executor_id="a", reason=reason)
    assert observed_lifetime(state.executors["a"], lost) == (10.0, False)
    store = HistoryStore(str(tmp_path))
    observer = HistoryObserver(LifetimeRecorder(store, pool="p", app_id="app"))
    observer(ExecutorAdded(time=1.0, executor_id="a"))
    observer(lost)
    observer.close()
    assert [(r.duration, r.observed) for r in store.load("p")] == [(10.0, False)]


def test_protocol_carries_removals_and_idle_releases() -> None:
    for reason in LOSS_REASONS:
        lost = ExecutorLost(time=1.0, executor_id="3", reason=reason)
        assert from_json(to_json(lost)) == lost
    with pytest.raises(ProtocolError, match="reason 'scaled' is not one of"):
        from_json('{"type":"ExecutorLost","time":1.0,"executor_id":"3","reason":"scaled"}')
    release = ReleaseExecutor("3", reason="idle", idle=True)
    assert '"idle":true' in to_json(release) and from_json(to_json(release)) == release
    assert from_json('{"type":"ReleaseExecutor","executor_id":"3"}') == ReleaseExecutor("3")
    kept = ReleaseKept(time=2.0, executor_id="3")
    assert from_json('{"type":"ReleaseKept","time":2.0,"executor_id":"3"}') == kept == from_json(to_json(kept))


def test_an_executor_spark_kept_is_asked_again_after_another_idle_spell_and_serves_as_a_peer_meanwhile() -> None:
    # Spark keeps an idle executor with cached blocks, or one its dynamic allocation target counts on.
    policy = _one_output_on_a()
    assert _released(feed(policy, [Tick(time=4.5)])) == ["b"]
    assert _released(feed(policy, [ReleaseKept(time=5.0, executor_id="b"), Tick(time=7.9)])) == [], \
        "idle again from 5 s: not 3 s yet"
    assert policy.summary()["executors_released_idle"] == 0 and policy.summary()["idle_releases_kept"] == 1
    assert _released(feed(policy, [Tick(time=8.0)])) == ["b"], "asked again"
    feed(policy, [ExecutorLost(time=8.5, executor_id="b", reason="released")])
    assert policy.summary()["executors_released_idle"] == 1
    # While it stays, b is a peer like any other: a's output is copied there before a goes.
    noticed = [ExecutorNotice(time=7.95, executor_id="a", deadline=10.0), Tick(time=7.97)]
    kept, told = _one_output_on_a(), _one_output_on_a()
    feed(kept, [Tick(time=4.5), ReleaseKept(time=5.0, executor_id="b")])
    assert [c.target for c in feed(kept, noticed) if isinstance(c, Backup)] == ["b"]
    feed(told, [Tick(time=4.5)])  # b told to go, and not kept: the copy goes elsewhere
    assert [c.target for c in feed(told, noticed) if isinstance(c, Backup)] == ["remote"]


def test_release_keys_parse_and_refuse_bad_values() -> None:
    config = from_spark_conf({"spark.trspark.release.idle": "2.5", "spark.trspark.release.minExecutors": "1"})
    assert (config.release_idle, config.release_min_executors) == (2.5, 1)
    with pytest.raises(ConfigError, match="release.idle"):
        from_spark_conf({"spark.trspark.release.idle": "-1"})


def test_no_copy_goes_to_an_executor_released_as_idle() -> None:
    # a's output is read by stage 1, not submitted yet (no stage active): b and c, idle since 0 s,
    # go at 4 s (d stays: minExecutors = 2). a dies at 12 s, known from the start: once the
    # readers would outlast it, the output is copied -- to a holder that stays, not to b or c,
    # which dynamic allocation is removing.
    config = TRConfig(lifetime="exponential:mean=1e9", knowledge="deterministic", duplication=False,
                      scheduling=False, safety_belt=False, release_idle=IDLE, release_min_executors=2)
    policy = make_policy("tr", config)
    graph = JobSubmitted(0.0, 0, (0, 1), (1, 4), (0, None), ((), (0,)))
    events = add_executors(["a", "b", "c", "d"]) + [ExecutorNotice(0.0, "a", deadline=12.0, kind="lifetime"), graph]
    events += [map_stage(0, 1, 0), *run_task(0, 0, "a", start=0.0, seconds=2.0, write=8 * MB, shuffle_id=0),
               StageCompleted(time=2.0, stage_id=0)]
    assert feed(policy, events) == []
    assert _released(feed(policy, [Tick(time=4.0)])) == ["b", "c"]
    backups = [c for c in feed(policy, [Tick(time=float(t)) for t in range(5, 12)]) if isinstance(c, Backup)]
    assert backups and backups[0].target not in ("b", "c"), backups
