"""The ``trspark`` command line.

Each command lives in the module that owns its feature and is imported only when invoked, so
``trspark --help`` stays fast and one broken feature cannot break the others' commands.
"""

from __future__ import annotations

import importlib
import signal
import threading
from types import FrameType

import click

# command name -> "module:attribute" of a click.Command
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("jobs.demo:demo", "Run the main job: TPC-DS and a long-lineage job on executors that get killed, per policy."),
    "simulate": ("simulators.cli:simulate", "Simulate Spark DAG jobs on evictable VMs under a policy (and sweeps)."),
    "whatif": ("simulators.cli:whatif", "Replay your own Spark event log under evictions, per policy."),
    "bench": ("jobs.tpcds.cli:bench", "Benchmarks on real Spark (TPC-DS on transient executors)."),
    "report": ("trspark.reporting.cli:report", "Summarise what trspark did from a Spark event log (text, PNG, HTML)."),
    "jar-path": ("trspark.live.shim:jar_path_command", "Print the path of the plugin jar (building it if needed)."),
    "build-shim": ("trspark.live.shim:build_shim_command", "Compile the Scala plugin with the compiler shipped in pyspark."),
    "gc": ("trspark.live.shim:gc_command", "Delete remote backups left behind by crashed applications."),
    "conf": ("trspark.cli:conf_command", "List every spark.trspark.* setting with its default and allowed values."),
    "size": ("trspark.live.sizing:size_command", "The longest task the lifetimes allow, and the Spark SQL partition settings it gives."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        target, _ = COMMANDS[cmd_name]
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
            command = getattr(module, attr)
        except (ImportError, AttributeError) as exc:
            raise click.ClickException(f"command {cmd_name!r} is not available: {exc}") from exc
        return command  # type: ignore[no-any-return]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the static help so listing commands imports nothing heavy.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in sorted(COMMANDS)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trspark")
def cli() -> None:
    """trspark: Apache Spark on transient (spot / preemptible) executors."""


@click.command("conf")
@click.option("--markdown", is_flag=True, help="Print the table in Markdown (as in docs/configure.md).")
def conf_command(markdown: bool) -> None:
    """List every spark.trspark.* setting with its default and allowed values."""
    from trspark.keys import (
        KEYS,
        POOL_KEY_PREFIX,
        POOL_KEY_SUFFIX,
        POOL_LIFETIME_ALLOWED,
        POOL_LIFETIME_DOC,
        markdown_table,
        spark_text,
    )

    if markdown:
        click.echo(markdown_table())
        return
    for key in KEYS:
        click.echo(f"{key.full} = {spark_text(key.default)}\n    allowed: {key.allowed}\n    {key.doc}")
        if key.name == "pool":  # one key per pool, as in the table
            click.echo(f"{POOL_KEY_PREFIX}<name>{POOL_KEY_SUFFIX} (unset)\n    allowed: {POOL_LIFETIME_ALLOWED}\n"
                       f"    {POOL_LIFETIME_DOC}")


def _stop_like_ctrl_c(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def stop_cleanly_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C, so ``finally`` blocks still stop Spark and remove cgroups.

    ``kill`` (and CI runners, ``timeout``) send SIGTERM, whose default action ends Python at
    once: a benchmark's local-cluster JVMs and its executors' CPU-cap cgroups would be left
    behind. Only the main thread can install handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_like_ctrl_c)


def main() -> None:
    stop_cleanly_on_sigterm()
    cli(prog_name="trspark")


if __name__ == "__main__":
    main()
