"""``trspark simulate`` / ``simulate sweep``: outputs, and one-line errors with exit code 2."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulators.options import LIVE_ONLY_SETTINGS
from trspark.cli import cli

ROOT = Path(__file__).resolve().parents[1]

SMALL = ["--scale", "0.02", "--vms", "4", "--cores", "2", "--runs", "3", "--workers", "1", "--seed", "2"]


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_simulate_json_has_the_promised_keys() -> None:
    code, out = invoke("simulate", "--workload", "cortana", "--policy", "oracle", "--stability", "20", *SMALL,
                       "--format", "json")
    assert code == 0, out
    summary = json.loads(out)
    for key in ("slowdown_mean", "slowdown_p95", "recomputed_tasks_mean", "backups_local_mean",
                "backups_remote_mean", "failed_runs", "runs", "slowdown_ci95", "stable_job_time"):
        assert key in summary
    assert summary["runs"] == 3 and summary["policy"] == "oracle"
    assert summary["lifetime"].startswith("exponential:mean=")


def test_policies_repeated_or_comma_separated_run_alike_on_the_same_worlds() -> None:
    repeated = invoke("simulate", "--workload", "bing", "--policy", "never", "--policy", "always", *SMALL, "--format", "json")
    listed = invoke("simulate", "--workload", "bing", "--policy", "never,always", *SMALL, "--format", "json")
    assert repeated[0] == listed[0] == 0, repeated[1]
    summaries = json.loads(repeated[1])
    assert [s["policy"] for s in summaries] == ["never", "always"] and summaries == json.loads(listed[1])


def test_simulate_table_and_lambda_and_believed_lifetime() -> None:
    code, out = invoke("simulate", "--workload", "bing", "--policy", "always", "--lambda", "0.05",
                       "--believed-lifetime", "exponential:mean=100", *SMALL)
    assert code == 0, out
    assert "slowdown (mean)" in out and "exponential:rate=0.05" in out


def test_the_table_title_rounds_the_lifetime_that_json_keeps_whole() -> None:
    args = ("simulate", "--workload", "bing", "--policy", "never", "--stability", "7", *SMALL)
    code, text = invoke(*args)
    assert code == 0, text
    text = " ".join(text.split())  # rich wraps a title wider than its table
    spec = json.loads(invoke(*args, "--format", "json")[1])["lifetime"]
    mean = float(spec.removeprefix("exponential:mean="))
    assert len(spec) > len(f"exponential:mean={mean:.4g}")  # there is something to round
    assert f"lifetime exponential:mean={mean:.4g}" in text and spec not in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--workload", "nope", "--policy", "never"], "--workload='nope'"),
        (["--workload", "tpcds", "--policy", "bogus"], "--policy='bogus'"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "pool.spot.lifetime=stable"], "use that option"),
        (["--workload", "tpcds", "--policy", "tr", "--remote-gb-price", "-1"], "--remote-gb-price=-1.0 is not valid"),
        (["sweep", "--workloads", "nope", "--out", "x.csv"], "--workloads='nope'"),
        (["sweep", "--policies", "bogus", "--out", "x.csv"], "--policies='bogus'"),
        (["sweep", "--policies", "tr,,never", "--out", "x.csv"], "has an empty item"),
        (["sweep", "--stabilities", "5,5.0", "--out", "x.csv"], "names an item twice"),
        (["sweep", "--out", "x.csv", "--plot", "x.xyz"], "no picture format named by its extension"),
        (["sweep", "--out", "x.csv", "--plot", "x.csv"], "is also --out's path"),
        (["sweep", "--out", "x.csv", "--plot", "p.png", "--cost-plot", "p.png"], "is also --plot's path"),
        (["sweep", "--out", "x.csv", "--conf", "notice.expected=true"], "add --notice SECONDS"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "notice.expected=true"], "add --notice SECONDS"),
        (["--workload", "tpcds", "--policy", "never", "--price", "spto=0.1"], "no pool 'spto' in this world"),
        (["--workload", "tpcds", "--policy", "never", "--stability", "5", "--lambda", "1"], "only one of"),
        (["--workload", "tpcds", "--policy", "never", "--lifetime", "weird:x=1"], "--lifetime"),
        (["--workload", "tpcds", "--policy", "never", "--believed-lifetime", "exponential:mean=-1"], "--believed-lifetime"),
        (["--workload", "tpcds", "--policy", "never", "--remote-cap", "fast"], "--remote-cap"),
        (["--workload", "tpcds", "--policy", "never", "--runs", "abc"], "--runs"),
        (["--workload", "tpcds", "--policy", "never", "--runs", "0"], "--runs"),
        (["--workload", "tpcds", "--policy", "never", "--stability", "-3"], "--stability"),
        (["--workload", "tpcds", "--policy", "never", "--conf", "beta=-1"], "spark.trspark.beta"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "notice_expected=true", "--conf",
          "knowledge=indeterministic"], "notice.expected=true needs"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "backup.latency=1"],
         "--conf backup.latency: the simulator sets this from --backup-latency"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "spark.trspark.bandwidth.local=1m"], "from --local-bw"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "lifetime=exponential:mean=5"], "from --believed-lifetime"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "mode=never"], "from --policy"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "notice.source=aws"],
         "--conf notice.source: only a live Spark application reads this"),
        (["--workload", "tpcds", "--policy", "never", "--knowledge", "psychic"], "--knowledge"),
        (["--workload", "tpcds", "--policy", "never", "--max-slowdown", "inf"],
         "--max-slowdown=inf is not valid; allowed: a finite number > 1"),
        (["--workload", "tpcds", "--policy", "never", "--max-slowdown", "0"],
         "--max-slowdown=0.0 is not valid; allowed: a finite number > 1"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "remote.path=/mnt/x"],
         "--conf remote.path: only a live Spark application reads this"),
        (["--workload", "tpcds", "--policy", "tr", "--conf", "lifetime=weird"],
         "--conf lifetime: the simulator sets this from --believed-lifetime"),
        (["--policy", "never"], "--workload"),
        (["--workload", "bing", "--workload", "tpcds", "--policy", "never"],
         "--workload is given 2 times (bing, tpcds); give one, or compare workloads with `simulate sweep --workloads`"),
        (["--workload", "tpcds", "--policy", "never,tr", "--policy", "tr"], "--policy names a policy twice: never, tr, tr"),
        (["--workload", "tpcds", "--policy", "never", "--rows"], "--rows adds one record per run to the JSON output"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(args: list[str], fragment: str) -> None:
    code, out = invoke("simulate", *args)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], out


def test_sweep_writes_csv_and_plot(tmp_path: Path) -> None:
    out_csv, out_png = tmp_path / "s.csv", tmp_path / "s.png"
    code, out = invoke("simulate", "sweep", "--workloads", "bing,pagerank", "--policies", "never,oracle",
                       "--stabilities", "20,200", *SMALL, "--out", str(out_csv), "--plot", str(out_png))
    assert code == 0, out
    with out_csv.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 2
    assert {(r["workload"], r["policy"], float(r["stability"])) for r in rows} == {
        (w, p, s) for w in ("bing", "pagerank") for p in ("never", "oracle") for s in (20.0, 200.0)
    }
    assert all(float(r["slowdown_mean"]) >= 1.0 for r in rows)
    assert {r["notice"] for r in rows} == {""}  # no --notice
    # Not a terminal: one progress line per point, as it finishes.
    progress = [line for line in out.splitlines()
                if re.fullmatch(r"\[\d+:\d\d\] \w+ \w+ S=\d+: [\d.]+x(, \d of 3 runs failed)? \(\d/8\)", line)]
    assert [line.rsplit(" ", 1)[1] for line in progress] == [f"({i}/8)" for i in range(1, 9)], out
    # A point whose runs failed says how many (they count at the slowdown where they stopped).
    failed = {(r["workload"], r["policy"], r["stability"]): int(r["failed_runs"]) for r in rows}
    for line in progress:
        workload, policy, stability = re.match(r"\S+ (\w+) (\w+) S=(\d+)", line).groups()  # type: ignore[union-attr]
        count = failed[(workload, policy, f"{float(stability)}")]
        assert (f", {count} of 3 runs failed" in line) == (count > 0), line
    assert out_png.stat().st_size > 10_000 and out_png.read_bytes()[:4] == b"\x89PNG"


def test_sweep_records_the_notice_its_worlds_give(tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "tr", "--stabilities", "20",
                        "--notice", "2.5", *SMALL, "--out", str(out))
    assert code == 0, text
    assert [float(r["notice"]) for r in csv.DictReader(out.open())] == [2.5]


def test_sweep_rejects_bad_lists(tmp_path: Path) -> None:
    code, out = invoke("simulate", "sweep", "--stabilities", "5,x", "--out", str(tmp_path / "a.csv"))
    assert code == 2 and out.count("\n") == 1 and "--stabilities" in out


def test_sweep_over_shapes_pairs_every_policy_with_tr(tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "always,tr", "--stabilities", "10",
                        "--on-demand-shares", "25", "--shapes", "exp,0.6", *SMALL, "--out", str(out))
    assert code == 0, text
    rows = list(csv.DictReader(out.open()))
    assert [(r["shape"], r["policy"]) for r in rows] == [("", "always"), ("", "tr"), ("0.6", "always"), ("0.6", "tr")]
    assert rows[2]["lifetime"].startswith("ondemand=1@stable spot=3@weibull:shape=0.6,")
    for r in rows:
        assert float(r["slowdown_boot_low"]) <= float(r["slowdown_mean"]) <= float(r["slowdown_boot_high"])
        assert float(r["tr_ratio_ci95_low"]) <= float(r["tr_ratio"]) <= float(r["tr_ratio_ci95_high"])
    assert float(rows[1]["tr_ratio"]) == 1.0
    assert float(rows[0]["tr_ratio"]) == pytest.approx(float(rows[1]["slowdown_mean"]) / float(rows[0]["slowdown_mean"]))


def test_sweep_records_its_settings_and_a_byte_price_copies_fewer_bytes(tmp_path: Path) -> None:
    rows = {}
    for settings in ((), ("--conf", "backup.costPerGb=1000")):
        out = tmp_path / f"s{len(settings)}.csv"
        code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "always,tr", "--stabilities", "20",
                            "--on-demand-shares", "25", *settings, *SMALL, "--out", str(out))
        assert code == 0, text
        rows[settings[1:]] = {r["policy"]: r for r in csv.DictReader(out.open())}
    free, priced = rows[()], rows[("backup.costPerGb=1000",)]
    assert {r["settings"] for r in free.values()} == {""}
    assert {r["settings"] for r in priced.values()} == {"backup.costPerGb=1000"}
    assert {r["notice"] for r in priced.values()} == {""}
    assert priced["always"]["bytes_copied_mean"] == free["always"]["bytes_copied_mean"]  # the price is tr's alone
    assert 0 < float(priced["tr"]["bytes_copied_mean"]) < 0.8 * float(free["tr"]["bytes_copied_mean"])


@pytest.mark.parametrize("args, fragment", [
    (["--shapes", "exp,x"], "--shapes"),
    (["--shapes", "0,1"], "--shapes"),
    (["--shapes", "1", "--shape", "0.6"], "either --shape or --shapes"),
])
def test_sweep_rejects_bad_shapes(tmp_path: Path, args: list[str], fragment: str) -> None:
    code, out = invoke("simulate", "sweep", *args, "--out", str(tmp_path / "a.csv"))
    assert code == 2 and out.count("\n") == 1 and fragment in out, out


def test_conf_keys_refused_are_the_ones_the_world_replaces() -> None:
    """The --conf keys refused as set by other options match what ``Experiment.policy_config`` replaces."""
    from simulators.options import SET_BY_OPTIONS
    from simulators.runner import Experiment
    from simulators.workloads import WorkloadParams, make_workload
    from simulators.world import WorldSpec
    from trspark.engine.settings import TRConfig

    told = TRConfig(local_bandwidth=1.0, remote_bandwidth=2.0, remote_cap=3.0, backup_latency=7.0)
    job = make_workload("tpcds", WorkloadParams(scale=0.001), seed=0)
    given = Experiment(job, WorldSpec(vms=2), "tr", told).policy_config()
    replaced = {f.name for f in fields(TRConfig) if getattr(given, f.name) != getattr(told, f.name)}
    # mode and lifetime are set by --policy and --believed-lifetime before the world is consulted.
    assert replaced == set(SET_BY_OPTIONS) - {"mode", "lifetime"}


def test_every_setting_neither_the_engine_nor_the_simulator_reads_is_refused_as_live_only() -> None:
    from trspark.engine.settings import TRConfig

    sources = [p for package in ("trspark/engine", "simulators", "cost_model") for p in (ROOT / package).rglob("*.py")
               if p.name not in ("options.py", "settings.py")]  # where the settings are declared, not read
    text = "\n".join(p.read_text() for p in sources)
    unread = {f.name for f in fields(TRConfig) if not re.search(rf"\b{f.name}\b", text)}
    assert unread and unread <= LIVE_ONLY_SETTINGS, unread - LIVE_ONLY_SETTINGS
    code, out = invoke("simulate", "--workload", "bing", "--policy", "tr", "--conf", "engine.queueCapacity=5", *SMALL)
    assert code == 2 and "only a live Spark application reads this" in out


@pytest.mark.parametrize("item", ["release.idle=0.5", "release.minExecutors=1", "rebalance.hazardFactor=1000"])
def test_a_setting_for_events_no_simulated_world_sends_is_refused(item: str) -> None:
    code, out = invoke("simulate", "--workload", "bing", "--policy", "tr", "--conf", item, *SMALL)
    assert code == 2 and f"--conf {item.partition('=')[0]}: would change nothing here" in out, out


def test_a_piped_table_keeps_each_row_on_one_line_unless_columns_says_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["simulate", "--workload", "cortana", "--policy", "never,always,oracle,tr", "--stability", "20", *SMALL]
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out = invoke(*args)
    assert code == 0, out
    (header,) = [line for line in out.splitlines() if "metric" in line]
    assert len(header) > 80  # wider than rich's fallback for a pipe, yet whole
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == ["metric", "never", "always", "oracle", "tr"]
    (row,) = [line for line in out.splitlines() if "slowdown (mean)" in line]
    assert len(row.split("│")[1:-1]) == 5  # the label and the four policies' values
    monkeypatch.setenv("COLUMNS", "60")  # a width asked for is kept: the table is squeezed into it
    code, out = invoke(*args)
    assert code == 0, out
    assert max(len(line) for line in out.splitlines()) <= 60


def test_simulate_shows_its_runs_on_a_terminal_and_keeps_stdout_for_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import simulators.cli

    shown = io.StringIO()
    monkeypatch.setattr(simulators.cli, "_progress_console", lambda: Console(file=shown, force_terminal=True, width=100))
    code, out = invoke("simulate", "--workload", "cortana", "--policy", "never,tr", "--stability", "20", *SMALL,
                       "--format", "json")
    assert code == 0, out
    assert [s["policy"] for s in json.loads(out)] == ["never", "tr"]  # nothing but the JSON on stdout
    assert "tr: runs" in shown.getvalue() and "6/6" in shown.getvalue(), shown.getvalue()


def test_run_experiment_reports_each_run_as_it_ends() -> None:
    from simulators.runner import Experiment, run_experiment
    from simulators.workloads import WorkloadParams, make_workload
    from simulators.world import WorldSpec

    job = make_workload("cortana", WorkloadParams(scale=0.02), seed=0)
    exp = Experiment(job, WorldSpec(vms=4, cores=2, lifetime="exponential:mean=100"), "never", runs=3)
    ended: list[int] = []
    for workers in (1, 2):
        ended.clear()
        run_experiment(exp, workers=workers, on_run=lambda: ended.append(1))
        assert len(ended) == 3


def test_a_write_cut_short_leaves_the_sweeps_csv_and_picture_as_they_were(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The CSV is rewritten after every point: Ctrl-C inside a rewrite must not leave it cut short."""
    from simulators import sweep

    out = tmp_path / "sweep.csv"
    row = {column: "1" for column in sweep.COLUMNS}
    sweep.write_csv([row, row], out)
    before = out.read_bytes()

    def interrupted(self: object, rows: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(csv.DictWriter, "writerows", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep.write_csv([row, row, row], out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.csv"]
    monkeypatch.undo()

    picture = tmp_path / "sweep.png"
    picture.write_bytes(b"an earlier picture")
    import matplotlib.figure

    def failing(self: object, fname: object, **kw: object) -> None:
        Path(str(fname)).write_bytes(b"half a pic")
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", failing)
    with pytest.raises(KeyboardInterrupt):
        sweep.plot([{**row, "workload": "tpcds", "policy": "tr"}], picture)
    assert picture.read_bytes() == b"an earlier picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.csv", "sweep.png"]
