"""The memoised Er / C_Redo of ``Recompute`` stay equal to a fresh computation through executor churn.

The right answer for every step is a new ``Recompute`` over the same lineage at the same clock
(no caches). The cached one must agree bit for bit up to float noise while executors come and
go, slots are reused and the clock moves, for a memoryless law (whose failure table keeps its
grid values, so caches are kept) and for a wear-out law (whose values change with age).
"""

from __future__ import annotations

import numpy as np
import pytest

from cost_model import failure, shuffle_terms
from cost_model.ancestry import build_ancestry
from cost_model.failure import FailureTable, cond_cdf
from cost_model.lifetimes import Exponential, LifetimeModel, Weibull
from cost_model.lifetimes.stable import Stable
from cost_model.lineage import Lineage
from cost_model.recompute import Recompute
from cost_model.timegrid import TimeGrid

GRID = TimeGrid.geometric(2000.0, 64, first=1e-2)


def _three_stage_lineage(model: LifetimeModel) -> Lineage:
    """Shuffles a -> b -> c, 4 outputs each: a and b over e0..e2 (e0 also holds a copy of b1), c on e0..e3.

    e3 holds only c3, so losing it changes no ancestor of c: only the slot's new holder can
    make a memoised ``Er`` of c wrong.
    """
    lineage = Lineage()
    for i in range(4):
        lineage.add_executor(f"e{i}", model, started=-10.0 * i)
    for level, (sid, parents) in enumerate((("a", []), ("b", ["a"]), ("c", ["b"]))):
        for m in range(4):
            holder = f"e{m}" if sid == "c" else f"e{(m + level) % 3}"
            lineage.add_output(sid, m, holder, 1.0 + m + 2 * level, 1e6, parents=parents)
    lineage.add_location("b", 1, "e0")
    return lineage


def _assert_matches_fresh(rc: Recompute, lineage: Lineage, now: float) -> None:
    fresh = Recompute(lineage, GRID, depth=rc.depth, now=now, max_staleness=rc.max_staleness)
    for sid in ("b", "c"):
        for m in range(4):
            out = lineage.output(sid, m)
            if out.remote or out.consumed:
                continue
            np.testing.assert_allclose(rc.er(sid, m), fresh.er(sid, m), rtol=1e-12, atol=1e-12)
            assert rc.c_redo(sid, m, 300.0) == pytest.approx(fresh.c_redo(sid, m, 300.0), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("model", [Exponential(mean=200.0), Weibull(shape=2.0, scale=300.0)], ids=["exponential", "weibull"])
def test_cached_costs_follow_executor_churn_and_the_clock(model: LifetimeModel) -> None:
    lineage = _three_stage_lineage(model)
    rc = Recompute(lineage, GRID, now=0.0, max_staleness=5.0)
    _assert_matches_fresh(rc, lineage, 0.0)  # fills the caches
    lineage.add_executor("new1", model, started=0.0)  # joins with no outputs
    _assert_matches_fresh(rc, lineage, 0.0)
    lineage.remove_executor("e3")  # c3 is lost now; the slot is free
    _assert_matches_fresh(rc, lineage, 0.0)
    lineage.add_executor("new2", model, started=0.0)  # takes e3's slot, younger than e3 was
    lineage.add_output("c", 3, "new2", 9.0, 1e6, parents=["b"])  # c3 re-run on the newcomer
    _assert_matches_fresh(rc, lineage, 0.0)
    lineage.remove_executor("e2")  # holds a1 and b0: ancestors of c change
    _assert_matches_fresh(rc, lineage, 0.0)
    rc.advance(7.0)  # past max_staleness: the table is rebuilt at the new ages
    _assert_matches_fresh(rc, lineage, 7.0)


def test_memoryless_refresh_and_new_executor_keep_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    # The point of keeping caches: an exponential failure table rebuilt for a new executor or a
    # later clock has the same grid values, so Er is not recomputed.
    lineage = _three_stage_lineage(Exponential(mean=200.0))
    rc = Recompute(lineage, GRID, now=0.0, max_staleness=5.0)
    before = rc.er("c", 2)
    built: list[int] = []
    original = shuffle_terms.GivenFailure.__init__

    def counting(self: shuffle_terms.GivenFailure, *args: object) -> None:
        built.append(1)
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(shuffle_terms.GivenFailure, "__init__", counting)
    lineage.add_executor("late", Exponential(mean=200.0), started=3.0)
    rc.advance(12.0)
    np.testing.assert_array_equal(rc.er("c", 2), before)
    assert built == []
    # A wear-out law ages: the same steps recompute.
    lineage_w = _three_stage_lineage(Weibull(shape=2.0, scale=300.0))
    rc_w = Recompute(lineage_w, GRID, now=0.0, max_staleness=5.0)
    rc_w.er("c", 2)
    rc_w.advance(12.0)
    rc_w.er("c", 2)
    assert built


def test_executor_churn_under_a_memoryless_law_keeps_the_terms_of_unchanged_shuffles(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An executor leaves and another takes its slot: the rows of every executor that stayed keep
    # their values, so a shuffle nobody changed keeps its terms when one below it is re-priced.
    lineage = _three_stage_lineage(Exponential(mean=200.0))
    rc = Recompute(lineage, GRID, now=0.0, max_staleness=5.0)
    for m in range(4):
        rc.er("c", m)
    built: list[object] = []
    original = shuffle_terms.GivenFailure.__init__

    def counting(self: shuffle_terms.GivenFailure, shared: object, state: object, *args: object) -> None:
        built.append(state)
        original(self, shared, state, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(shuffle_terms.GivenFailure, "__init__", counting)
    lineage.remove_executor("e3")  # held only c3
    lineage.add_executor("new", Exponential(mean=200.0), started=0.0)  # takes e3's slot
    lineage.add_location("b", 2, "new")  # b changes: c's Er is priced again
    for m in range(3):
        rc.er("c", m)
    assert built and all(state is lineage.shuffle("b") for state in built)  # a's terms were kept
    _assert_matches_fresh(rc, lineage, 0.0)


@pytest.mark.parametrize("model", [Exponential(mean=200.0), Weibull(shape=2.0, scale=300.0)], ids=["exponential", "weibull"])
def test_forgetting_a_consumed_shuffle_changes_no_cost(model: LifetimeModel) -> None:
    """A long application forgets consumed shuffles: every Er / C_Redo below them stays what it was."""
    consumed, forgotten = _three_stage_lineage(model), _three_stage_lineage(model)
    rc_consumed = Recompute(consumed, GRID, now=0.0, max_staleness=5.0)
    rc_forgotten = Recompute(forgotten, GRID, now=0.0, max_staleness=5.0)
    for m in range(4):
        rc_forgotten.er("c", m)  # memoise terms of "a" before it goes
    consumed.mark_consumed("a")
    forgotten.forget_shuffle("a")
    rc_forgotten.forget_shuffle("a")
    assert not forgotten.has_shuffle("a") and forgotten.parents("b") == set()
    for sid in ("b", "c"):
        for m in range(4):
            np.testing.assert_allclose(rc_forgotten.er(sid, m), rc_consumed.er(sid, m), rtol=1e-12, atol=1e-12)
    assert all(key[0] != "a" for key in (*rc_forgotten._rest, *rc_forgotten._given, *rc_forgotten._shared))


@pytest.mark.parametrize("model", [Exponential(mean=30.0), Stable()], ids=["exponential", "stable"])
def test_an_age_free_model_has_the_same_grid_values_at_every_age(model: LifetimeModel) -> None:
    """What ``age_free`` promises, bit for bit: a failure table may copy one row to every executor of the model."""
    assert model.age_free
    rows = cond_cdf(model, np.array([0.0, 1e-3, 7.5, 4e3, 1e7]), GRID.edges)
    assert all(np.array_equal(row, rows[0]) for row in rows[1:])
    wear_out = Weibull(shape=2.0, scale=300.0)
    assert not wear_out.age_free
    aged = cond_cdf(wear_out, np.array([0.0, 100.0]), GRID.edges)
    assert not np.array_equal(aged[0], aged[1])


def test_a_refreshed_table_reuses_age_free_rows_and_recomputes_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    spot, on_demand, wear_out = Exponential(mean=30.0), Stable(), Weibull(shape=0.6, scale=40.0)
    lineage = Lineage()
    for i, model in enumerate((spot, spot, on_demand, wear_out, wear_out)):
        lineage.add_executor(f"e{i}", model, started=-3.0 * i)
    first = FailureTable(lineage, GRID.edges, now=0.0)
    evaluated: list[LifetimeModel] = []
    original = failure.cond_cdf

    def counting(model: LifetimeModel, ages: np.ndarray, edges: np.ndarray) -> np.ndarray:
        evaluated.append(model)
        return original(model, ages, edges)

    monkeypatch.setattr(failure, "cond_cdf", counting)
    later = FailureTable(lineage, GRID.edges, now=25.0, previous=first)
    assert evaluated == [wear_out]  # the ages moved, only the wear-out law's values did
    fresh = FailureTable(lineage, GRID.edges, now=25.0)
    np.testing.assert_array_equal(later.cdf, fresh.cdf)
    np.testing.assert_array_equal(later.cdf_padded, fresh.cdf_padded)
    other_grid = TimeGrid.geometric(500.0, 16, first=1e-2).edges
    evaluated.clear()
    FailureTable(lineage, other_grid, now=25.0, previous=first)  # another grid: nothing to reuse
    assert len(evaluated) == 3


def _reference_ancestry(parents: dict[str, set[str]], root: str, depth: int) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """Members in discovery order and their readers, straight from the definitions (O(members^2))."""
    found, frontier = [root], [root]
    for _ in range(depth):
        frontier = [p for s in frontier for p in sorted(parents[s]) if p not in found and not found.append(p)]
    members = [s for s in found if s != root]
    return members, {s: tuple(c for c in members if s in parents[c]) for s in members}


@pytest.mark.parametrize("seed", range(20))
def test_ancestry_matches_its_definition_on_random_shuffle_graphs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = [f"s{i}" for i in range(14)]
    # Shuffle i reads up to 3 earlier shuffles: a DAG, as Spark's stages form one.
    parents = {name: {names[j] for j in rng.choice(i, size=min(i, int(rng.integers(0, 4))), replace=False)}
               for i, name in enumerate(names)}
    for depth in (1, 3, 8):
        ancestry = build_ancestry(lambda s: parents[s], names[-1], depth)
        members, readers = _reference_ancestry(parents, names[-1], depth)
        assert set(ancestry.order) == set(members) and len(ancestry.order) == len(members)
        assert {s: set(r) for s, r in ancestry.readers.items()} == {s: set(r) for s, r in readers.items()}
        position = {s: i for i, s in enumerate(ancestry.order)}
        assert all(position[r] < position[s] for s, rs in ancestry.readers.items() for r in rs)
        assert ancestry.direct == frozenset(parents[names[-1]]) & set(members)
        assert ancestry.has_parents == {s: bool(parents[s] & set(members)) for s in members}


def test_a_lazy_refresh_waits_for_a_read_and_prices_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # With exact deadlines the engine refreshes on every event but decides on few of them: a
    # refresh put off until the table is read must price every output as the eager one did,
    # whether executors came or went before or after the refresh.
    model = Weibull(shape=2.0, scale=300.0)
    eager_lineage, lazy_lineage = _three_stage_lineage(model), _three_stage_lineage(model)
    eager = Recompute(eager_lineage, GRID, now=0.0, max_staleness=5.0)
    lazy = Recompute(lazy_lineage, GRID, now=0.0, max_staleness=5.0)
    built: list[float] = []
    original = FailureTable.__init__

    def counting(self: FailureTable, lineage: Lineage, edges: np.ndarray, now: float, **kwargs: object) -> None:
        built.append(now)
        original(self, lineage, edges, now, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(FailureTable, "__init__", counting)
    for rc in (eager, lazy):
        rc.c_redo("c", 0, 300.0)  # the first table, at clock 0
    steps = [(10.0, None), (20.0, "join"), (30.0, "leave"), (40.0, "join-after"), (50.0, None)]
    for step, (now, change) in enumerate(steps):
        for lineage in (eager_lineage, lazy_lineage):
            if change == "join":
                lineage.add_executor(f"j{step}", model, started=now - 1.0)
            elif change == "leave":
                lineage.remove_executor("e1")
        eager.advance(now)
        built.clear()
        lazy.advance(now, eager=False)
        assert built == []  # nothing is built until a read
        if change == "join-after":  # an executor joins after the refresh was put off
            for lineage in (eager_lineage, lazy_lineage):
                lineage.add_executor("late", model, started=now)
        # The clock moves on, less than the staleness: the table read is still the refresh's.
        eager.advance(now + 2.0)
        lazy.advance(now + 2.0, eager=False)
        for sid in ("b", "c"):
            for m in range(4):
                out = eager_lineage.output(sid, m)
                if not (out.remote or out.consumed):
                    assert lazy.c_redo(sid, m, 300.0) == eager.c_redo(sid, m, 300.0)
        assert lazy.now_of_table == eager.now_of_table


@pytest.mark.parametrize("model", [Exponential(mean=200.0), Weibull(shape=2.0, scale=300.0)], ids=["exponential", "weibull"])
def test_work_built_before_a_decision_prices_the_same_and_leaves_the_decision_none(
        model: LifetimeModel, monkeypatch: pytest.MonkeyPatch) -> None:
    # An executor's or a stage's event builds what the next decision would: the decision then
    # builds no table and no per-shuffle terms, and prices as one that built them itself.
    ahead_lineage, lazy_lineage = _three_stage_lineage(model), _three_stage_lineage(model)
    ahead = Recompute(ahead_lineage, GRID, now=0.0, max_staleness=50.0)
    lazy = Recompute(lazy_lineage, GRID, now=0.0, max_staleness=50.0)
    for rc in (ahead, lazy):
        rc.c_redo("c", 0, 300.0)
    built: list[str] = []
    table_init, terms_build = FailureTable.__init__, shuffle_terms.ShuffleTerms.build.__func__

    def counting_table(self: FailureTable, *args: object, **kwargs: object) -> None:
        built.append("table")
        table_init(self, *args, **kwargs)  # type: ignore[arg-type]

    def counting_terms(cls: type, *args: object, **kwargs: object) -> object:
        built.append("terms")
        return terms_build(cls, *args, **kwargs)

    monkeypatch.setattr(FailureTable, "__init__", counting_table)
    monkeypatch.setattr(shuffle_terms.ShuffleTerms, "build", classmethod(counting_terms))
    changes = [
        lambda lineage: lineage.add_executor("j", model, started=3.0),
        lambda lineage: lineage.add_location("b", 2, "j"),
        lambda lineage: lineage.remove_executor("e1"),
    ]
    for change in changes:
        for lineage in (ahead_lineage, lazy_lineage):
            change(lineage)
        ahead.build_pending(read_next=("b",))
        expected = [(lazy.c_redo("c", m, 300.0), lazy.er("c", m)) for m in range(4)]
        built.clear()
        for m, (c_redo, er) in enumerate(expected):
            assert ahead.c_redo("c", m, 300.0) == c_redo
            np.testing.assert_array_equal(ahead.er("c", m), er)
        assert built == []
