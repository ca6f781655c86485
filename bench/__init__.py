"""Benchmark scripts, each run as ``python bench/NAME.py`` from a checkout where trspark is
installed (``make setup``); tests import the reusable parts as ``bench.NAME``."""
