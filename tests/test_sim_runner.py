"""Workload generators, the parallel runner's determinism, the metrics, and the golden summary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from simulators import oracle_family
from simulators.metrics import describe
from simulators.runner import Experiment, run_experiment, stable_job_time, with_stability
from simulators.workloads import WorkloadParams, make_workload, workload_names
from simulators.world import WorldSpec

GOLDEN = Path(__file__).parent / "fixtures" / "sim" / "golden_tpcds_small.json"


def small_experiment(policy: str, runs: int = 4) -> Experiment:
    job = make_workload("tpcds", WorkloadParams(scale=0.02), seed=3)
    world = with_stability(WorldSpec(vms=6, cores=2), job, 20.0)
    return Experiment(job, world, policy, runs=runs, seed=11)


def test_default_tpcds_has_the_papers_size_and_shrinks_data() -> None:
    job = make_workload("tpcds", seed=0)
    assert job.num_tasks >= 20_000
    per_task = {s.name: float(s.shuffle_write_bytes.mean()) for s in job.stages}
    assert per_task["scan_store_sales"] > per_task["join_customer"] > per_task["aggregate"] > per_task["aggregate_final"]
    assert per_task["sort_result"] == 0.0
    assert job.mean_task_seconds() == pytest.approx(1.0, rel=0.15)


@pytest.mark.parametrize("name", workload_names())
def test_workloads_are_seeded_valid_dags(name: str) -> None:
    a = make_workload(name, WorkloadParams(scale=0.05), seed=5)
    b = make_workload(name, WorkloadParams(scale=0.05), seed=5)
    c = make_workload(name, WorkloadParams(scale=0.05), seed=6)
    assert all(np.array_equal(x.task_seconds, y.task_seconds) for x, y in zip(a.stages, b.stages, strict=True))
    assert not all(np.array_equal(x.task_seconds, y.task_seconds) for x, y in zip(a.stages, c.stages, strict=True))
    assert len(a.stages) >= 8
    assert sum(1 for s in a.stages if s.shuffle_id is None) == 1  # one result stage


def test_pagerank_lineage_is_as_long_as_its_iterations() -> None:
    job = make_workload("pagerank", WorkloadParams(scale=0.05, iterations=6), seed=0)
    assert len(job.stages) == 1 + 6 + 1
    assert all(s.parents == (s.stage_id - 1,) for s in job.stages[1:])


def test_results_do_not_depend_on_the_number_of_workers() -> None:
    exp = small_experiment("always")
    one = run_experiment(exp, workers=1)
    two = run_experiment(exp, workers=2)
    assert one["rows"] == two["rows"]
    assert len({row["job_time"] for row in one["rows"]}) > 1  # runs really differ


def test_stable_time_has_no_evictions_and_bounds_slowdowns() -> None:
    exp = small_experiment("never", runs=3)
    stable = stable_job_time(exp.job, exp.world)
    summary = run_experiment(exp, workers=1, stable_time=stable)
    assert summary["stable_job_time"] == stable
    assert all(row["slowdown"] >= 1.0 for row in summary["rows"])
    assert summary["evictions_mean"] > 0


def test_oracle_recomputes_less_than_never() -> None:
    never = run_experiment(small_experiment("never"), workers=1)
    oracle = run_experiment(small_experiment("oracle"), workers=1)
    assert oracle["recomputed_tasks_mean"] < never["recomputed_tasks_mean"]
    assert oracle["slowdown_mean"] <= never["slowdown_mean"]


def test_describe_gives_t_interval() -> None:
    out = describe([1.0, 2.0, 3.0, 4.0])
    assert out["mean"] == 2.5 and out["p50"] == 2.5
    # t_{0.975,3} = 3.182446; s = 1.290994; half = 3.182446 * 1.290994 / 2
    assert out["ci95"] == pytest.approx([2.5 - 2.054260, 2.5 + 2.054260], abs=1e-5)
    assert describe([7.0])["ci95"] == [7.0, 7.0]


def test_golden_summary_is_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    # the oracle (owned by the simulator) exercises peer and remote copies without depending on
    # how the engine's policies evolve; its one backup heuristic without scheduling (the family
    # member "needed") is what the golden file recorded
    monkeypatch.setattr(oracle_family, "FAMILY", tuple(s for s in oracle_family.FAMILY if s.name == "needed"))
    monkeypatch.setattr(oracle_family, "BASELINES", ())
    summary = run_experiment(small_experiment("oracle"), workers=2)
    text = json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=2, sort_keys=True) + "\n"
    if os.environ.get("TRSPARK_REGEN_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
        pytest.skip(f"{GOLDEN.name} regenerated: review its diff")
    assert text == GOLDEN.read_text(), "simulator behaviour changed; if intended, rerun with TRSPARK_REGEN_GOLDEN=1"
