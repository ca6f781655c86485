"""The soak's bookkeeping: the decision latency read from Spark's CsvSink, the memory trend, the
order of its jobs, and its reports per five minutes and per policy of a kill sweep (the soak itself
runs for most of an hour, outside CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.reports.soak import kill_sweep, windows
from jobs.soak import Stream, decision_latency_ms, main, spark_setting, trend

SINK_HEADER = "t,count,max,mean,min,stddev,p50,p75,p95,p98,p99,p999\n"


def test_the_latency_is_the_sinks_last_line_in_milliseconds(tmp_path: Path) -> None:
    assert decision_latency_ms(tmp_path) == {}  # before the sink's first write
    sink = tmp_path / "app-1.driver.trspark.engine_decision_latency_us.csv"
    sink.write_text(SINK_HEADER + "1,3,10308,6838.5,3400,2804.8,6659,10308,10308,10308,10308,10308\n"
                    "2,1009,78345,3928.0,116,5915.3,1944,5167,12400,17736,18835,78343\n")
    assert decision_latency_ms(tmp_path) == {"decisions": 1009, "latency_p50_ms": 1.944, "latency_p99_ms": 18.835}


def test_the_memory_trend_is_the_last_fifth_over_the_first() -> None:
    samples = [{"driver": float(100 + i), "engine": 50.0} for i in range(10)]
    assert trend(samples) == {"driver": round(108.5 / 100.5, 2), "engine": 1.0}
    assert trend([]) == {}


def test_the_report_sums_each_five_minutes(tmp_path: Path) -> None:
    csv_path = tmp_path / "soak.csv"
    head = ("t_s,job,seconds,failed,wrong,kills,rss_driver_mb,rss_engine_mb,rss_executors_mb,driver_heap_mb,"
            "decisions,latency_p50_ms,latency_p99_ms\n")
    csv_path.write_text(head + "10,rdd,1,0,0,2,100,50,300,60,,,\n"
                        "200,q3,4,0,1,5,200,50,500,,40,1.5,9\n"
                        "250,rdd,1,0,0,5,200,50,500,70,40,1.5,9\n"
                        "320,rdd,1,1,0,9,300,52,700,,80,1.2,7\n")
    text = windows(csv_path)
    assert "**4 jobs** (1 TPC-DS queries, 3 RDD jobs) in 5.3 min, **9 executors killed**, **1 wrong answers**, **1 failed jobs**" in text
    # The live heap: the mean of the window's samples, "-" in a window without one.
    assert "| 0-5 | 3 | 5 | 0 | 1 | 167 | 65 | 50 | 433 | 40 | 1.5 | 9 |" in text
    assert "| 5-10 | 1 | 4 | 1 | 0 | 300 | - | 52 | 700 | 80 | 1.2 | 7 |" in text


class _RecordingStream(Stream):
    """The stream's order without Spark: each job only records its name."""

    def _rdd_job(self, index: int) -> tuple[str, float, bool, bool]:
        return "rdd", 0.0, False, False

    def _query(self, name: str, index: int) -> tuple[str, float, bool, bool]:
        return name, 0.0, False, False


def _names(stream: Stream, jobs: int) -> list[str]:
    return [stream.run_next()[0] for _ in range(jobs)]


def test_the_stream_alternates_rdd_jobs_and_queries_in_turn() -> None:
    queries: dict[str, Any] = {"q7": None, "q3": None}
    stream = _RecordingStream(None, queries, {}, 60.0)
    assert _names(stream, 6) == ["rdd", "q3", "rdd", "q7", "rdd", "q3"]
    assert stream.passes_done() == 1


def test_without_rdd_jobs_a_pass_is_every_query_once() -> None:
    stream = _RecordingStream(None, {"q7": None, "q3": None, "q19": None}, {}, 60.0, rdd_jobs=False)
    assert _names(stream, 3) == ["q19", "q3", "q7"]
    assert stream.passes_done() == 1
    assert _names(stream, 2) == ["q19", "q3"] and stream.passes_done() == 1


def test_the_kill_sweep_report_names_what_went_wrong_per_policy(tmp_path: Path) -> None:
    csv_path = tmp_path / "killsweep.csv"
    csv_path.write_text("policy,t_s,job,seconds,failed,wrong,kills\n"
                        "tr,10,q3,5,0,0,2\ntr,130,q7,6,0,0,6\n"
                        "never,20,q3,9,1,0,3\nnever,250,q7,9,0,1,8\n")
    text = kill_sweep(csv_path)
    assert "| tr | 2 | 6 | 0 | 0 | 2 |" in text
    assert "| never | 2 | 8 | 1 | 1 | 4 |" in text
    assert "`never` wrong answers: q7." in text and "`never` failed jobs: q3." in text
    assert "`tr`" not in text


def test_a_spark_setting_must_be_key_value_with_a_spark_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert spark_setting(" spark.sql.ui.retainedExecutions = 100") == ("spark.sql.ui.retainedExecutions", "100")
    with pytest.raises(SystemExit):
        main(["--conf", "sql.ui.retainedExecutions=100"])
    assert "--conf: 'sql.ui.retainedExecutions=100'; allowed: KEY=VALUE with a spark.* key" in capsys.readouterr().err
