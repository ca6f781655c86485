"""Discrete-event simulator of Spark DAG jobs on evictable VMs (TR-Spark §6).

Modules, each with one job:

* :mod:`simulators.dag` -- a job as data (stages, shuffles, per-task work);
* :mod:`simulators.workloads` -- seeded DAGs shaped like the paper's four workloads;
* :mod:`simulators.eventlog` -- a recorded Spark application (event log) as a job;
* :mod:`simulators.world` -- the cluster, its pools, bandwidths and the true VM lifetimes;
* :mod:`simulators.kernel` -- the clock and the heap, one instant at a time;
* :mod:`simulators.core` -- the Spark world model on that kernel: scheduling and lost-output
  semantics, with its parts :mod:`simulators.cluster`, :mod:`simulators.stages`,
  :mod:`simulators.backups` (:mod:`simulators.model`, :mod:`simulators.state`,
  :mod:`simulators.transfers` help them);
* :mod:`simulators.oracle` -- the simulator-only policy that knows every death time;
  :mod:`simulators.oracle_family` plays its family of strategies and keeps the best run;
* :mod:`simulators.runner`, :mod:`simulators.metrics`, :mod:`simulators.sweep` -- R runs in
  parallel, their summary, sweeps with CSV and plots; :mod:`simulators.pricing` -- VM-hours and
  remote writes in USD; :mod:`simulators.cli`, :mod:`simulators.options` and :mod:`simulators.report` -- the commands.
"""
