"""The scipy modules the cost model imports lazily, loaded on request.

The cost model imports ``scipy.optimize`` (the root search of the longest task) and
``scipy.integrate`` (quadrature for laws without a closed form) inside the functions that use
them, so a process that never needs them does not pay the ~0.5 s of CPU it takes to load them. A
long-lived process that will need them calls :func:`load` off its critical path, so its first
decision does not pay for the import.
"""

from __future__ import annotations

import importlib

#: The modules imported inside functions of this package.
LAZY_MODULES = ("scipy.optimize", "scipy.integrate")


def load() -> None:
    """Import :data:`LAZY_MODULES` (a no-op once they are loaded)."""
    for name in LAZY_MODULES:
        importlib.import_module(name)
