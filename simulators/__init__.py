"""Discrete-event simulator of Spark DAG jobs on evictable VMs (TR-Spark §6).

Modules, each with one job:

* :mod:`simulators.dag` -- a job as data (stages, shuffles, per-task work);
* :mod:`simulators.workloads` -- seeded DAGs shaped like the paper's four workloads;
* :mod:`simulators.eventlog` -- a recorded Spark application (event log) as a job;
* :mod:`simulators.world` -- the cluster, its bandwidths and the true VM lifetimes;
* :mod:`simulators.core` -- the event loop and Spark's scheduling / lost-output semantics
  (:mod:`simulators.state`, :mod:`simulators.backups`, :mod:`simulators.transfers` help it);
* :mod:`simulators.oracle` -- the simulator-only policy that knows every death time;
* :mod:`simulators.runner`, :mod:`simulators.metrics`, :mod:`simulators.sweep` -- R runs in
  parallel, their summary, sweeps with CSV and plot; :mod:`simulators.cli` -- the commands.
"""
