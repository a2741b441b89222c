"""What a run tells the world as it goes: the event log (always) and OpenLineage events (when
the target sets `lineage:`). Both listen to the same callbacks the terminal does."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterator

from ..materialize.context import BuildContext
from ..run.runner import NodeResult

if TYPE_CHECKING:
    from ..materialize.streaming.tally import BatchReport
from .eventlog import EventLog


@dataclass(frozen=True)
class Observed:
    """The build context (recording each micro-batch) and the callbacks to run with."""

    ctx: BuildContext
    begin: Callable[[str], None]
    result: Callable[[NodeResult], None]
    batch: Callable[[BatchReport], None]  # a micro-batch under --watch


@contextmanager
def observed_run(ctx: BuildContext, command: str, total: int, begin: Callable[[str], None],
                 result: Callable[[NodeResult], None], batch: Callable[[BatchReport], None],
                 on_problem: Callable[[str], None]) -> Iterator[Observed]:
    """A run recorded in the event log and, when configured, sent as lineage: yields what to
    build with; each callback records, then passes on to the one given."""
    events = EventLog(ctx.engine, ctx.project, ctx.graph, command, on_problem)
    lineage = None
    if ctx.project.target.lineage:
        from .lineage import LineageEmitter

        lineage = LineageEmitter(ctx.project.target.lineage, ctx.engine, ctx.project, ctx.graph,
                                 events.run.run_id, command, on_problem)
    events.run_started(total)
    results: list[NodeResult] = []
    started = time.time()

    def began(name: str) -> None:
        if lineage:
            lineage.started(name)
        begin(name)

    def finished(node_result: NodeResult) -> None:
        results.append(node_result)
        events.node_finished(node_result)
        if lineage:
            lineage.finished(node_result)
        result(node_result)

    def batched(report: BatchReport) -> None:
        if lineage:
            lineage.batch(report)
        batch(report)

    try:
        yield Observed(replace(ctx, record_batch=events.batch_committed,
                               record_committed=events.batches_committed,
                               after_recorded=events.after_written), began, finished,
                       batched)
    finally:
        events.run_finished(results, started)
        events.close()
        if lineage:
            lineage.close()
