"""The result reports in ``docs/results/``, generated from the CSVs kept there.

``python -m jobs.reports`` rewrites one Markdown report per area (simulator, engine, live
TPC-DS, notices, history, overhead). Every figure in a report is read from its CSV; each CSV's
source records the command that wrote it, when, on which code and on which machine, since a
CSV alone cannot say. To replace a result, run the command, overwrite the CSV, update its
source in :mod:`jobs.reports.sources` (or :mod:`jobs.reports.live_sources`, for live Spark runs)
and run this module again.
``--check`` fails when a report is out of date.
"""
