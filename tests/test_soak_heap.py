"""The soak's live-heap sample on a real driver JVM: it follows what the driver references, not what it once allocated."""

from __future__ import annotations

import gc

import pytest
from jvm_gateway import wait_for

from jobs.soak import live_heap_mb

pytestmark = pytest.mark.spark

BYTES = 200_000_000


def test_the_live_heap_counts_a_referenced_array_and_drops_once_it_is_released() -> None:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("trspark-soak-heap")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "1g").getOrCreate())
    try:
        sc = spark.sparkContext
        before = live_heap_mb(sc)
        # A Java array the driver references through py4j (long[]: py4j would copy a byte[] to Python).
        held = sc._gateway.new_array(sc._jvm.long, BYTES // 8)
        holding = live_heap_mb(sc)
        assert holding - before >= 0.95 * BYTES / 1e6
        # py4j's finalizer thread tells the JVM to drop the reference, some time after Python drops it.
        del held
        gc.collect()
        after = wait_for(lambda: (mb := live_heap_mb(sc)) < before + 0.1 * BYTES / 1e6 and mb,
                         what="the released array to leave the live heap", every=0.2)
        print(f"live heap: {before} MB, holding {holding} MB, released {after} MB")
    finally:
        spark.stop()
