"""``trspark simulate`` (one experiment, or ``simulate sweep``) and ``trspark whatif EVENTLOG``.

Bad input gives one ``Error: ...`` line naming the option and what is allowed, exit code 2.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from simulators.options import (
    Command,
    Group,
    build_config,
    build_prices,
    build_world,
    can_write_in,
    check_lifetime_options,
    check_notices_expected,
    fail,
    lifetime_options,
    picture_format_problem,
    positive,
    true_lifetime,
    weibull_shape,
    workload_options,
    world_options,
)
from simulators.report import money_options, print_table, public_summary, stdout_console, with_money
from simulators.splitting import apply_split, split_options


def _policy(name: str, option: str = "--policy") -> str:
    from simulators.runner import all_policy_names

    if name not in all_policy_names():
        fail(f"{option}={name!r} is not a policy; allowed: {', '.join(all_policy_names())}")
    return name


def _refuse_options_before(ctx: click.Context, subcommand: str, allowed: tuple[str, ...]) -> None:
    """Fail on an option given before ``subcommand``: it would set a single simulation, which does not run."""
    given = [param for param in ctx.command.params
             if param.name not in allowed and ctx.get_parameter_source(param.name or "") in
             (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)]
    if given:
        names = ", ".join(param.opts[0] for param in given)
        fail(f"{names} given before `{subcommand}`, where it would be ignored; put it after `{subcommand}`")


def _refuse_split_settings_without_split(ctx: click.Context, split: str) -> None:
    """``--split-fraction`` and ``--split-overhead`` only shape a split: without one they would be ignored."""
    given = [name for name in ("split_fraction", "split_overhead") if ctx.get_parameter_source(name) in
             (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)]
    if split == "none" and given:
        names = ", ".join("--" + name.replace("_", "-") for name in given)
        fail(f"{names} given without --split lifetime, where it would be ignored; add --split lifetime")


def _check_writable(*paths: tuple[str, Path | None]) -> None:
    """Fail now, not after the sweep has run, when an output's folder is missing or read-only, a
    picture's name has no format matplotlib writes, or two outputs share one path."""
    seen: dict[Path, str] = {}
    for option, path in paths:
        if path is None:
            continue
        folder = path.resolve().parent
        if not folder.is_dir() or not can_write_in(folder):
            fail(f"{option}={str(path)!r}: the folder {str(folder)!r} does not exist or cannot be written")
        if path.resolve() in seen:
            fail(f"{option}={str(path)!r} is also {seen[path.resolve()]}'s path; give each output its own")
        seen[path.resolve()] = option
        if option != "--out" and (problem := picture_format_problem(path)) is not None:
            fail(f"{option}={str(path)!r}: {problem}")


def _share_pools(shares: list[Any], vms: int) -> set[str]:
    """The pools some point of these on-demand shares has: ``spot`` below 100 %, ``ondemand`` above 0 % (a price for neither is an error)."""
    from simulators.sweep import on_demand_vms

    counts = [on_demand_vms(share, vms) for share in shares]
    return {name for name, present in (("spot", any(n < vms for n in counts)), ("ondemand", any(counts))) if present}


def _check_on_demand_shares(shares: list[float | None], vms: int) -> None:
    """Fail on a share that gives no on-demand VM; say which shares run as a rounded VM count."""
    from simulators.sweep import on_demand_vms, run_share

    for share in shares:
        if share is None:
            continue
        try:
            count = on_demand_vms(share, vms)
        except ValueError as exc:
            fail(f"--on-demand-shares: {exc}")
        if count * 100.0 != share * vms:
            click.echo(f"note: an on-demand share of {share:g} % of {vms} VMs runs as {count} VMs "
                       f"({run_share(share, vms):g} %)", err=True)


def _make_job(workload: str, scale: float, task_seconds: float, write_mb: float, seed: int,
              option: str = "--workload") -> Any:
    from simulators.workloads import WorkloadParams, make_workload, workload_names

    if workload not in workload_names():
        fail(f"{option}={workload!r} is not a workload; allowed: {', '.join(workload_names())}")
    for name, value in (("--scale", scale), ("--task-seconds", task_seconds), ("--write-mb", write_mb)):
        positive(name, value)
    return make_workload(workload, WorkloadParams(scale=scale, task_seconds=task_seconds, write_mb=write_mb), seed=seed)


def _progress_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def _run_progress(runs: int) -> Iterator[Callable[[str], Callable[[], None]]]:
    """A bar of the runs of every policy, on stderr while it is a terminal (stdout keeps only the table or
    the JSON), gone when they end; gives ``for_policy(name)``, the ``on_run`` of that policy's runs."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _progress_console()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as progress:
        bar = progress.add_task("runs", total=runs)

        def for_policy(name: str) -> Callable[[], None]:
            progress.update(bar, description=f"{name}: runs")
            return lambda: progress.update(bar, advance=1)

        yield for_policy


# -------------------------------------------------------------------------------------- commands
@click.group("simulate", cls=Group, invoke_without_command=True)
@click.option("--workload", "workloads", multiple=True, help="tpcds | bing | cortana | pagerank (one; sweep compares several).")
@click.option("--policy", "policies", multiple=True,
              help="A registered policy (never, always, tr, ...) or oracle; or several, comma-separated or repeated, "
                   "run on the same worlds (one column each; JSON: a list).")
@lifetime_options
@workload_options
@split_options
@world_options("simulate")
@money_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--rows", is_flag=True, help="JSON: include one record per run.")
@click.pass_context
def simulate(ctx: click.Context, /, workloads: tuple[str, ...], policies: tuple[str, ...], stability: float | None,
             lambda_: float | None, lifetime: str | None, fmt: str, rows: bool, **kw: Any) -> None:
    """Simulate a Spark DAG job on evictable VMs under a policy, R runs; or `simulate sweep`."""
    if ctx.invoked_subcommand is not None:
        _refuse_options_before(ctx, ctx.invoked_subcommand, allowed=("stability", "lambda_", "lifetime"))
        ctx.obj = {"stability": stability, "lambda_": lambda_, "lifetime": lifetime, **kw}
        return
    if not workloads or not policies:
        fail("simulate needs --workload and --policy (or a subcommand: sweep)")
    if len(workloads) > 1:
        fail(f"--workload is given {len(workloads)} times ({', '.join(workloads)}); give one, or compare "
             "workloads with `simulate sweep --workloads`")
    if rows and fmt != "json":
        fail("--rows adds one record per run to the JSON output; give it with --format json")
    workload = workloads[0]
    from simulators.runner import Experiment, run_experiment, stable_job_time

    _refuse_split_settings_without_split(ctx, kw["split"])
    world = build_world(kw)
    job = _make_job(workload, kw["scale"], kw["task_seconds"], kw["write_mb"], kw["seed"])
    world = true_lifetime(job, world, stability, lambda_, lifetime)
    prices = build_prices(kw, world.pool_names())
    config = build_config(kw["confs"]).with_options(lifetime=kw["believed_lifetime"] or world.default_belief())
    check_notices_expected(config, kw["notice"])
    names = _policy_names(policies)
    # A split job is measured against the unsplit job's stable time, so both slowdowns share a denominator.
    stable = None if kw["split"] == "none" else stable_job_time(job, world, config.period)
    job = apply_split(job, world, kw["split"], kw["split_fraction"], kw["split_overhead"])
    summaries = []
    with _run_progress(len(names) * kw["runs"]) as for_policy:
        for name in names:
            exp = Experiment(job, world, name, config, runs=kw["runs"], seed=kw["seed"])
            summary = run_experiment(exp, workers=kw["workers"], stable_time=stable, on_run=for_policy(name))
            summaries.append(with_money(summary, world, prices))
    if fmt == "json":
        out: Any = [public_summary(s, rows) for s in summaries]
        click.echo(json.dumps(out[0] if len(out) == 1 else out, indent=2, sort_keys=True))
    else:
        print_table(summaries, f"{workload}: {job.num_tasks} tasks, lifetime {world.label()}")


def _policy_names(values: tuple[str, ...]) -> list[str]:
    """The policies of every ``--policy`` (each one name or a comma-separated list), in order."""
    names = [_policy(name) for value in values for name in _split("--policy", value)]
    if len(set(names)) < len(names):
        fail(f"--policy names a policy twice: {', '.join(names)}")
    return names


def _split(option: str, text: str, cast: Callable[[str], Any] = str) -> list[Any]:
    items = [t.strip() for t in text.split(",")]
    if not any(items):
        fail(f"{option} is empty; give a comma-separated list")
    if not all(items):
        fail(f"{option}={text!r} has an empty item; give a comma-separated list")
    try:
        values = [cast(t) for t in items]
    except ValueError:
        fail(f"{option}={text!r}: expected a comma-separated list of numbers")
    if len(set(values)) < len(values):
        fail(f"{option}={text!r} names an item twice")
    return values


@simulate.command("sweep")
@click.option("--workloads", default="tpcds", show_default=True, help="Comma-separated workloads.")
@click.option("--policies", default="never,always,oracle", show_default=True, help="Comma-separated policies.")
@click.option("--stabilities", default="5,10,20,50,100,200,500,1000", show_default=True, help="Comma-separated stabilities.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="CSV file to write.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="PNG to draw.")
@click.option("--cost-plot", "cost_plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PNG of slowdown against $ per job, per policy and on-demand share.")
@click.option("--on-demand-shares", default=None,
              help="Comma-separated percentages of the VMs in a stable 'ondemand' pool, the rest in a 'spot' pool "
                   "whose lifetime the stabilities set, e.g. 0,10,25,50 (0 = the homogeneous world).")
@click.option("--shape", type=float, default=None,
              help="Weibull shape of the lifetimes the stabilities set, with the same mean (default: exponential).")
@click.option("--shapes", default=None,
              help="Several lifetime shapes, comma-separated, each swept in full: 'exp' (exponential) or a Weibull "
                   "shape with the stability's mean, e.g. exp,0.6. With --on-demand-shares they set the spot pool.")
@workload_options
@world_options("sweep")
@money_options
@click.pass_context
def sweep(ctx: click.Context, /, workloads: str, policies: str, stabilities: str, out: Path, plot_path: Path | None,
          cost_plot_path: Path | None, on_demand_shares: str | None, shape: float | None, shapes: str | None,
          **kw: Any) -> None:
    """Slowdown vs stability for workloads x policies (CSV; Figure-7-style PNG)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from simulators import sweep as sweeping

    parent = dict(ctx.obj or {})
    if any(parent.get(k) is not None for k in ("lambda_", "lifetime", "stability")):
        fail("simulate sweep sets lifetimes from --stabilities; drop --stability/--lambda/--lifetime")
    names = _split("--workloads", workloads)
    pols = [_policy(p, "--policies") for p in _split("--policies", policies)]
    stabs = _split("--stabilities", stabilities, float)
    for s in stabs:
        positive("--stabilities", s)
    weibull_shape("--shape", shape)
    shares = [None] if on_demand_shares is None else _split("--on-demand-shares", on_demand_shares, float)
    if any(share is not None and not 0.0 <= share <= 100.0 for share in shares):
        fail(f"--on-demand-shares={on_demand_shares!r} is not valid; allowed: percentages in [0, 100]")
    world = build_world(kw)
    if world.pools and on_demand_shares is not None:
        fail("give either --pool or --on-demand-shares, not both")
    _check_on_demand_shares(shares, world.vms)
    if world.pools and all(p.lifetime is not None for p in world.pools):
        fail("--stabilities set the lifetime of the pools given without @SPEC, and every --pool has one; "
             "give e.g. --pool spot=8 without @SPEC")
    # Shares of on-demand VMs make the pools "ondemand" and "spot" (sweep.with_on_demand_share); the 0 % point's
    # VMs are all spot VMs and pay the spot pool's price.
    pools = world.pool_names() if on_demand_shares is None else _share_pools(shares, world.vms)
    prices = build_prices(kw, pools)
    config = build_config(kw["confs"])
    check_notices_expected(config, kw["notice"])
    _check_writable(("--out", out), ("--plot", plot_path), ("--cost-plot", cost_plot_path))
    jobs = {w: _make_job(w, kw["scale"], kw["task_seconds"], kw["write_mb"], kw["seed"], "--workloads") for w in names}
    points = sweeping.sweep_points(names, pols, stabs, shares, _shapes(shape, shapes))
    console = stdout_console()
    started = time.monotonic()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # A log file or a pipe would show a live bar only at the end: there, one line per point.
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        bar = progress.add_task("sweep", total=len(points))
        done: list[dict[str, Any]] = []

        settings = " ".join(item.strip() for item in kw["confs"])

        def advance(point: Any, row: dict[str, Any]) -> None:
            row["settings"] = settings  # the row run_sweep returns: every row passes through here
            done.append(row)
            sweeping.write_csv(done, out)  # the rows so far: a sweep cut short keeps what it measured
            share = "" if row["on_demand_share"] == "" else f" {row['on_demand_share']:g}% od"
            form = "" if point.shape is None else f" k={point.shape:g}"
            failed = f", {row['failed_runs']} of {row['runs']} runs failed" if row["failed_runs"] else ""
            label = f"{point.workload} {point.policy} S={point.stability:g}{share}{form}: {row['slowdown_mean']:.2f}x{failed}"
            progress.update(bar, advance=1, description=label)
            if not console.is_terminal:
                minutes, seconds = divmod(int(time.monotonic() - started), 60)
                click.echo(f"[{minutes}:{seconds:02d}] {label} ({len(done)}/{len(points)})")

        rows = sweeping.run_sweep(jobs, points, world, config, kw["runs"], kw["seed"], kw["workers"],
                                  believed_lifetime=kw["believed_lifetime"], on_point=advance, prices=prices, shape=shape)
    sweeping.write_csv(rows, out)
    click.echo(f"wrote {out} ({len(rows)} rows)")
    if plot_path is not None:
        sweeping.plot(rows, plot_path)
        click.echo(f"wrote {plot_path}")
    if cost_plot_path is not None:
        sweeping.plot_cost(rows, cost_plot_path)
        click.echo(f"wrote {cost_plot_path}")


def _shapes(shape: float | None, shapes: str | None) -> list[float | None]:
    """--shapes as a list (None: exponential), or the single --shape."""
    if shapes is None:
        return [shape]
    if shape is not None:
        fail("give either --shape or --shapes, not both")
    out: list[float | None] = []
    for text in _split("--shapes", shapes):
        try:
            value = None if text == "exp" else float(text)
        except ValueError:
            fail(f"--shapes={shapes!r}: {text!r} is not 'exp' or a number > 0")
        weibull_shape("--shapes", value)
        out.append(value)
    return out


@click.command("whatif", cls=Command)
@click.argument("eventlog", type=click.Path(path_type=Path))
@click.option("--policy", "policies", multiple=True,
              help="Policies to compare, repeated or comma-separated (default never, always, oracle).")
@lifetime_options
@world_options("whatif")
@money_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def whatif(eventlog: Path, policies: tuple[str, ...], stability: float | None, lambda_: float | None,
           lifetime: str | None, fmt: str, **kw: Any) -> None:
    """Replay your own Spark event log under evictions, per policy."""
    from simulators.eventlog import EventLogError, load_eventlog
    from simulators.runner import Experiment, run_experiment

    names = _policy_names(policies or ("never,always,oracle",))
    settings = build_config(kw["confs"])
    check_notices_expected(settings, kw["notice"])
    # every option is checked before a long log is read: the pools come from --pool, not from the log
    probe = build_world(kw, vms=1, cores=1)
    check_lifetime_options(probe, stability, lambda_, lifetime)
    prices = build_prices(kw, probe.pool_names())
    try:
        replay = load_eventlog(eventlog)
    except EventLogError as exc:
        fail(str(exc))
    world = build_world(kw, vms=replay.executors, cores=replay.cores)
    world = true_lifetime(replay.job, world, stability, lambda_, lifetime)
    config = settings.with_options(lifetime=kw["believed_lifetime"] or world.default_belief())
    summaries = []
    with _run_progress(len(names) * kw["runs"]) as for_policy:
        for name in names:
            exp = Experiment(replay.job, world, name, config, runs=kw["runs"], seed=kw["seed"])
            summaries.append(with_money(run_experiment(exp, workers=kw["workers"], on_run=for_policy(name)), world, prices))
    if fmt == "json":
        click.echo(json.dumps({"eventlog": str(eventlog), "recorded_job_time": replay.recorded_seconds,
                               "results": [public_summary(s, False) for s in summaries]}, indent=2, sort_keys=True))
    else:
        print_table(summaries, f"{eventlog.name}: {replay.job.num_tasks} tasks on {world.vms}x{world.cores} cores, "
                    f"recorded {replay.recorded_seconds:.2f} s, lifetime {world.label()}")
