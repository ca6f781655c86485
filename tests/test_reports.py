"""The reports in docs/results/ are what `python -m jobs.reports` makes of the CSVs there."""

from __future__ import annotations

from jobs.reports.__main__ import main
from jobs.reports.render import RESULTS
from jobs.reports.sources import REPORTS


def test_every_report_source_names_a_csv_that_exists():
    for report in REPORTS:
        for source in report.sources:
            assert (RESULTS / source.csv).is_file(), source.csv


def test_committed_reports_are_up_to_date():
    assert main(["--check"]) == 0, "regenerate with `python -m jobs.reports`"
