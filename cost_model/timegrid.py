"""The time grid on which cascading re-computation costs are tabulated (seconds from *now*)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from .lifetimes.base import FloatArray, as_float_array

#: Extra geometric cells at most appended when a window reaches past the grid's horizon.
_MAX_EXTENSION_CELLS = 64


@dataclass(frozen=True)
class TimeGrid:
    """Cell edges :math:`0 = g_0 < g_1 < \\dots < g_G` in seconds from now.

    Cell *i* is the failure window :math:`(g_i, g_{i+1}]` (the lifetime models' convention: a
    window is open on the left). Costs that depend on *when* an executor fails, such as the
    cascading re-computation cost ``Er(t, k)``, are tabulated at the edges and integrated against
    the exact failure mass of each cell (``LifetimeModel.cell_fail_probs``).

    Use :meth:`geometric` (fine cells near *now*, where failures matter most, coarse ones far
    out) or :meth:`from_edges`.
    """

    edges: FloatArray
    #: Growth factor of the last cell width, used to extend the grid past its horizon.
    ratio: float = field(default=2.0)

    def __post_init__(self) -> None:
        edges = as_float_array(self.edges)
        if edges.ndim != 1 or edges.size < 2:
            raise ValueError(f"TimeGrid: 'edges' must be a 1-D array of >= 2 times, got shape {edges.shape}")
        if edges[0] != 0.0 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0.0):
            raise ValueError("TimeGrid: 'edges' must start at 0 and be finite and strictly increasing (seconds)")
        edges = edges.copy()
        edges.setflags(write=False)
        object.__setattr__(self, "edges", edges)

    @classmethod
    def geometric(cls, horizon: float, size: int = 64, first: float | None = None) -> TimeGrid:
        """``size`` cells: ``[0, first]`` then geometrically growing cells up to ``horizon``.

        .. math:: g_0 = 0, \\qquad g_i = g_1\\, r^{i-1}, \\qquad r = (H / g_1)^{1/(G-1)}

        Parameters
        ----------
        horizon : float
            Last edge :math:`H` in seconds (> 0); should cover the longest consumption time
            ``T_max`` and backup time asked for (beyond it ``Er`` is held constant).
        size : int
            Number of cells :math:`G` (>= 2).
        first : float, optional
            First edge :math:`g_1` in seconds, ``0 < first < horizon``; default ``horizon / 1e4``.
        """
        if not (math.isfinite(horizon) and horizon > 0.0):
            raise ValueError(f"TimeGrid: 'horizon' must be a finite number > 0 seconds, got {horizon!r}")
        if not (isinstance(size, int) and size >= 2):
            raise ValueError(f"TimeGrid: 'size' must be an integer >= 2, got {size!r}")
        g1 = horizon / 1e4 if first is None else float(first)
        if not (0.0 < g1 < horizon):
            raise ValueError(f"TimeGrid: 'first' must lie in (0, horizon={horizon!r}) seconds, got {first!r}")
        edges = np.concatenate(([0.0], np.geomspace(g1, horizon, size)))
        return cls(edges, ratio=(horizon / g1) ** (1.0 / (size - 1)))

    @classmethod
    def from_edges(cls, edges: ArrayLike) -> TimeGrid:
        """A grid with the given edges (seconds; start at 0, strictly increasing)."""
        edges_a = as_float_array(edges)
        # Past the horizon, keep growing cells like the last two edges did (at least x1.5).
        last_ratio = float(edges_a[-1] / edges_a[-2]) if edges_a.ndim == 1 and edges_a.size >= 3 and edges_a[-2] > 0.0 else 2.0
        return cls(edges_a, ratio=max(last_ratio, 1.5))

    @property
    def horizon(self) -> float:
        """Last edge :math:`g_G` in seconds."""
        return float(self.edges[-1])

    @property
    def size(self) -> int:
        """Number of cells :math:`G`."""
        return int(self.edges.size - 1)

    def edges_to(self, end: float) -> FloatArray:
        """Edges of the window ``[0, end]``: the grid clipped at ``end``, extended past the horizon.

        Cells that the clip makes empty are kept (zero width, zero failure mass), so the result
        always has ``G + 1 + n_ext`` edges and aligns with :attr:`edges` on its first ``G + 1``.
        Past the horizon ``n_ext`` geometric cells (growth :attr:`ratio`, at most 64) reach
        ``end``; ``n_ext = 0`` when ``end <= horizon``.
        """
        if not (math.isfinite(end) and end >= 0.0):
            raise ValueError(f"TimeGrid: window end must be a finite number >= 0 seconds, got {end!r}")
        clipped = np.minimum(self.edges, end)
        if end <= self.horizon:
            return clipped
        n_ext = min(_MAX_EXTENSION_CELLS, max(1, math.ceil(math.log(end / self.horizon) / math.log(self.ratio))))
        return np.concatenate((clipped, np.geomspace(self.horizon, end, n_ext + 1)[1:]))
