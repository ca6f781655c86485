"""A test that needs a tool this machine may lack (Chromium, Azurite, cgroups, a tmpfs mount)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip the calling test for lack of a tool, or fail it in CI (``CI=true``): ``make test``
    installs every tool there, so a skip would hide a test that never ran."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)
