"""TR-Checkpointing's decision rule (paper §3.2, Algorithm 2), given the three costs.

The costs themselves come from ``cost_model`` (through :mod:`trspark.engine.tr.costs`); this
module only encodes the comparison, so it is testable on numbers worked by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trspark.engine.events import REMOTE

TARGETS = ("both", "local", "remote")


@dataclass(frozen=True)
class Costs:
    """Expected costs of one block (seconds of re-computation or backup work).

    ``c_bl`` is ``inf`` when there is no usable peer (or local backups are disabled), ``c_br``
    is ``inf`` when remote backups are disabled. A cost that certainly cannot change
    :func:`decide` or the lowest of the three may be left out (``inf``), and ``c_redo`` may be a
    lower bound of it that already exceeds a backup's cost. When no one reads the lowest of the
    three, ``c_br`` may be an upper bound of a copy to the store that certainly wins
    (:meth:`~trspark.engine.tr.costs.CostEstimator.costs`, ``exact_lowest``).
    """

    c_redo: float
    c_bl: float
    c_br: float
    peer: str | None


def decide(costs: Costs) -> str | None:
    """Algorithm 2: the backup target (a peer id or ``"remote"``), or None for no backup.

    .. code-block:: text

        if C_BL <= C_Redo:   local if C_BL <= C_BR else remote
        elif C_Redo >= C_BR: remote
        else:                none

    A block with no expected re-computation cost (``C_Redo <= 0``) is never backed up, and an
    infinite cost never wins a comparison (no peer, or the target is disabled).
    """
    c_redo, c_bl, c_br = costs.c_redo, costs.c_bl, costs.c_br
    if not c_redo > 0.0:
        return None
    local_ok = costs.peer is not None and math.isfinite(c_bl)
    if local_ok and c_bl <= c_redo:
        return costs.peer if c_bl <= c_br else REMOTE
    if math.isfinite(c_br) and c_redo >= c_br:
        return REMOTE
    return None
