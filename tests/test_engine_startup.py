"""The policy engine starts without scipy: a live application waits for its Hello."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import trspark.live.engine_process
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
make_policy("tr", TRConfig())
print(sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy.")))
"""


def test_the_engine_process_and_the_default_policy_import_no_scipy() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout


def test_a_weibull_lifetime_still_loads_its_model_on_first_use() -> None:
    probe = "from cost_model.lifetimes import from_spec, Weibull; m = from_spec('weibull:shape=0.6,scale=30'); " \
            "print(type(m) is Weibull, round(float(m.mean()), 3))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["True", "45.137"]
