"""A termination notice: the executor's death is now known to come by a fixed deadline."""

from __future__ import annotations

from .base import LifetimeModel, check_positive
from .capped import Capped


class Notice(Capped):
    """Base lifetime law up to a notice's deadline, certain death at it.

    A provider's notice (AWS: 2 min, GCP: 30 s, Azure: 30 s) says the executor goes away at age
    ``deadline_age`` at the latest; it may still die earlier by the base law. So

    .. math::

        S(t) = S_0(t)\\,\\mathbb{1}[t < d], \\qquad
        P(T - \\tau \\le d - \\tau \\mid T > \\tau) = 1, \\qquad
        P(a < T - \\tau \\le b \\mid T > \\tau) = P_0(a < T_0 - \\tau \\le b \\mid T_0 > \\tau)
        \\text{ for } b < d - \\tau,

    where :math:`d` is ``deadline_age``. The remaining mass :math:`S_0(d)/S_0(\\tau)` is an atom at
    :math:`d - \\tau` from now, which :meth:`cell_fail_probs` puts in the cell that holds it.

    Parameters
    ----------
    base : LifetimeModel
        The lifetime law the engine used before the notice.
    deadline_age : float
        Age in seconds (> 0) at which the executor is taken away.
    """

    name = "notice"

    def __init__(self, base: LifetimeModel, deadline_age: float) -> None:
        super().__init__(base, check_positive(self.name, "deadline_age", deadline_age))

    @property
    def deadline_age(self) -> float:
        """Age in seconds at which the executor is taken away."""
        return self.cap_

    def spec(self) -> str:
        return f"notice:deadline_age={self.cap_!r}|{self.base_.spec()}"


def with_notice(model: LifetimeModel, age: float, notice_seconds: float) -> Notice:
    """The lifetime law of an executor of age ``age`` (s) that got a notice of ``notice_seconds`` (s).

    Returns ``Notice(model, age + notice_seconds)``: its remaining lifetime is at most
    ``notice_seconds``.
    """
    if not (float(age) >= 0.0):
        raise ValueError(f"notice: 'age' must be a number >= 0 seconds, got {age!r}")
    return Notice(model, float(age) + check_positive("notice", "notice_seconds", notice_seconds))
