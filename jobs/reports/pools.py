"""The on-demand and spot pools sweep (``trspark simulate sweep --on-demand-shares ...``) as a report.

Tables of slowdown (mean with its bootstrap 95 % interval), bytes copied and $ per job for every
policy and cell (workload, spot lifetimes, on-demand share, stability), the figure, and the
targets checked mechanically from the CSV, one verdict per cell and target:

* **baselines** (on-demand share >= 10 %): ``tr``'s mean slowdown <= each non-clairvoyant
  baseline's (``never``, ``always``, ``efm``, ``pado``), or the paired 95 % interval of
  ``mean(tr) / mean(X)`` contains 1;
* **clairvoyant** (share >= 10 %): ``mean(tr) / mean(oracle) <= 1.10`` at stability >= 20,
  ``mean(tr) / mean(oracle-backup) <= 1.10`` below (point estimates of the paired ratio);
* **bytes** (share >= 10 %): ``tr``'s mean bytes copied (peer + remote) <= 50 % of ``always``'s;
  each verdict shows the clairvoyant ``oracle``'s share beside it, and the summary counts the
  failing cells where the oracle, knowing every death time, copies more than that share too;
* **no regression** (share 0 %, exponential lifetimes): ``tr``'s mean slowdown <= the engine
  sweep's ``tr`` at the same workload and stability (``engine_sweep.csv``), or the two 95 %
  intervals overlap. The engine sweep ran ``tr`` with ``period=1`` and without duplication
  (``bench/engine_sweep.py``); this sweep runs the default configuration, as a user would.

A cell without the policies a target needs is reported as such, not as a pass.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from pathlib import Path

POLICIES = ("never", "always", "efm", "pado", "tr", "oracle", "oracle-backup")
BASELINES = ("never", "always", "efm", "pado")
NEAR = 1.10
"""``tr`` may be this much slower than the clairvoyant bound (ratio of mean slowdowns)."""
ORACLE_FROM = 20.0
"""From this stability on ``tr`` is held to ``oracle``, below it to ``oracle-backup``."""
BYTES_SHARE = 0.5
"""``tr``'s bytes copied, at most this share of ``always``'s."""
MIN_SHARE = 10.0
"""The targets for mixed clusters apply from this on-demand share (%) on."""
NOTICES_OFF = "tr-without-notices"
"""``tr`` deaf to notices, run beside ``tr`` on the same noticed worlds (:mod:`simulators.unnoticed`)."""
SAME_COLUMN = (
    "The last column sets `tr-without-notices` beside `tr` in `pools_sweep.csv` (no notices, the same seeds "
    "and runs): the same to the last digit, except where an ignored notice's instant gave the simulator one "
    "more pass placing pending tasks (it places them at every instant something happens; see "
    "`simulators/unnoticed.py`).\n\n"
)
"""What the notices table's last column shows, printed above it when it is there."""

Cell = tuple[str, str, float, float]
"""(workload, shape ('' = exponential), on-demand share %, stability)."""


def read(path: Path) -> dict[Cell, dict[str, dict[str, str]]]:
    """Cell -> policy -> CSV row, cells in workload, lifetime, share, stability order."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    cells: dict[Cell, dict[str, dict[str, str]]] = {}
    for r in rows:
        cells.setdefault(cell_of(r), {})[r["policy"]] = r
    return dict(sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] != "", kv[0][1], kv[0][2], kv[0][3])))


def cell_of(row: dict[str, str]) -> Cell:
    return row["workload"], row.get("shape", ""), float(row["on_demand_share"] or 0), float(row["stability"])


def number(row: dict[str, str], name: str) -> float:
    raw = row.get(name, "")
    return float(raw) if raw not in ("", None) else math.nan


def lifetimes(shape: str) -> str:
    return "exponential" if shape == "" else f"Weibull k={float(shape):g}"


def cell_head(cell: Cell, by: dict[str, dict[str, str]]) -> list[str]:
    workload, shape, share, stability = cell
    return [workload, lifetimes(shape), _share(share, by), f"{stability:g}"]


def _share(share: float, by: dict[str, dict[str, str]]) -> str:
    """The requested share and, where it is not a whole number of VMs, the one simulated."""
    world = next(iter(by.values())).get("lifetime", "")
    found = re.match(r"ondemand=(\d+)@stable spot=(\d+)@", world)
    if found is None:
        return f"{share:g}"
    on_demand, spot = int(found[1]), int(found[2])
    real = 100.0 * on_demand / (on_demand + spot)
    return f"{share:g}" if real == share else f"{share:g} (ran {real:g}: {on_demand} of {on_demand + spot} VMs)"


def markdown(head: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body]) + "\n"


def _policies(cells: dict[Cell, dict[str, dict[str, str]]]) -> list[str]:
    present = {p for by_policy in cells.values() for p in by_policy}
    return [p for p in POLICIES if p in present] + sorted(present - set(POLICIES))


def _table(cells: dict[Cell, dict[str, dict[str, str]]], value: Callable[[dict[str, str]], str]) -> str:
    policies = _policies(cells)
    body = [cell_head(cell, by) + [value(by[p]) if p in by else "-" for p in policies] for cell, by in cells.items()]
    return markdown(["workload", "spot lifetimes", "on-demand %", "stability", *policies], body)


def _slowdown(row: dict[str, str]) -> str:
    failed = int(float(row["failed_runs"] or 0))
    text = f"{number(row, 'slowdown_mean'):.3f} [{number(row, 'slowdown_boot_low'):.3f}, {number(row, 'slowdown_boot_high'):.3f}]"
    return text + (f" ({failed} failed)" if failed else "")


def _gigabytes(row: dict[str, str]) -> str:
    return f"{number(row, 'backup_bytes_local_mean') / 1e9:.2f} / {number(row, 'backup_bytes_remote_mean') / 1e9:.2f}"


def copied(row: dict[str, str]) -> float:
    return number(row, "backup_bytes_local_mean") + number(row, "backup_bytes_remote_mean")


def tables(path: Path) -> str:
    """Slowdown, bytes and $ per policy and cell."""
    cells = read(path)
    return "\n".join([
        "Mean slowdown [bootstrap 95 % interval of the mean] (failed runs count with the slowdown at which "
        "they stopped):", "", _table(cells, _slowdown),
        "GB copied per job, to peers / to the remote store (means):", "", _table(cells, _gigabytes),
        "$ per job (mean):", "", _table(cells, lambda r: f"{number(r, 'cost_usd_mean'):.4f}")])


# ------------------------------------------------------------------------------------ targets
Verdict = tuple[str, bool | None, str]
"""(target, met -- None when the cell lacks what it needs, detail)."""


def _ratio(by: dict[str, dict[str, str]], other: str) -> tuple[float, float, float]:
    """``mean(tr) / mean(other)`` and its paired interval, from ``other``'s row."""
    row = by[other]
    return number(row, "tr_ratio"), number(row, "tr_ratio_ci95_low"), number(row, "tr_ratio_ci95_high")


def judge_baselines(by: dict[str, dict[str, str]]) -> Verdict:
    missing = [p for p in (*BASELINES, "tr") if p not in by]
    if missing:
        return "baselines", None, f"no {', '.join(missing)}"
    worse = []
    for p in BASELINES:
        ratio, low, high = _ratio(by, p)
        if not (ratio <= 1.0 or low <= 1.0):
            worse.append(f"{p} (tr/{p} {ratio:.3f} [{low:.3f}, {high:.3f}])")
    return "baselines", not worse, "tr slower than " + ", ".join(worse) if worse else "tr <= each or within the interval"


def judge_clairvoyant(stability: float, by: dict[str, dict[str, str]], tr: dict[str, str] | None = None) -> Verdict:
    """The clairvoyant target; ``tr``: a row of ``tr`` from another sweep of the same worlds, judged by the ratio of means."""
    bound = "oracle" if stability >= ORACLE_FROM else "oracle-backup"
    if bound not in by or (tr is None and "tr" not in by):
        return "clairvoyant", None, f"no {bound} or tr"
    if tr is not None:
        ratio = number(tr, "slowdown_mean") / number(by[bound], "slowdown_mean")
        return "clairvoyant", ratio <= NEAR, f"tr/{bound} {ratio:.3f}"
    ratio, low, high = _ratio(by, bound)
    return "clairvoyant", ratio <= NEAR, f"tr/{bound} {ratio:.3f} [{low:.3f}, {high:.3f}]"


def _share_of_always(by: dict[str, dict[str, str]], policy: str) -> float:
    """``policy``'s mean bytes copied over ``always``'s (both must be in ``by``)."""
    mine, always = copied(by[policy]), copied(by["always"])
    return mine / always if always > 0 else (0.0 if mine == 0 else math.inf)


def judge_bytes(by: dict[str, dict[str, str]]) -> Verdict:
    if "always" not in by or "tr" not in by:
        return "bytes", None, "no always or tr"
    share, always = _share_of_always(by, "tr"), copied(by["always"])
    detail = f"tr {share * always / 1e9:.2f} GB = {share:.0%} of always's {always / 1e9:.2f} GB"
    if "oracle" in by:
        detail += f"; oracle {_share_of_always(by, 'oracle'):.0%}"
    return "bytes", share <= BYTES_SHARE, detail


def _engine_tr(engine_csv: Path) -> dict[tuple[str, float], tuple[float, float, float]]:
    """(workload, stability) -> the engine sweep's tr mean slowdown and its 95 % interval."""
    with engine_csv.open(newline="") as fh:
        return {(r["workload"], float(r["stability"])): (float(r["slowdown_mean"]), float(r["slowdown_ci_lo"]),
                                                         float(r["slowdown_ci_hi"]))
                for r in csv.DictReader(fh) if r["experiment"] == "stability" and r["policy"] == "tr"}


def _regression(cell: Cell, by: dict[str, dict[str, str]], engine: dict[tuple[str, float], tuple[float, float, float]]) -> Verdict:
    workload, shape, _, stability = cell
    if "tr" not in by:
        return "no regression", None, "no tr"
    if shape != "" or (workload, stability) not in engine:
        return "no regression", None, "no engine-sweep point (it has exponential lifetimes only)"
    mean, low, high = engine[(workload, stability)]
    tr = by["tr"]
    ours, our_low, our_high = number(tr, "slowdown_mean"), number(tr, "slowdown_boot_low"), number(tr, "slowdown_boot_high")
    met = ours <= mean or (our_low <= high and low <= our_high)
    return "no regression", met, f"tr {ours:.3f} [{our_low:.3f}, {our_high:.3f}], engine sweep {mean:.3f} [{low:.3f}, {high:.3f}]"


def verdicts(cell: Cell, by: dict[str, dict[str, str]], engine: dict[tuple[str, float], tuple[float, float, float]]) -> list[Verdict]:
    """Every target that applies to ``cell``."""
    if cell[2] >= MIN_SHARE:
        return [judge_baselines(by), judge_clairvoyant(cell[3], by), judge_bytes(by)]
    if cell[2] == 0:
        return [_regression(cell, by, engine)]
    return []


def _mark(met: bool | None) -> str:
    return "n/a" if met is None else ("PASS" if met else "**FAIL**")


def target_check(engine_csv: Path) -> Callable[[Path], str]:
    """The per-cell verdicts and a count per target."""
    def render(path: Path) -> str:
        engine = _engine_tr(engine_csv)
        body: list[list[str]] = []
        counts: dict[str, tuple[int, int]] = {}
        beyond = 0  # failed bytes verdicts where the oracle, too, copies over the share
        for cell, by in read(path).items():
            for name, met, detail in verdicts(cell, by, engine):
                body.append(cell_head(cell, by) + [name, _mark(met), detail])
                passed, total = counts.get(name, (0, 0))
                counts[name] = (passed + bool(met), total + (met is not None))
                beyond += (name == "bytes" and met is False and "oracle" in by
                           and _share_of_always(by, "oracle") > BYTES_SHARE)
        summary = [f"- {name}: PASS in {passed} of {total} cells" for name, (passed, total) in counts.items()]
        if beyond:
            summary.append(f"- bytes: in {beyond} of the failing cells the clairvoyant `oracle` itself copies more "
                           f"than {BYTES_SHARE:.0%} of `always`'s bytes")
        return ("### Target check\n\n" + "\n".join(summary) + "\n\n"
                + markdown(["workload", "spot lifetimes", "on-demand %", "stability", "target", "verdict", "detail"], body))
    return render


def notices(without: Path) -> Callable[[Path], str]:
    """``tr`` with notices against ``tr-without-notices`` on the same worlds (this CSV), per cell.

    ``tr-without-notices``'s paired ratio ``mean(tr) / mean(tr-without-notices)`` and its 95 %
    interval give the gain. Where the sweep without notices (``without``, the same seeds) ran as
    many runs, a last column sets ``tr-without-notices`` beside its ``tr``: "the same" to the last
    digit, or its mean; with other run counts the means are of other worlds, and there is no column.
    """
    def render(path: Path) -> str:
        base = read(without)
        body, verdicts = [], {"PASS": 0, "within noise": 0, "**FAIL**": 0}
        for cell, by in read(path).items():
            if "tr" not in by or NOTICES_OFF not in by:
                continue
            deaf = by[NOTICES_OFF]
            ratio, low, high = (number(deaf, k) for k in ("tr_ratio", "tr_ratio_ci95_low", "tr_ratio_ci95_high"))
            verdict = "PASS" if high < 1.0 else "**FAIL**" if low > 1.0 else "within noise"
            verdicts[verdict] += 1
            swept = base.get(cell, {}).get("tr")
            same = (_same(number(swept, "slowdown_mean"), number(deaf, "slowdown_mean"))
                    if swept is not None and swept.get("runs") == deaf.get("runs") else "-")
            body.append(cell_head(cell, by) + [_slowdown(by["tr"]), _slowdown(deaf), f"{1 - ratio:+.1%} [{1 - high:+.1%}, {1 - low:+.1%}]",
                                       verdict + (" (slower)" if verdict == "within noise" and ratio >= 1 else ""), same])
        if not body:
            return f"No cell of this CSV has both tr and {NOTICES_OFF}.\n"
        head = (f"- notices gain (paired 95 % interval below 1): {verdicts['PASS']} of {len(body)} cells; "
                f"within noise: {verdicts['within noise']}; lose: {verdicts['**FAIL**']}\n\n")
        columns = ["workload", "spot lifetimes", "on-demand %", "stability", "tr with notices", "tr without",
                   "gain [95 % interval]", "verdict", "sweep's tr"]
        if all(line[-1] == "-" for line in body):
            return head + markdown(columns[:-1], [line[:-1] for line in body])
        return head + SAME_COLUMN + markdown(columns, body)
    return render


def _same(swept: float, deaf: float) -> str:
    """``swept`` as text: "the same" when it equals ``deaf`` to the last digit, else the value and the difference."""
    return "the same" if swept == deaf else f"{swept:.4f} ({deaf / swept - 1:+.2%})"


def draw(path: Path, png: Path) -> None:
    """Mean slowdown against stability with bootstrap intervals: a panel per (workload, lifetimes,
    on-demand share), a line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    cells = read(path)
    panels = sorted({cell[:3] for cell in cells}, key=lambda k: (k[0], k[1] != "", k[1], k[2]))
    shares = sorted({p[2] for p in panels})
    rows = sorted({p[:2] for p in panels}, key=lambda k: (k[0], k[1] != "", k[1]))
    fig, axes = plt.subplots(len(rows), len(shares), figsize=(4.2 * len(shares), 3.4 * len(rows)), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    policies = _policies(cells)
    used = set()
    for (workload, shape, share) in panels:
        ax = axes[rows.index((workload, shape))][shares.index(share)]
        used.add(id(ax))
        for policy in policies:
            pts = sorted((c[3], by[policy]) for c, by in cells.items() if c[:3] == (workload, shape, share) and policy in by)
            if not pts:
                continue
            xs = [s for s, _ in pts]
            ys = [number(r, "slowdown_mean") for _, r in pts]
            err = [[y - number(r, "slowdown_boot_low") for y, (_, r) in zip(ys, pts, strict=True)],
                   [number(r, "slowdown_boot_high") - y for y, (_, r) in zip(ys, pts, strict=True)]]
            ax.errorbar(xs, ys, yerr=err, marker="o", markersize=3, capsize=2, label=policy,
                        color=colours[policies.index(policy) % len(colours)])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{workload}, {lifetimes(shape)}, {share:g}% on-demand", fontsize=9)
        ax.set_xlabel("spot stability")
        ax.set_ylabel("slowdown")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat:
        ax.set_visible(id(ax) in used)
    handles = [Line2D([], [], color=colours[i % len(colours)], marker="o", label=p) for i, p in enumerate(policies)]
    fig.legend(handles=handles, loc="upper right", fontsize=8)
    fig.suptitle("Slowdown vs. spot stability (95 % intervals)")
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    fig.savefig(png, dpi=100)
    plt.close(fig)
