"""`medallion build --watch`: keep streaming models running, and batch models fresh, until stopped.

After the first pass (every selected node, once), each streaming model runs as a continuous
query on its processing-time trigger, and the batch models are checked every few seconds; the
fingerprint check makes an unchanged one cost a few file reads. Ctrl-C (SIGINT) or SIGTERM stops
every query after the batch it has in flight, so nothing is cut off half-way.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable

from .failures import error_message
from .materializations import BuildContext
from .runner import NodeResult
from .streaming import BatchReport, start_query, stop_gracefully

POLL_SECONDS = 2.0


@contextmanager
def stop_on_signals(stop: threading.Event):
    """Turn SIGINT/SIGTERM into `stop` instead of an exception (and instead of pyspark's handler,
    which would cancel the running Spark jobs mid-batch)."""
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def watch(ctx: BuildContext, selected: list[str], first_pass: list[NodeResult],
          refresh: Callable[[BuildContext], list[NodeResult]],
          on_result: Callable[[NodeResult], None],
          on_batch: Callable[[BatchReport], None], stop: threading.Event) -> None:
    failed = {r.name for r in first_pass if r.status in ("error", "skipped")}
    nodes = ctx.graph.nodes
    streaming = [n for n in selected
                 if nodes[n].config.materialized == "streaming" and n not in failed]
    ctx = replace(ctx, full_refresh=False)  # --full-refresh applies to the first pass only
    queries = {}
    try:
        for name in streaming:
            queries[name] = start_query(ctx, nodes[name], continuous=True, on_batch=on_batch)
        while not stop.is_set():
            for name, (query, tally) in list(queries.items()):
                if not query.isActive:
                    del queries[name]
                    error = tally.error or query.exception()
                    node = nodes[name]
                    on_result(NodeResult(name, node.file.kind, "streaming", "error",
                                         message=error_message(error) if error else
                                         "the query stopped"))
            results = refresh(ctx)
            for result in results:
                if result.status != "up_to_date":
                    on_result(result)
            stop.wait(POLL_SECONDS)
    finally:
        for query, _ in queries.values():
            stop_gracefully(query)
