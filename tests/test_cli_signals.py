"""``trspark`` stopped with SIGTERM unwinds like Ctrl-C: its ``finally`` blocks (stop Spark, remove cgroups) run."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from jvm_gateway import wait_for

CHILD = """
import sys, time
from pathlib import Path
from trspark.cli import stop_cleanly_on_sigterm

stop_cleanly_on_sigterm()
marker = Path(sys.argv[1])
try:
    marker.write_text("running")
    while True:
        time.sleep(0.05)
finally:
    marker.write_text("cleaned up")
"""


def test_sigterm_runs_the_cleanup_of_a_running_command(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(marker)], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: marker.exists() and marker.read_text() == "running", what="the child to start")
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=20)
    finally:
        child.kill()
    assert marker.read_text() == "cleaned up"
    assert child.returncode != 0 and "stopped by signal SIGTERM" in err
