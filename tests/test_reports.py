"""The reports in docs/results/ are what `python -m jobs.reports` makes of the CSVs there."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.reports.__main__ import main
from jobs.reports.render import RESULTS
from jobs.reports.sources import REPORTS


def test_every_report_source_names_a_csv_that_exists():
    for report in REPORTS:
        for source in report.sources:
            assert (RESULTS / source.csv).is_file(), source.csv


def test_committed_reports_are_up_to_date():
    assert main(["--check"]) == 0, "regenerate with `python -m jobs.reports`"


@pytest.mark.parametrize(("argv", "code"), [(["--help"], 0), (["--chek"], 2)])
def test_help_and_a_bad_flag_write_no_report(argv, code, monkeypatch, capsys):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a report was written")

    monkeypatch.setattr(Path, "write_text", refuse)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == code
    printed = capsys.readouterr()
    assert "--check" in printed.out + printed.err  # the usage line


def test_elastic_report_pairs_the_policies_by_repeat(tmp_path):
    from jobs.reports.render import elastic

    head = ("policy,repeat,executor_seconds,q1_seconds,q2_seconds,app_seconds,executors_started,executors_removed,"
            "executors_released,evictions,stage_resubmissions,map_tasks_rerun,engine_fallback,answers_equal\n")
    rows = ["never,0,100,1,2,50,3,3,0,0,0,0,False,True", "tr,0,80,1,8,60,6,3,3,0,0,0,False,True",
            "never,1,100,1,2,50,3,3,0,0,0,0,False,True", "tr,1,120,1,8,60,6,3,3,0,0,0,False,True",
            "tr,2,50,1,8,60,6,3,3,0,0,0,False,True"]  # repeat 2 has no partner: left out
    path = tmp_path / "elastic.csv"
    path.write_text(head + "\n".join(rows) + "\n")
    text = elastic(path)
    assert "| executor_seconds | 1.00x" in text and "| 1 of 2 |" in text  # ratios 0.8 and 1.2
    assert "| q2_seconds | 4.00x" in text and "| 0 of 2 |" in text
    assert "| q1_seconds | 1.00x" in text


def test_elastic_report_gives_each_policy_its_own_ratios_against_never(tmp_path):
    from jobs.reports.render import elastic

    head = ("policy,repeat,executor_seconds,q1_seconds,q2_seconds,app_seconds,executors_started,executors_removed,"
            "executors_released,evictions,stage_resubmissions,map_tasks_rerun,engine_fallback,answers_equal\n")
    rows = ["never,0,100,10,2,50,3,3,0,0,0,0,False,True", "always,0,100,11,2,50,3,3,0,0,0,0,False,True",
            "tr,0,80,12,8,60,6,3,3,0,0,0,False,True"]
    path = tmp_path / "elastic.csv"
    path.write_text(head + "\n".join(rows) + "\n")
    text = elastic(path)
    always, tr = text.split("Paired ratio `always`/`never`")[1].split("Paired ratio `tr`/`never`")
    assert "| q1_seconds | 1.10x" in always and "repeats with `always` lower" in always
    assert "| q1_seconds | 1.20x" in tr and "| executor_seconds | 0.80x" in tr
