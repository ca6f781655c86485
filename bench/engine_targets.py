"""The engine's design targets, checked on a stability sweep's CSV (``bench/engine_sweep.py --exp stability``).

Prints one line per (workload, stability) with every policy's mean slowdown, then which points
meet each target:

* T1 -- ``tr`` (indeterministic) no slower than both ``never`` and ``always``: mean slowdown
  ``tr <= min(never, always)``;
* T2 -- at stability >= 50, ``tr``'s mean slowdown <= 1.05;
* T3 -- ``tr`` within 15 % of ``oracle``: ``tr / oracle <= 1.15``; and T3b, the same against
  ``oracle-backup-driver`` (clairvoyant backups, the driver's own placement), where the sweep has it.

Usage: ``python bench/engine_targets.py docs/results/engine_sweep.csv``
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

POLICIES = ("never", "always", "stage", "tr", "tr-det", "tr-local", "oracle", "oracle-backup-driver")


def load(path: Path) -> dict[tuple[str, float], dict[str, float]]:
    """(workload, stability) -> policy -> mean slowdown (the last row wins for a repeated point)."""
    points: dict[tuple[str, float], dict[str, float]] = defaultdict(dict)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row.get("experiment", "stability") == "stability":
                points[(row["workload"], float(row["stability"]))][row["policy"]] = float(row["slowdown_mean"])
    return points


def _checks(stab: float, means: dict[str, float]) -> list[tuple[str, bool | None, str]]:
    """(target, met? -- None where it does not apply, detail) of one point."""
    tr = means.get("tr")
    if tr is None:
        return [(name, None, "") for name in TITLES]
    out: list[tuple[str, bool | None, str]] = []
    if "never" in means and "always" in means:
        out.append(("T1", tr <= min(means["never"], means["always"]),
                    f"tr {tr:.3f}, always {means['always']:.3f}, never {means['never']:.3f}"))
    else:
        out.append(("T1", None, ""))
    out.append(("T2", tr <= 1.05 if stab >= 50 else None, f"tr {tr:.3f}"))
    for name, oracle in (("T3", "oracle"), ("T3b", "oracle-backup-driver")):
        ratio = tr / means[oracle] if oracle in means else None
        out.append((name, None if ratio is None else ratio <= 1.15, f"tr/{oracle} {ratio or 0:.3f}"))
    return out


TITLES = {"T1": "tr <= min(never, always)", "T2": "tr <= 1.05 at stability >= 50", "T3": "tr within 15 % of oracle",
          "T3b": "tr within 15 % of oracle-backup-driver"}


def report(points: dict[tuple[str, float], dict[str, float]]) -> list[str]:
    lines = [f"{'workload':10}{'stab':>6} " + "".join(f"{p[:8]:>9}" for p in POLICIES) + "   T1  T2  T3  T3b (tr/oracle)"]
    misses: dict[str, list[str]] = {name: [] for name in TITLES}
    counts = {name: [0, 0] for name in TITLES}
    for (workload, stab), means in points.items():
        cells = "".join(f"{means[p]:9.3f}" if p in means else f"{'-':>9}" for p in POLICIES)
        marks = []
        for name, met, detail in _checks(stab, means):
            if met is None:
                marks.append("   ")
                continue
            counts[name][1] += 1
            counts[name][0] += met
            marks.append("ok " if met else "-- ")
            if not met:
                misses[name].append(f"{workload} {stab:g} ({detail})")
        tr, oracle = means.get("tr"), means.get("oracle")
        ratio = f" {tr / oracle:.3f}" if tr is not None and oracle else ""
        lines.append(f"{workload:10}{stab:6g} {cells}   {' '.join(marks)}{ratio}")
    for name, (passed, total) in counts.items():
        if total:
            missed = "; missed at " + ", ".join(misses[name]) if misses[name] else ""
            lines.append(f"{name} {TITLES[name]}: met at {passed} of {total}{missed}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, nargs="+", help="stability sweep CSV(s); later files override earlier points")
    args = parser.parse_args(argv)
    points: dict[tuple[str, float], dict[str, float]] = defaultdict(dict)
    for path in args.csv:
        for key, means in load(path).items():
            points[key].update(means)
    print("\n".join(report(points)))


if __name__ == "__main__":
    main()
