"""The memoised Er / C_Redo of ``Recompute`` stay equal to a fresh computation through executor churn.

The right answer for every step is a new ``Recompute`` over the same lineage at the same clock
(no caches). The cached one must agree bit for bit up to float noise while executors come and
go, slots are reused and the clock moves, for a memoryless law (whose failure table keeps its
grid values, so caches are kept) and for a wear-out law (whose values change with age).
"""

from __future__ import annotations

import numpy as np
import pytest

from cost_model import shuffle_terms
from cost_model.lifetimes import Exponential, LifetimeModel, Weibull
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
