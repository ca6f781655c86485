"""Lifetime-aware task splitting of a simulated job."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from cost_model.lifetimes import Exponential
from cost_model.task_size import largest_task_seconds
from simulators.cli import simulate
from simulators.dag import JobSpec, StageSpec
from simulators.splitting import apply_split, lifetime_limit, split_job
from simulators.world import Pool, WorldSpec


def _job() -> JobSpec:
    maps = StageSpec(0, np.array([10.0, 25.0, 4.0]), np.array([30.0, 60.0, 9.0]), shuffle_id=0,
                     input_bytes=np.array([100.0, 250.0, 40.0]))
    result = StageSpec(1, np.array([31.0]), np.zeros(1), parents=(0,))
    return JobSpec("tiny", (maps, result))


def test_long_tasks_become_equal_pieces_with_the_same_work_and_bytes():
    out = split_job(_job(), 10.0, overhead=0.5)
    maps, result = out.stages
    # 10 s fits; 25 s -> 3 pieces of 25/3 s; 4 s fits; 31 s -> 4 pieces of 7.75 s; each piece + 0.5 s.
    assert maps.task_seconds.tolist() == pytest.approx([10.0] + [25.0 / 3 + 0.5] * 3 + [4.0])
    assert maps.shuffle_write_bytes.tolist() == pytest.approx([30.0, 20.0, 20.0, 20.0, 9.0])
    assert maps.input_bytes is not None and maps.input_bytes.sum() == pytest.approx(390.0)
    assert result.task_seconds.tolist() == pytest.approx([7.75 + 0.5] * 4)
    assert out.meta["split_limit"] == 10.0 and out.num_tasks == 9


def test_no_split_without_a_finite_limit():
    job = _job()
    stable = WorldSpec(vms=2, lifetime=None)
    assert apply_split(job, stable, "lifetime", 0.05, 0.0) is job
    assert apply_split(job, WorldSpec(vms=2), "none", 0.05, 0.0) is job


def test_the_limit_weighs_pools_by_their_vms():
    spot = "exponential:mean=200"
    world = WorldSpec(vms=4, pools=(Pool("ondemand", 1, "stable"), Pool("spot", 3, spot)))
    expected = largest_task_seconds(Exponential(mean=200.0), 0.05 * 4 / 3)
    assert lifetime_limit(world, 0.05) == pytest.approx(expected, rel=1e-9)
    assert math.isinf(lifetime_limit(WorldSpec(vms=2, lifetime=None), 0.05))


def test_simulate_split_option_keeps_the_unsplit_stable_time():
    args = ["--workload", "tpcds", "--policy", "tr", "--scale", "0.005", "--vms", "4", "--stability", "5",
            "--runs", "2", "--workers", "1", "--format", "json"]
    runner = CliRunner()
    plain = json.loads(runner.invoke(simulate, args).output)
    split = json.loads(runner.invoke(simulate, [*args, "--split", "lifetime"]).output)
    assert split["stable_job_time"] == plain["stable_job_time"]
    assert split["tasks"] > plain["tasks"]
