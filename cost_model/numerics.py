"""The scipy modules the cost model imports lazily, loaded on request.

The cost model imports ``scipy.optimize`` (the root search of the longest task),
``scipy.integrate`` (quadrature for laws without a closed form) and ``scipy.stats`` (fitting an
empirical law) inside the functions that use them, so a process that never needs them does not
pay the 0.5-1.3 s of CPU it takes to load them. A long-lived process that will need them calls
:func:`load` off its critical path, so the decision that first needs one does not pay for it.
"""

from __future__ import annotations

import importlib

#: Imported inside functions of this package: the task-size root search and quadrature.
LAZY_MODULES = ("scipy.optimize", "scipy.integrate")
#: Imported by :class:`~cost_model.lifetimes.Empirical`, the law fitted to observed lifetimes.
FIT_MODULES = ("scipy.stats",)


def load(*, fits: bool = False) -> None:
    """Import :data:`LAZY_MODULES`, and :data:`FIT_MODULES` when ``fits`` (a no-op once loaded)."""
    for name in (*LAZY_MODULES, *FIT_MODULES) if fits else LAZY_MODULES:
        importlib.import_module(name)
