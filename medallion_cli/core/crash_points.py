"""Fault injection for the crash tests: kill this process at a named point of a streaming batch.

MEDALLION_CRASH_AT="<model>:<point>:<batch id>" makes the process SIGKILL itself when that
model's batch reaches that point, as a machine failure would stop it. Points: batch_start
(nothing written yet), committed (the Delta commit is made; Spark's checkpoint does not know
yet, so the batch will be replayed) and, with the number of batches the query ran in place of the
batch id, stopped (the query has finished; its last batches may not be in the event log yet);
and reset with batch id 0 (build --reset-flow removed the old checkpoint, not yet made the new).
Over Spark Connect a batch runs in the server's Python worker: the point travels there with the
batch's function (`armed`, then `arm` there), and the worker is what is killed.
"""

from __future__ import annotations

import os
import signal

ENV = "MEDALLION_CRASH_AT"


def crash_point(model: str, point: str, batch_id: int) -> None:
    if os.environ.get(ENV) == f"{model}:{point}:{batch_id}":
        os.kill(os.getpid(), signal.SIGKILL)


def armed() -> str | None:
    """The point this process is set to crash at, if any."""
    return os.environ.get(ENV)


def arm(point: str | None) -> None:
    """Crash this process (a server's worker) at `point` too."""
    if point:
        os.environ[ENV] = point
