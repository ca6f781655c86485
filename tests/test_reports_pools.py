"""The pools report's target check, on a hand-made sweep CSV whose verdicts are known."""

from __future__ import annotations

import csv
from pathlib import Path

from jobs.reports import pools

FIELDS = ("workload", "policy", "stability", "on_demand_share", "shape", "runs", "slowdown_mean", "slowdown_boot_low",
          "slowdown_boot_high", "failed_runs", "tr_ratio", "tr_ratio_ci95_low", "tr_ratio_ci95_high",
          "backup_bytes_local_mean", "backup_bytes_remote_mean", "cost_usd_mean")


def row(policy: str, stability: float, share: float, slowdown: float, tr: float, gb: float = 0.0,
        ratio_ci: tuple[float, float] | None = None, runs: int = 50) -> dict[str, object]:
    ratio = tr / slowdown
    low, high = ratio_ci or (ratio - 0.01, ratio + 0.01)
    return dict(workload="tpcds", policy=policy, stability=stability, on_demand_share=share, shape="", runs=runs,
                slowdown_mean=slowdown, slowdown_boot_low=slowdown - 0.02, slowdown_boot_high=slowdown + 0.02,
                failed_runs=0, tr_ratio=ratio, tr_ratio_ci95_low=low, tr_ratio_ci95_high=high,
                backup_bytes_local_mean=0.0, backup_bytes_remote_mean=gb * 1e9, cost_usd_mean=0.01)


def cell(stability: float, share: float, tr: float, slowdowns: dict[str, float], gb: dict[str, float],
         ratio_ci: dict[str, tuple[float, float]] | None = None, runs: int = 50) -> list[dict[str, object]]:
    return [row(p, stability, share, s, tr, gb.get(p, 0.0), (ratio_ci or {}).get(p), runs) for p, s in slowdowns.items()]


def write(path: Path, rows: list[dict[str, object]], fields: tuple[str, ...] = FIELDS) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_targets_are_judged_per_cell(tmp_path: Path) -> None:
    good = cell(10, 25, 1.10, {"never": 2.0, "always": 1.15, "efm": 1.12, "pado": 1.5, "tr": 1.10, "oracle": 0.9,
                               "oracle-backup": 1.05}, {"always": 3.0, "efm": 3.0, "tr": 1.0})
    # stability 50: the oracle is the bound (1.10 / 0.9 > 1.10); always is faster and outside the
    # interval; tr copies 2/3 of always's bytes
    bad = cell(50, 25, 1.10, {"never": 2.0, "always": 1.0, "efm": 1.12, "pado": 1.5, "tr": 1.10, "oracle": 0.9,
                              "oracle-backup": 1.05}, {"always": 3.0, "tr": 2.0}, {"always": (1.05, 1.15)})
    within = cell(20, 10, 1.10, {"never": 2.0, "always": 1.08, "efm": 1.2, "pado": 1.5, "tr": 1.10, "oracle": 1.05},
                  {"always": 3.0, "tr": 1.0}, {"always": (0.98, 1.06)})
    zero = cell(10, 0, 1.20, {"tr": 1.20, "always": 1.3}, {})
    sweep = write(tmp_path / "sweep.csv", good + bad + within + zero)
    engine = write(tmp_path / "engine.csv", [
        {"experiment": "stability", "workload": "tpcds", "policy": "tr", "stability": 10.0, "slowdown_mean": 1.33,
         "slowdown_ci_lo": 1.30, "slowdown_ci_hi": 1.36}], ("experiment", "workload", "policy", "stability",
                                                              "slowdown_mean", "slowdown_ci_lo", "slowdown_ci_hi"))
    table = {(c[2], c[3]): {name: met for name, met, _ in pools.verdicts(c, by, pools._engine_tr(engine))}
             for c, by in pools.read(sweep).items()}
    assert table[(25.0, 10.0)] == {"baselines": True, "clairvoyant": True, "bytes": True}
    assert table[(25.0, 50.0)] == {"baselines": False, "clairvoyant": False, "bytes": False}
    # within the paired interval of always; at stability 20 the bound is the oracle
    assert table[(10.0, 20.0)] == {"baselines": True, "clairvoyant": True, "bytes": True}
    assert table[(0.0, 10.0)] == {"no regression": True}
    text = pools.target_check(engine)(sweep)
    assert "- baselines: PASS in 2 of 3 cells" in text and "**FAIL**" in text
    assert "- no regression: PASS in 1 of 1 cells" in text


def test_a_cell_without_a_needed_policy_is_not_a_pass(tmp_path: Path) -> None:
    sweep = write(tmp_path / "sweep.csv", cell(10, 50, 1.1, {"tr": 1.1, "always": 1.2}, {"always": 1.0, "tr": 0.2}))
    (c, by), = pools.read(sweep).items()
    verdict = {name: met for name, met, _ in pools.verdicts(c, by, {})}
    assert verdict == {"baselines": None, "clairvoyant": None, "bytes": True}


def test_notices_are_judged_by_the_paired_interval(tmp_path: Path) -> None:
    deaf = pools.NOTICES_OFF
    gain = cell(10, 25, 1.00, {"tr": 1.00, deaf: 1.10}, {}, {deaf: (0.88, 0.95)})
    noise = cell(20, 25, 1.05, {"tr": 1.05, deaf: 1.04}, {}, {deaf: (0.98, 1.03)})
    loss = cell(5, 25, 1.20, {"tr": 1.20, deaf: 1.10}, {}, {deaf: (1.05, 1.12)})
    noticed = write(tmp_path / "noticed.csv", gain + noise + loss)
    # the sweep without notices: tr at stability 10 as tr-without-notices, at 20 another figure
    plain = write(tmp_path / "plain.csv", cell(10, 25, 1.10, {"tr": 1.10}, {}) + cell(20, 25, 1.03, {"tr": 1.03}, {}))
    lines = {line.split("|")[4].strip(): line for line in pools.notices(plain)(noticed).splitlines()
             if line.startswith("| tpcds")}
    assert "| PASS | the same |" in lines["10"] and "+9.1%" in lines["10"]
    assert "| within noise (slower) | 1.0300 (+0.97%) |" in lines["20"]
    assert "| **FAIL** | - |" in lines["5"]
    assert pools.notices(plain)(noticed).startswith(
        "- notices gain (paired 95 % interval below 1): 1 of 3 cells; within noise: 1; lose: 1")
    # More runs than the sweep without notices: other worlds, so no column compares the two.
    longer = write(tmp_path / "longer.csv", cell(10, 25, 1.00, {"tr": 1.00, deaf: 1.10}, {}, {deaf: (0.88, 0.95)}, 200))
    text = pools.notices(plain)(longer)
    assert "sweep's tr" not in text
    assert text.rstrip().endswith("| 10 | 1.000 [0.980, 1.020] | 1.100 [1.080, 1.120] | +9.1% [+5.0%, +12.0%] | PASS |")


def test_the_byte_price_report_counts_cells_under_half_of_always_and_slower_than_price_zero(tmp_path: Path) -> None:
    from jobs.reports.byte_price import byte_price

    base = (cell(20, 25, 1.10, {"always": 1.2, "efm": 1.15, "tr": 1.10, "oracle": 1.0}, {"always": 4.0, "tr": 3.0})
            + cell(200, 25, 1.01, {"always": 1.02, "tr": 1.01}, {"always": 4.0, "tr": 3.0})
            + cell(20, 0, 1.30, {"always": 1.3, "tr": 1.3}, {"always": 4.0, "tr": 4.0}))  # share 0: not in the report
    sweep = write(tmp_path / "sweep.csv", base)
    priced = []
    for price, (slow20, gb20), (slow200, gb200) in ((100, (1.11, 2.5), (1.01, 1.5)), (300, (1.15, 1.8), (1.04, 0.8))):
        for r in cell(20, 25, slow20, {"tr": slow20}, {"tr": gb20}) + cell(200, 25, slow200, {"tr": slow200}, {"tr": gb200}):
            priced.append({**r, "settings": f"backup.costPerGb={price}"})
    text = byte_price(sweep)(write(tmp_path / "priced.csv", priced, (*FIELDS, "settings")))
    assert "- 0 core-s/GB: bytes <= 50% of always's in 0 of 2 cells; mean slowdown above price 0's interval in 0, above always's or efm's mean in 0" in text
    assert "- 100 core-s/GB: bytes <= 50% of always's in 1 of 2 cells; mean slowdown above price 0's interval in 0, above always's or efm's mean in 0" in text
    # 1.15 lies above tr's interval at price 0 (1.10 + 0.02) and not above efm's 1.15; 1.04 lies above
    # both its interval (1.01 + 0.02) and always's 1.02
    assert ("- 300 core-s/GB: bytes <= 50% of always's in 2 of 2 cells; mean slowdown above price 0's interval in 2, "
            "above always's or efm's mean in 1" in text)
    assert "| tpcds | exponential | 25 | 20 | 1.100 / 75% | 1.110 / 62% | 1.150 / 45% | 1.200 | 1.150 | 0% |" in text
    assert "| 0 | 20 |" not in text


def test_the_byte_price_report_finds_the_lowest_price_meeting_all_three_targets_or_says_which_it_misses(tmp_path: Path) -> None:
    from jobs.reports.byte_price import byte_price

    def base_cell(stability: float, tr: float, tr_gb: float, oracle_gb: float) -> list[dict[str, object]]:
        slowdowns = {"never": 2.0, "always": 1.2, "efm": 1.15, "pado": 1.5, "tr": tr, "oracle": 1.0, "oracle-backup": 1.0}
        return cell(stability, 25, tr, slowdowns, {"always": 4.0, "efm": 4.0, "tr": tr_gb, "oracle": oracle_gb})

    def priced_cell(price: float, stability: float, tr: float, tr_gb: float,
                    ratio_ci: dict[str, tuple[float, float]] | None = None) -> list[dict[str, object]]:
        slowdowns = {"never": 2.0, "always": 1.2, "efm": 1.15, "pado": 1.5, "tr": tr}
        rows = cell(stability, 25, tr, slowdowns, {"always": 4.0, "efm": 4.0, "tr": tr_gb}, ratio_ci)
        return [{**r, "settings": f"backup.costPerGb={price}"} for r in rows]

    sweep = write(tmp_path / "sweep.csv", base_cell(5, 1.05, 1.0, 3.0) + base_cell(10, 1.05, 3.0, 1.0)
                  + base_cell(20, 1.05, 3.0, 1.0) + base_cell(50, 1.05, 3.5, 3.5))
    priced = (priced_cell(100, 10, 1.06, 1.9)  # halved, as fast as the baselines, near the bound: met at 100
              + priced_cell(100, 20, 1.06, 2.5) + priced_cell(300, 20, 1.16, 1.5, {"efm": (1.005, 1.02)})
              + priced_cell(100, 50, 1.05, 3.2) + priced_cell(300, 50, 1.07, 2.9))
    text = byte_price(sweep)(write(tmp_path / "priced.csv", priced, (*FIELDS, "settings")))
    last = {line.split("|")[4].strip(): line.rstrip().rsplit("|", 2)[1].strip() for line in text.splitlines()
            if line.startswith("| tpcds")}
    assert last["5"] == "0"
    assert last["10"] == "100"
    # halved at 300, but slower than efm outside the paired interval and 16 % slower than the oracle
    assert last["20"] == ("none: at 300, baselines (tr slower than efm (tr/efm 1.009 [1.005, 1.020])); "
                          "clairvoyant (tr/oracle 1.160)")
    assert last["50"] == "none: bytes above half up to 300"
    assert "mean slowdown +1.0%; all three targets met in 1\n- 300 core-s/GB" in text and text.count("targets met in 0") == 1
    assert ("- all three targets at one price: at price 0 in 1 of 4 cells, at a higher price in 1 (most often 100); "
            "the bytes halved only by missing a speed target in 1; the bytes above half at every price in 1. "
            "In 1 of these 2 cells the clairvoyant `oracle` copies more than half of `always`'s bytes.") in text
