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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jobs.harness.notice_endpoints import NoticeServer

#: Pool name -> what ``--pool NAME=COUNT@SPEC`` must say: the imitated metadata names only these two.
POOL_KINDS = {"ondemand": "stable", "spot": "spot"}


def on_demand_slots(pools: tuple[tuple[str, int], ...]) -> int:
    """Executor slots of the ``ondemand`` pool (0 without pools)."""
    return dict(pools).get("ondemand", 0)


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
