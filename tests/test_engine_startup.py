"""The policy engine starts without scipy: a live application waits for its Hello."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


@pytest.mark.parametrize(("knowledge", "stats"), [("notices", False), ("fitted", True)])
def test_after_hello_the_engine_loads_the_numerics_before_any_event(knowledge: str, stats: bool) -> None:
    """The first executor's events would otherwise import scipy's root search on the event path
    (seconds of wall time while executors start, against an ``engine.timeout`` of 2 s), and with
    knowledge ``fitted`` the first refit after evictions would import ``scipy.stats``."""
    from pathlib import Path

    from engine_session import engine_session
    from jvm_gateway import wait_for

    def maps(pid: int) -> str:
        return Path(f"/proc/{pid}/maps").read_text()

    conf = {"spark.trspark.mode": "tr", "spark.app.id": "t", "spark.trspark.lifetime.knowledge": knowledge}
    with engine_session(conf) as (shim, engine):
        assert shim.read()["type"] == "Hello"
        wanted = ("/scipy/optimize/", "/scipy/integrate/", *(("/scipy/stats/",) if stats else ()))
        wait_for(lambda: all(w in maps(engine.pid) for w in wanted), what=f"{wanted} loaded by the engine", timeout=60)
        assert ("/scipy/stats/" in maps(engine.pid)) == stats
