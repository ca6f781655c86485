"""``python -m jobs.tpcds``: the same commands as ``trspark bench``."""

from jobs.tpcds.cli import bench

bench(prog_name="python -m jobs.tpcds")
