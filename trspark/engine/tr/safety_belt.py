"""The safety belt of paper §5: fall back to always-checkpoint when estimates prove wrong.

Rule: let :math:`t_1` be the job's elapsed time when the first re-computation started and
:math:`R` the re-computation spent since. Once :math:`R > \\beta\\, t_1`, every output is
backed up to remote from then on. Paper's bound (Fig. 5): with :math:`t_1 \\le t_2` (the
always-checkpoint job time) the job takes at most :math:`t_1 + \\beta t_1 + t_2 \\le 2 t_2`
for :math:`\\beta \\le 1` -- whatever the lifetime estimates were.

Units: :math:`R` is counted in *cluster seconds* -- the task-seconds spent re-running lost
map outputs divided by the cores alive now -- so it is comparable with the wall-clock
:math:`t_1` (a re-run of 400 task-seconds on 400 cores costs the job about one second).

Per job: the belt measures one job at a time. When a job is submitted while no other job of the
application runs, the measurement starts again: :math:`t_1` counts from that job's first stage,
:math:`R` only counts re-computation after its submission, and a belt that fired is released
(``SafetyBelt(on=False)``). Jobs that overlap are measured together, from the first one's start.
"""

from __future__ import annotations

from trspark.engine.commands import SafetyBelt
from trspark.engine.state import JobState


class SafetyBeltMonitor:
    """Watches re-computation; fires at most once per job (it never switches back within a job).

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
        # The measured job's submission (None: the application's start), the re-computation
        # counted before it (task-seconds), and when its own first re-computation started.
        self._since: float | None = None
        self._baseline = 0.0
        self._first_recompute: float | None = None

    def spent(self, state: JobState) -> float:
        """Re-computation spent in the measured job so far, in cluster seconds."""
        cores = state.total_cores()
        return (state.recompute_seconds - self._baseline) / (cores if cores > 1 else 1)  # max(1, cores), inlined

    def job_submitted(self, state: JobState) -> SafetyBelt | None:
        """A job was submitted (``state`` has applied it): measure it alone if no other job runs.

        Returns ``SafetyBelt(on=False)`` when that releases a belt that had fired, else None.
        """
        if len(state.job_stages) > 1:
            return None  # another job still runs: measured together with it
        was_on = self.on
        self._since, self._baseline, self._first_recompute = state.now, state.recompute_seconds, None
        self.job_start, self.on, self.fired_at, self.reason = None, False, None, ""
        return SafetyBelt(on=False, reason=f"new job at t={state.now:.1f} s: measured afresh") if was_on else None

    def check(self, state: JobState) -> SafetyBelt | None:
        """Fire if the rule holds now; returns the command to send (once per job), else None.

        Called after every successful task end, so the first re-run counted since the job's
        submission is the one that just ended: it started at ``now - its duration``.
        """
        since = self._since
        if self.job_start is None:
            self.job_start = min((s.submitted for s in state.stages.values() if since is None or s.submitted >= since),
                                 default=None)
        if self._first_recompute is None and state.recompute_seconds > self._baseline:
            self._first_recompute = (state.first_recompute_time if since is None
                                     else state.now - (state.recompute_seconds - self._baseline))
        if self.on or not self.enabled or self._first_recompute is None or self.job_start is None:
            return None
        before = max(self._first_recompute - self.job_start, 0.0)
        spent = self.spent(state)
        if spent <= self.beta * before:
            return None
        self.on, self.fired_at = True, state.now
        self.reason = (
            f"re-computation {spent:.1f} s (cluster time) exceeded beta={self.beta:g} x {before:.1f} s "
            f"of job time before re-computation started; always-checkpoint from t={state.now:.1f} s"
        )
        return SafetyBelt(on=True, reason=self.reason)
