"""The safety belt of paper §5: fall back to always-checkpoint when estimates prove wrong.

Rule: let :math:`t_1` be the job's elapsed time when the first re-computation started and
:math:`R` the re-computation spent since. Once :math:`R > \\beta\\, t_1`, every output is
backed up to remote from then on. Paper's bound (Fig. 5): with :math:`t_1 \\le t_2` (the
always-checkpoint job time) the job takes at most :math:`t_1 + \\beta t_1 + t_2 \\le 2 t_2`
for :math:`\\beta \\le 1` -- whatever the lifetime estimates were.

Units: :math:`R` is counted in *cluster seconds* -- the task-seconds spent re-running lost
map outputs divided by the cores alive now -- so it is comparable with the wall-clock
:math:`t_1` (a re-run of 400 task-seconds on 400 cores costs the job about one second).
"""

from __future__ import annotations

from trspark.engine.commands import SafetyBelt
from trspark.engine.state import JobState


class SafetyBeltMonitor:
    """Watches re-computation; fires once (it never switches back within a job).

    Parameters
    ----------
    beta : float
        The threshold ratio ``β`` (> 0; the paper requires ``β < 1`` for its 2x bound).
    enabled : bool
        ``spark.trspark.safetyBelt``; a disabled belt never fires.
    """

    def __init__(self, beta: float, enabled: bool = True) -> None:
        self.beta = beta
        self.enabled = enabled
        self.on = False
        self.fired_at: float | None = None
        self.reason = ""
        self.job_start: float | None = None

    def spent(self, state: JobState) -> float:
        """Re-computation spent so far, in cluster seconds."""
        return state.recompute_seconds / max(1, state.total_cores())

    def check(self, state: JobState) -> SafetyBelt | None:
        """Fire if the rule holds now; returns the command to send (once), else None."""
        if self.job_start is None and state.stages:
            self.job_start = min(s.submitted for s in state.stages.values())
        if self.on or not self.enabled or state.first_recompute_time is None or self.job_start is None:
            return None
        before = max(state.first_recompute_time - self.job_start, 0.0)
        spent = self.spent(state)
        if spent <= self.beta * before:
            return None
        self.on, self.fired_at = True, state.now
        self.reason = (
            f"re-computation {spent:.1f} s (cluster time) exceeded beta={self.beta:g} x {before:.1f} s "
            f"of job time before re-computation started; always-checkpoint from t={state.now:.1f} s"
        )
        return SafetyBelt(on=True, reason=self.reason)
