"""What a simulated job costs: VM-hours per pool and remote-storage writes, priced in USD.

Pricing is a separate step from simulating (like plotting): a run records how long each pool's
VMs were up and what it copied (:func:`simulators.metrics.run_row`); :class:`Prices` turns that
into dollars, so one set of runs can be priced many ways.

.. math::

    \\$_\\text{job} = \\sum_{p} \\frac{s_p}{3600}\\,c_p
        + \\frac{B_\\text{remote}}{2^{30}}\\,c_\\text{GB}
        + \\frac{n_\\text{remote}}{1000}\\,c_\\text{req}

with :math:`s_p` the seconds pool :math:`p`'s VMs were up during the job (registration to
eviction, release or job end; clouds bill Linux VMs per second), :math:`c_p` its price (USD per VM-hour),
:math:`B_\\text{remote}` the bytes of completed copies to the remote store, :math:`n_\\text{remote}`
their number (one PUT each), :math:`c_\\text{GB}` (USD per GB written) and :math:`c_\\text{req}`
(USD per 1,000 requests), a GB being 2^30 bytes as AWS bills it. Peer copies cost no money (they
stay in one zone); they cost time.

Left out on purpose: AWS's 60 s minimum per launch, and its waiver for a spot VM that EC2 itself
interrupts within its first hour. Simulated jobs at ``--scale`` last seconds to minutes, so the
waiver would make nearly every evicted spot VM free and price the scaled world unlike the one it
stands for; the formula charges the time each VM held, which compares policies by the capacity
they used.

Default prices are typical public list prices, meant to be overridden (``--price`` and friends):

* on-demand VM, ``0.192`` USD/h: AWS EC2 ``m5.xlarge`` (4 vCPU, the simulator's default 4 cores
  per VM), Linux, us-east-1 on-demand price (https://aws.amazon.com/ec2/pricing/on-demand/).
  Every pool that cannot be evicted (lifetime ``stable``) gets it.
* spot VM, ``0.0768`` USD/h: the same instance at a 60 % discount, a typical m5.xlarge spot
  price in us-east-1 (https://aws.amazon.com/ec2/spot/pricing/; it moves with zone and hour).
  Every evictable pool gets it, the single pool of a homogeneous world whose VMs can die too.
* remote store, ``0.0`` USD per GB written: Amazon S3 charges nothing for data transfer in;
  storing a GB costs 0.023 USD per month (S3 Standard), a negligible share for copies deleted
  after the job (https://aws.amazon.com/s3/pricing/).
* remote store, ``0.005`` USD per 1,000 requests: the S3 Standard PUT/COPY/POST/LIST price
  (same page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulators.world import WorldSpec

ON_DEMAND_USD_PER_HOUR = 0.192
SPOT_USD_PER_HOUR = 0.0768
REMOTE_USD_PER_GB = 0.0
REMOTE_USD_PER_1K_REQUESTS = 0.005
GB = 2**30
"""Bytes of the GB that ``remote_gb`` is charged per (and that the simulator's tables show)."""

#: Columns :func:`money_summary` adds to a summary (means over the runs).
MONEY_COLUMNS = ("vm_hours_mean", "bytes_copied_mean", "cost_usd_mean")


@dataclass(frozen=True)
class Prices:
    """USD prices: per VM-hour of a named pool, per GB and per 1,000 requests to the remote store.

    ``vm`` names pools explicitly; a pool it does not name pays ``on_demand`` if it cannot be
    evicted, else ``spot``.
    """

    vm: Mapping[str, float] = field(default_factory=dict)
    on_demand: float = ON_DEMAND_USD_PER_HOUR
    spot: float = SPOT_USD_PER_HOUR
    remote_gb: float = REMOTE_USD_PER_GB
    remote_1k_requests: float = REMOTE_USD_PER_1K_REQUESTS

    def __post_init__(self) -> None:
        for name, value in [*self.vm.items(), ("on_demand", self.on_demand), ("spot", self.spot),
                            ("remote_gb", self.remote_gb), ("remote_1k_requests", self.remote_1k_requests)]:
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"price {name!r} must be a finite number of USD >= 0, got {value!r}")

    def per_vm_hour(self, world: WorldSpec) -> dict[str, float]:
        """Pool -> USD per VM-hour in ``world``."""
        return {name: self.vm.get(name, self.spot if world.evictable(spec) else self.on_demand)
                for name, _, spec in world.pool_table()}

    def job_cost(self, row: Mapping[str, Any], per_vm_hour: Mapping[str, float]) -> float:
        """USD of one run (a :func:`simulators.metrics.run_row` record); equation in the module docstring."""
        vms = sum(seconds / 3600.0 * per_vm_hour[pool] for pool, seconds in row["vm_seconds"].items())
        remote = row["backup_bytes_remote"] / GB * self.remote_gb + row["backups_remote"] / 1000.0 * self.remote_1k_requests
        return float(vms + remote)


def money_summary(rows: Sequence[Mapping[str, Any]], world: WorldSpec, prices: Prices) -> dict[str, Any]:
    """Mean VM-hours, bytes copied (peer + remote) and USD per job over ``rows``, plus USD per pool-hour."""
    per_hour = prices.per_vm_hour(world)
    return {
        "vm_hours_mean": float(np.mean([sum(r["vm_seconds"].values()) / 3600.0 for r in rows])),
        "bytes_copied_mean": float(np.mean([r["backup_bytes_local"] + r["backup_bytes_remote"] for r in rows])),
        "cost_usd_mean": float(np.mean([prices.job_cost(r, per_hour) for r in rows])),
        "usd_per_vm_hour": per_hour,
    }
