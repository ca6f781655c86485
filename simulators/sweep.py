"""Sweeps over workloads x policies x stabilities (x on-demand shares): a tidy CSV and plots.

One CSV row per (workload, policy, stability[, on-demand share]) with the run summary; plotting
reads only the rows, so a CSV from an earlier sweep can be re-plotted: slowdown against
stability (Figure 7) and slowdown against $ per job.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simulators.dag import JobSpec
from simulators.pricing import MONEY_COLUMNS, Prices, money_summary
from simulators.runner import Experiment, run_experiment, stable_job_time, with_stability
from simulators.world import DEFAULT_POOL, Pool, WorldSpec
from trspark.engine.settings import TRConfig
from trspark.stats import bootstrap_ci, mean_ratio_ci

COLUMNS = (
    "workload", "policy", "stability", "lifetime", "runs", "failed_runs", "stable_job_time",
    "slowdown_mean", "slowdown_p50", "slowdown_p95", "slowdown_ci95_low", "slowdown_ci95_high",
    "job_time_mean", "recomputed_tasks_mean", "backups_local_mean", "backups_remote_mean",
    "backup_bytes_local_mean", "backup_bytes_remote_mean", "evictions_mean", "safety_belt_firings_mean",
    *MONEY_COLUMNS, "on_demand_share",
    "shape", "slowdown_boot_low", "slowdown_boot_high", "tr_ratio", "tr_ratio_ci95_low", "tr_ratio_ci95_high",
    "settings", "notice",
)
"""``slowdown_boot_*``: the percentile bootstrap 95 % interval of the mean slowdown (``slowdown_ci95_*``
is Student's t). ``tr_ratio``: ``tr``'s mean slowdown over this row's, on the same worlds (paired runs),
with its paired bootstrap interval (empty without a ``tr`` row in the cell). ``shape``: the Weibull
shape of the lifetimes the stability sets (empty: exponential). ``settings``: the ``--conf KEY=VALUE``
items the sweep ran with, space-separated (empty: the defaults). ``notice``: seconds of warning before
each death (``--notice``; empty: none). ``on_demand_share``: the percent of the VMs on demand as run, in whole
VMs (25 % of 10 VMs runs and is recorded as 20.0; empty: the world as given)."""

#: What a cell of the sweep is: the rows of every policy on the same worlds.
Cell = tuple[str, str, str, float]


@dataclass(frozen=True)
class SweepPoint:
    workload: str
    policy: str
    stability: float
    on_demand_share: float | None = None
    """Percent of the VMs in a stable ``ondemand`` pool, the rest ``spot`` (None: the world as given)."""
    shape: float | None = None
    """Weibull shape of the lifetimes the stability sets (None: the sweep's ``shape``)."""

    def cell(self) -> Cell:
        return (self.workload, "" if self.on_demand_share is None else f"{self.on_demand_share:g}",
                "" if self.shape is None else f"{self.shape:g}", self.stability)


def sweep_points(workloads: Sequence[str], policies: Sequence[str], stabilities: Sequence[float],
                 shares: Sequence[float | None] = (None,), shapes: Sequence[float | None] = (None,)) -> list[SweepPoint]:
    """Every combination; the policies of one cell are consecutive (a cell's rows end together)."""
    return [SweepPoint(w, p, s, share, shape) for w in workloads for shape in shapes for share in shares
            for s in stabilities for p in policies]


def on_demand_vms(percent: float, vms: int) -> int:
    """The VMs of an on-demand share of ``percent`` % of ``vms``: ``round(percent / 100 x vms)``,
    a half going to the even count (Python's ``round``), so 25 % of 10 VMs is 2 VMs (20 %).

    Raises ``ValueError`` for a share outside [0, 100] or one that rounds to no VM: that point
    would silently be the homogeneous world.
    """
    if not 0.0 <= percent <= 100.0:
        raise ValueError(f"on-demand share must be a percentage in [0, 100], got {percent!r}")
    count = round(percent / 100.0 * vms)
    if percent > 0.0 and count == 0:
        raise ValueError(f"an on-demand share of {percent:g} % of {vms} VMs rounds to no VM; "
                         f"allowed: 0 or at least {100.0 / vms:g} % (one VM)")
    return count


def run_share(percent: float | None, vms: int) -> float | str:
    """The on-demand share (%) a point of ``percent`` % of ``vms`` VMs runs with: whole VMs
    (:func:`on_demand_vms`), so 25 % of 10 VMs is 20.0; "" for a point without a share."""
    return "" if percent is None else 100.0 * on_demand_vms(percent, vms) / vms


def with_on_demand_share(world: WorldSpec, percent: float | None) -> WorldSpec:
    """:func:`on_demand_vms` VMs in a stable ``ondemand`` pool, the others in ``spot``.

    The spot pool takes the world's lifetime (what the point's stability sets). 0 VMs on
    demand is the homogeneous world itself, so a 0 % point is the plain sweep's point.
    """
    if percent is None:
        return world
    on_demand = on_demand_vms(percent, world.vms)
    if on_demand == 0:
        return replace(world, pools=())
    pools = (Pool("ondemand", on_demand, "stable"),) + ((Pool("spot", world.vms - on_demand),) if on_demand < world.vms else ())
    return replace(world, pools=pools)


def share_prices(prices: Prices, world: WorldSpec, percent: float | None) -> Prices:
    """``prices`` for a point of on-demand share ``percent``: at 0 % every VM is a spot VM of the
    homogeneous world's ``default`` pool, so a ``spot`` price given for the sweep is its price too."""
    if percent is None or world.pools or "spot" not in prices.vm or DEFAULT_POOL in prices.vm:
        return prices
    return replace(prices, vm={**prices.vm, DEFAULT_POOL: prices.vm["spot"]})


def run_sweep(
    jobs: dict[str, JobSpec],
    points: Iterable[SweepPoint],
    world: WorldSpec,
    config: TRConfig,
    runs: int,
    seed: int,
    workers: int | None = None,
    believed_lifetime: str | None = None,
    on_point: Callable[[SweepPoint, dict[str, Any]], None] | None = None,
    prices: Prices | None = None,
    shape: float | None = None,
) -> list[dict[str, Any]]:
    """Simulate every point (``runs`` runs each); the stable time is computed once per workload.

    A point's stability sets the world's lifetime: of every VM in a homogeneous world, of the
    pools without their own lifetime in a world of pools. The policy believes
    ``believed_lifetime`` if given, else the world's :meth:`~simulators.world.WorldSpec.default_belief`.
    Each row is priced with ``prices`` (default: :class:`simulators.pricing.Prices`; a 0 % on-demand
    point's VMs at the ``spot`` price, :func:`share_prices`). With
    ``shape``, the lifetimes are Weibull of that shape with the stability's mean.
    """
    stable: dict[str, float] = {}
    rows = []
    cells: dict[Cell, dict[str, tuple[dict[str, Any], list[float]]]] = {}  # cell -> policy -> (row, slowdowns)
    for point in points:
        job = jobs[point.workload]
        if point.workload not in stable:
            stable[point.workload] = stable_job_time(job, world, config.period)
        point_shape = point.shape if point.shape is not None else shape
        point_world = with_stability(with_on_demand_share(world, point.on_demand_share), job, point.stability, point_shape)
        believed = config.with_options(lifetime=believed_lifetime or point_world.default_belief())
        exp = Experiment(job, point_world, point.policy, believed, runs=runs, seed=seed)
        summary = run_experiment(exp, workers=workers, stable_time=stable[point.workload])
        summary.update(money_summary(summary["rows"], point_world, share_prices(prices or Prices(), point_world,
                                                                                point.on_demand_share)))
        slowdowns = [float(r["slowdown"]) for r in summary["rows"]]
        row = {c: summary.get(c) for c in COLUMNS}
        boot_low, boot_high = bootstrap_ci((slowdowns,), np.mean)
        row.update(workload=point.workload, policy=point.policy, stability=point.stability,
                   on_demand_share=run_share(point.on_demand_share, world.vms),
                   shape="" if point_shape is None else point_shape,
                   notice="" if point_world.notice is None else point_world.notice,
                   slowdown_ci95_low=summary["slowdown_ci95"][0], slowdown_ci95_high=summary["slowdown_ci95"][1],
                   slowdown_boot_low=boot_low, slowdown_boot_high=boot_high)
        cell = cells.setdefault(point.cell(), {})
        cell[point.policy] = (row, slowdowns)
        _pair_with_tr(cell)
        rows.append(row)
        if on_point is not None:
            on_point(point, row)
    return rows


def _pair_with_tr(cell: dict[str, tuple[dict[str, Any], list[float]]]) -> None:
    """Fill each row's ``tr_ratio*``: ``tr``'s mean slowdown over the row's, paired by run.

    Run ``i`` of every policy of a cell met the same world (the same seed), so the runs pair up;
    failed runs count with the slowdown at which they were stopped, as in the mean.
    """
    if "tr" not in cell:
        return
    tr = cell["tr"][1]
    for row, slowdowns in cell.values():
        if row["tr_ratio"] is None:
            row["tr_ratio"], row["tr_ratio_ci95_low"], row["tr_ratio_ci95_high"] = mean_ratio_ci(tr, slowdowns)


def _figure(panels: int, width: float, height: float) -> tuple[Any, Any]:
    """A matplotlib figure with ``panels`` axes in up to two columns (the Agg backend: no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(2, panels)
    nrows = math.ceil(panels / cols)
    return plt.subplots(nrows, cols, figsize=(width * cols, height * nrows), squeeze=False)


def _save(fig: Any, axes: Any, panels: int, title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    for ax in list(axes.flat)[panels:]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        with _replacing(path) as partial:
            fig.savefig(partial, dpi=120)
    finally:
        plt.close(fig)


def _shape(row: dict[str, Any]) -> str:
    """The row's lifetime shape as a label ("" when not given)."""
    value = row.get("shape")
    return "" if value is None or value == "" else str(value)


def _share(row: dict[str, Any]) -> str:
    """The row's on-demand share as a label ("" when the sweep had none; a CSV gives strings)."""
    value = row.get("on_demand_share")
    return "" if value is None or value == "" else f"{float(value):g}"


@contextmanager
def _replacing(path: Path) -> Iterator[Path]:
    """A file beside ``path`` to write, that replaces ``path`` once written whole: an error or Ctrl-C while
    writing leaves ``path`` as it was (the sweep's rows so far, or a picture), never cut short."""
    partial = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with _replacing(path) as partial, partial.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Slowdown vs stability (log x), one panel per workload, one line per policy (Figure 7).

    Hollow markers flag points where some runs failed (their slowdown is a lower bound).
    """
    workloads = sorted({str(r["workload"]) for r in rows})
    # One line per policy, and per on-demand share and lifetime shape when the sweep had several.
    shaped = len({_shape(r) for r in rows}) > 1
    lines = sorted({(str(r["policy"]), _share(r), _shape(r) if shaped else "") for r in rows},
                   key=lambda x: (x[0], float(x[1] or -1), x[2]))
    fig, axes = _figure(len(workloads), 6.0, 4.2)
    for ax, workload in zip(axes.flat, workloads, strict=False):
        for index, (policy, share, shape) in enumerate(lines):
            pts = sorted(
                (float(r["stability"]), float(r["slowdown_mean"]), int(r["failed_runs"]))
                for r in rows if r["workload"] == workload and r["policy"] == policy
                and _share(r) == share and (not shaped or _shape(r) == shape)
            )
            if not pts:
                continue
            xs, ys, failed = zip(*pts, strict=True)
            label = ", ".join(part for part in (policy, f"{share}% on-demand" if share else "",
                                                f"shape {shape}" if shape else "exponential" if shaped else "")
                             if part)
            # Past ten lines colours repeat: the line style tells those apart.
            (line,) = ax.plot(xs, ys, marker="o", label=label, linestyle=("-", "--", ":", "-.")[index // 10 % 4])
            bad = [(x, y) for x, y, f in pts if f > 0]
            if bad:
                ax.scatter(*zip(*bad, strict=True), s=90, facecolors="white", edgecolors=line.get_color(), zorder=3)
        ax.set_xscale("log")
        ax.set_xlabel("VM stability (mean VM lifetime / mean task time)")
        ax.set_ylabel("slowdown vs. stable Spark")
        ax.set_title(workload)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, axes, len(workloads), "Slowdown vs. VM stability (hollow = some runs failed)", path)


def plot_cost(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Slowdown against USD per job, one panel per workload: a colour per policy, a marker per
    on-demand share, one point per stability (the smaller the marker, the lower the stability)."""
    import matplotlib.pyplot as plt

    workloads = sorted({str(r["workload"]) for r in rows})
    policies = sorted({str(r["policy"]) for r in rows})
    shares = sorted({_share(r) for r in rows}, key=lambda x: float(x or -1))
    stabs = sorted({float(r["stability"]) for r in rows})
    markers = "osD^vP*X"
    fig, axes = _figure(len(workloads), 6.5, 4.6)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, workload in zip(axes.flat, workloads, strict=False):
        for pi, policy in enumerate(policies):
            for si, share in enumerate(shares):
                pts = [r for r in rows if r["workload"] == workload and r["policy"] == policy
                       and _share(r) == share]
                if not pts:
                    continue
                ax.scatter([float(r["cost_usd_mean"]) for r in pts], [float(r["slowdown_mean"]) for r in pts],
                           s=[20 + 60 * stabs.index(float(r["stability"])) / max(1, len(stabs) - 1) for r in pts],
                           marker=markers[si % len(markers)], color=colours[pi % len(colours)],
                           label=f"{policy}, {share or 'as given'}{'% on-demand' if share else ''}")
        ax.set_yscale("log")  # most points crowd near slowdown 1
        ax.set_xlabel("USD per job (mean)")
        ax.set_ylabel("slowdown vs. stable Spark")
        ax.set_title(workload)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    _save(fig, axes, len(workloads), "Slowdown vs. $ per job (marker size grows with stability)", path)
