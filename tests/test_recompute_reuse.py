"""What ``Recompute`` keeps between changes of a shuffle equals a fresh computation, bit for bit.

Per-shuffle terms reuse the loss probabilities of multi-location groups while the groups' slot
sets stay the same object, and a change that leaves a shuffle's aggregates bit for bit as they
were keeps its version. After every step of a lineage with many peer copies, the memoised
``Er`` / ``C_Redo`` must equal those of a new ``Recompute`` over the same lineage.
"""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.aggregates import ShuffleState
from cost_model.failure import TINY
from cost_model.lifetimes import Exponential, LifetimeModel, Weibull
from cost_model.lineage import Lineage
from cost_model.recompute import Recompute
from cost_model.shuffle_terms import GivenFailure, ShuffleTerms
from cost_model.timegrid import TimeGrid

GRID = TimeGrid.geometric(2000.0, 64, first=1e-2)
N_EXECUTORS = 6


def _lineage(model: LifetimeModel) -> Lineage:
    """Shuffles a -> b -> c -> d, 8 outputs each over e0..e5, with peer copies of some of a, b and c."""
    lineage = Lineage()
    for i in range(N_EXECUTORS):
        lineage.add_executor(f"e{i}", model, started=-7.0 * i)
    for level, (sid, parents) in enumerate((("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["c"]))):
        for m in range(8):
            lineage.add_output(sid, m, f"e{(m + level) % N_EXECUTORS}", 1.0 + 0.37 * m + level, 1e6, parents=parents)
    for sid, m, peer in (("a", 0, "e3"), ("a", 1, "e4"), ("b", 2, "e0"), ("b", 3, "e5"), ("c", 4, "e1")):
        lineage.add_location(sid, m, peer)
    return lineage


def _assert_equals_fresh(rc: Recompute, lineage: Lineage) -> None:
    fresh = Recompute(lineage, GRID, depth=rc.depth, now=0.0, max_staleness=rc.max_staleness)
    for sid in ("b", "c", "d"):
        for m in range(8):
            if not lineage.has_output(sid, m):
                continue
            np.testing.assert_array_equal(rc.er(sid, m), fresh.er(sid, m))
            assert rc.c_redo(sid, m, 300.0) == fresh.c_redo(sid, m, 300.0)


@pytest.mark.parametrize("model", [Exponential(mean=200.0), Weibull(shape=2.0, scale=300.0)], ids=["exponential", "weibull"])
def test_terms_kept_across_changes_equal_a_fresh_computation(model: LifetimeModel) -> None:
    lineage = _lineage(model)
    rc = Recompute(lineage, GRID, now=0.0, max_staleness=5.0)
    _assert_equals_fresh(rc, lineage)
    steps = [
        lambda: lineage.add_location("a", 6, "e3"),  # a6 lives on e0: the pair {e0, e3} already shares a0
        lambda: lineage.add_location("a", 2, "e5"),  # a new pair
        lambda: lineage.add_location("b", 7, "e0"),  # b7 on e1: the pair {e0, e1} is new for b
        lambda: lineage.remove_location("a", 1, "e2"),  # no copy there: a1's pair re-enters a's groups last
        lambda: lineage.remove_location("a", 1, "e4"),  # the pair {e1, e4} leaves a
        lambda: (lineage.remove_location("a", 2, "e5"), lineage.add_location("a", 2, "e4")),  # as many pairs, another one
        lambda: lineage.mark_consumed("c", 4),
        lambda: lineage.add_location("c", 4, "e2"),  # a consumed output gains a copy: c's aggregates are unchanged
        lambda: lineage.add_location("b", 2, "remote"),
        lambda: lineage.remove_executor("e3"),  # every pair with e3 splits
        lambda: lineage.add_executor("e9", model, started=0.0),  # takes e3's slot
        lambda: lineage.add_location("a", 4, "e9"),
        lambda: lineage.add_output("b", 5, "e9", 4.5, 1e6, parents=["a"]),  # a re-run replaces b5
    ]
    for step in steps:
        step()
        _assert_equals_fresh(rc, lineage)


def test_a_change_that_leaves_the_aggregates_keeps_the_version() -> None:
    lineage = _lineage(Exponential(mean=200.0))
    lineage.mark_consumed("c", 4)
    state = lineage.shuffle("c")
    version, multi_version = state.version, state.multi_version
    lineage.add_location("c", 4, "e2")  # excluded before and after
    lineage.add_location("c", 4, "remote")
    assert (state.version, state.multi_version) == (version, multi_version)
    lineage.add_location("c", 5, "e0")  # c5 leaves e0's single-location sum for the pair {e0, e2}
    assert state.version != version and state.multi_version != multi_version


def test_multi_slot_sets_keep_their_identity_until_a_set_enters_or_leaves() -> None:
    lineage = _lineage(Exponential(mean=200.0))
    state = lineage.shuffle("a")
    slots, costs = state.multi_arrays()
    lineage.add_location("a", 6, "e3")  # joins the pair {e0, e3}: only a cost changes
    slots_after, costs_after = state.multi_arrays()
    assert slots_after is slots and not np.array_equal(costs_after, costs)
    lineage.add_location("a", 2, "e5")  # a new pair
    slots_new, _costs = state.multi_arrays()
    assert slots_new is not slots
    _assert_arrays_fresh(state, slots_new)
    lineage.remove_location("a", 1, "e2")  # no copy there, but a1's pair leaves and re-enters: the order changes
    _assert_arrays_fresh(state, state.multi_arrays()[0])
    lineage.remove_location("a", 2, "e5")
    lineage.add_location("a", 2, "e4")  # as many pairs as before, one of them another
    _assert_arrays_fresh(state, state.multi_arrays()[0])


def _assert_arrays_fresh(state: ShuffleState, slots: np.ndarray) -> None:
    expected = np.array([sorted(group) for group in state.multi], dtype=np.int64)
    np.testing.assert_array_equal(slots, expected)
    np.testing.assert_array_equal(state.multi_arrays()[1], [entry[0] for entry in state.multi.values()])


def _needed_log_clear_reference(given: GivenFailure, need: np.ndarray) -> np.ndarray:
    """The plain formula: every row of ``need`` and of the logs computed."""
    n, slot, p_lost = given.n_slots, given.slot, given.table.cdf
    held = given.state.single_count[:n] > 0
    log_keep = np.log(np.maximum(1.0 - need[:n] * p_lost, TINY))
    if slot is not None:
        log_keep[slot] = np.log(np.maximum(1.0 - need[slot], TINY))
    base = held.astype(np.float64) @ log_keep
    if given.state.lost_count:
        base = base + np.log(np.maximum(1.0 - need[n], TINY))
    multi = given.shared.multi_lost.copy()
    multi[given.rows_x] = given.multi_x
    multi = multi[given.shared.multi_free]
    if multi.size:
        base = base + np.log(np.maximum(1.0 - need[n] * multi, TINY)).sum(axis=0)
    out = np.empty((n + 1, base.size))
    out[:] = base
    swap = np.log(np.maximum(1.0 - need[:n], TINY)) - log_keep
    if slot is not None:
        swap[slot] = 0.0
    out[:n] += np.where(held[:, None], swap, 0.0)
    return out


@pytest.mark.parametrize("slot_of", ["e0", "e4", None])
def test_terms_read_only_the_need_rows_they_list(slot_of: str | None) -> None:
    # Rows of the need outside need_rows meet zero weights: any value there gives the same terms.
    lineage = _lineage(Weibull(shape=2.0, scale=300.0))
    lineage.add_location("b", 0, "e3")
    lineage.remove_executor("e5")  # b4 is lost now
    rc = Recompute(lineage, GRID, now=0.0, max_staleness=5.0)
    state = lineage.shuffle("b")
    slot = None if slot_of is None else lineage.executor(slot_of).slot
    given = GivenFailure(ShuffleTerms.build(state, rc.table), state, rc.table, slot)
    rng = np.random.default_rng(1)
    need = rng.uniform(0.0, 1.0, (given.n_slots + 1, GRID.edges.size))
    only_rows = np.zeros_like(need)
    only_rows[given.need_rows] = need[given.need_rows]
    np.testing.assert_array_equal(given.needed_loss(only_rows), given.needed_loss(need))
    reference = _needed_log_clear_reference(given, need)
    np.testing.assert_array_equal(given.needed_log_clear(only_rows) + 0.0, reference + 0.0)  # up to the sign of 0


def test_costs_of_touched_slot_sets_are_updated_in_place_of_a_rebuild() -> None:
    lineage = Lineage()
    for i in range(8):
        lineage.add_executor(f"e{i}", Exponential(mean=200.0))
    for m in range(40):
        lineage.add_output("s", m, f"e{m % 8}", 1.0 + 0.1 * m, 1e6)
    for m in range(16):
        lineage.add_location("s", m, f"e{(m + 1 + m // 8) % 8}")  # 16 distinct pairs
    state = lineage.shuffle("s")
    slots, _costs = state.multi_arrays()
    lineage.add_location("s", 24, "e1")  # s24 on e0 joins the pair {e0, e1}
    lineage.add_location("s", 33, "e2")  # s33 on e1 joins the pair {e1, e2}
    lineage.mark_consumed("s", 0)  # leaves {e0, e1}
    assert state.multi_arrays()[0] is slots
    _assert_arrays_fresh(state, slots)
