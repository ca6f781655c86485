"""``python -m jobs.reports [--check]``: rewrite the reports of ``docs/results/`` (or check them)."""

from __future__ import annotations

import argparse
import sys

from jobs.reports.render import RESULTS, render
from jobs.reports.sources import REPORTS


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.reports",
                                     description="Rewrite the reports of docs/results/ from their CSVs, or check them.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming the reports that differ from their CSVs")
    check = parser.parse_args(argv).check
    stale = []
    for report in REPORTS:
        path = RESULTS / f"{report.name}.md"
        text = render(report)
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(RESULTS.parent.parent)}")
            if report.draw is not None:
                report.draw(RESULTS)
    if stale:
        print("out of date (run python -m jobs.reports): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
