"""Two-pool clusters for the benchmark: on-demand executor slots that are never killed, spot ones
that are.

On a ``local-cluster`` every executor shares the driver's environment, so ``TRSPARK_POOL`` cannot
tell them apart. Each executor therefore asks its own imitated AWS instance metadata
(:class:`jobs.harness.notice_endpoints.NoticeServer`, base URL ``<server>/vm-{executorId}``):
``instance-life-cycle`` answers ``on-demand`` for the first ``ondemand`` slots (executor ids
``0`` .. ``k-1``; never killed, they keep their ids) and ``spot`` for the rest and for every
replacement. The eviction injector spares the on-demand ids, and kill schedules are drawn over the
spot slots only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from jobs.harness.notice_endpoints import NoticeServer

if TYPE_CHECKING:
    from jobs.tpcds.results import RunRow

#: Pool name -> what ``--pool NAME=COUNT@SPEC`` must say: the imitated metadata names only these two.
POOL_KINDS = {"ondemand": "stable", "spot": "spot"}


def on_demand_slots(pools: tuple[tuple[str, int], ...]) -> int:
    """Executor slots of the ``ondemand`` pool (0 without pools)."""
    return dict(pools).get("ondemand", 0)


def executor_count(pools: tuple[tuple[str, int], ...]) -> int:
    """Executor slots over all pools."""
    return sum(count for _, count in pools)


def on_demand_ids(pools: tuple[tuple[str, int], ...]) -> frozenset[str]:
    """Ids of the on-demand executors: a local-cluster numbers its first executors 0, 1, ..."""
    return frozenset(str(i) for i in range(on_demand_slots(pools)))


def spare(pools: tuple[tuple[str, int], ...]) -> Callable[[str], bool] | None:
    """The injector's ``spare`` (on-demand executors are never killed); None without pools."""
    ids = on_demand_ids(pools)
    return (lambda executor_id: executor_id in ids) if pools else None


@contextmanager
def metadata_server(pools: tuple[tuple[str, int], ...]) -> Iterator[str | None]:
    """Per-executor imitated AWS metadata for the session, yielding its base URL (None without pools)."""
    if not pools:
        yield None
        return
    with NoticeServer() as server:
        for executor_id in on_demand_ids(pools):
            server.set_pool("ondemand", vm=f"vm-{executor_id}")
        yield server.url


def plugin_options(url: str | None, spot_lifetime: str | None) -> dict[str, Any]:
    """trspark options that make each executor read its pool at ``url`` and give each pool its
    lifetime: ``ondemand`` stable, ``spot`` the kills' model (when known)."""
    if url is None:
        return {}
    lifetimes = {"ondemand": "stable", **({"spot": spot_lifetime} if spot_lifetime else {})}
    return {"notice_source": "aws", "notice_url": url + "/vm-{executorId}", "pool_lifetimes": lifetimes}


def run_cost_usd(row: RunRow, pools: tuple[tuple[str, int], ...]) -> float:
    """USD of one run on a two-pool local cluster, each executor priced as one VM of its pool.

    .. math::

        \\$ = \\frac{T}{3600}\\,n_\\text{od}\\,c_\\text{od}
            + \\frac{n_\\text{spot}\\,T - L}{3600}\\,c_\\text{spot}
            + \\frac{n_\\text{remote}}{1000}\\,c_\\text{req}

    with :math:`T` the run's seconds, :math:`L` its executor-seconds without a registered executor
    (only spot executors are killed, so every lost second is a spot second nobody pays for),
    :math:`n_\\text{remote}` its copies to the remote store (one PUT each) and the prices of
    :mod:`simulators.pricing` (writes into the store cost nothing per GB there).
    """
    from simulators.pricing import ON_DEMAND_USD_PER_HOUR, REMOTE_USD_PER_1K_REQUESTS, SPOT_USD_PER_HOUR

    on_demand = on_demand_slots(pools)
    spot = executor_count(pools) - on_demand
    lost = row.capacity_lost_seconds if math.isfinite(row.capacity_lost_seconds) else 0.0
    return (row.seconds * on_demand * ON_DEMAND_USD_PER_HOUR
            + max(spot * row.seconds - lost, 0.0) * SPOT_USD_PER_HOUR) / 3600 \
        + row.backups_remote * REMOTE_USD_PER_1K_REQUESTS / 1000
