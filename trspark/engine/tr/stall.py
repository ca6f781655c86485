"""How many cores a lost map output holds up: the weight of its re-computation (beyond the paper).

The paper prices a lost block by the task time needed to re-create it (``Er``, in
task-seconds), as if the re-runs simply took free cores. In Spark they do not: the stage that
reads the block cannot finish without it. A reader that misses a block fails its stage attempt
(FetchFailed); the stage's waiting tasks are held back until the parent re-ran the missing
partitions, and a reader not submitted yet waits for them before it starts. While the re-run
lasts, the cores that would have run those readers stand idle. So the cost of losing the block
is its re-computation time times the width of what waits on it:

.. math::

    W(S) = \\max\\bigl(1, \\min(\\text{cores}, \\; n_S)\\bigr), \\qquad
    n_S = \\sum_{R \\text{ reads } S} N_R

with :math:`N_R` the unfinished tasks of every reader stage of shuffle :math:`S` that Spark
submitted, plus the tasks of the readers a job's graph still plans (``JobSubmitted``); when no
reader is known yet, the writer's own task count stands in (as in :mod:`.horizon`). Every
re-computation term of Algorithm 2 is weighted by :math:`W`: ``C_Redo``, and the ``C_R`` and
``C_P(Y)`` parts of the backup costs (a loss before the copy is done, or of the peer copy,
stalls the readers just the same); the copy times ``C_B1`` / ``C_B2`` are not (a copy holds one
core). Both sides are then in core-seconds.

Why: unweighted, an output whose ``C_Redo`` is just under a copy's cost is left, yet its loss
fails a whole reader stage; on many executors those stalls, not the re-runs, dominate the job's
time.
"""

from __future__ import annotations

from trspark.engine.state import JobState


def stall_width(state: JobState, shuffle_id: int) -> int:
    """:math:`W(S)`: the cores a loss of one output of ``shuffle_id`` holds up (>= 1)."""
    waiting = sum(r.unfinished for r in state.reader_stages(shuffle_id))
    waiting += sum(p.num_tasks for p in state.unsubmitted_readers(shuffle_id))
    if waiting == 0 and shuffle_id not in state.shuffle_readers:
        writer = state.writer_stage(shuffle_id)
        waiting = writer.num_tasks if writer is not None else 1
    cores = state.total_cores()
    # max(1, min(cores, waiting)), written out: it runs on every decision.
    width = waiting if waiting < cores else cores
    return width if width > 1 else 1
