"""`medallion build --watch`: keep streaming models running, and batch models fresh, until stopped.

After the first pass (every selected node, once), each streaming model runs as a continuous
query on its processing-time trigger, and the batch models are checked every few seconds; the
fingerprint check makes an unchanged one cost a few file reads. A query that fails is reported
and started again after a backoff (2 s, doubling to a minute); the command then exits non-zero.
Ctrl-C (SIGINT) or SIGTERM stops every query after the batch it has in flight, so nothing is cut
off half-way.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable

from .build.context import BuildContext
from .build.streaming import start_query
from .build.tally import BatchReport, StreamTally
from .build.throughput import progress_reports
from .failures import error_message
from .runner import NodeResult, own_session

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


# Seconds before a failed streaming query is started again, by how many times in a row it failed.
RESTART_BACKOFF = (2, 4, 8, 16, 32, 60)


def watch(ctx: BuildContext, selected: list[str], results: list[NodeResult],
          refresh: Callable[[BuildContext], list[NodeResult]],
          on_result: Callable[[NodeResult], None],
          on_batch: Callable[[BatchReport], None], stop: threading.Event) -> None:
    """Run until `stop`. `results` (the first pass's) gains every failure seen meanwhile, so
    the command exits non-zero when any query failed during the session."""
    failed = {r.name for r in results if r.status in ("error", "skipped")}
    nodes = ctx.graph.nodes
    streaming = [n for n in selected
                 if nodes[n].config.materialized == "streaming" and n not in failed
                 and not nodes[n].config.once]  # a once-only flow ran in the first pass
    ctx = replace(ctx, full_refresh=False)  # --full-refresh applies to the first pass only
    queries: dict[str, tuple] = {}
    failures: dict[str, int] = {}  # failures in a row, per model
    restart_at = {name: 0.0 for name in streaming}

    def fail(name: str, message: str) -> None:
        failures[name] = failures.get(name, 0) + 1
        wait = RESTART_BACKOFF[min(failures[name], len(RESTART_BACKOFF)) - 1]
        restart_at[name] = time.monotonic() + wait
        result = NodeResult(name, nodes[name].file.kind, "streaming", "error",
                            message=f"{message} (restarting in {wait}s)")
        results.append(result)
        on_result(result)

    try:
        while not stop.is_set():
            for name, due in list(restart_at.items()):
                if time.monotonic() >= due:
                    del restart_at[name]
                    try:
                        # Each query in a session of its own, as in the first pass: queries'
                        # micro-batches run side by side, each registering its inputs' views.
                        queries[name] = start_query(own_session(ctx), nodes[name],
                                                    continuous=True, on_batch=on_batch)[:2]
                    except Exception as exc:
                        fail(name, error_message(exc))
            for name, (query, tally) in list(queries.items()):
                if tally.batches:
                    failures.pop(name, None)  # it works again: the next failure waits briefly
                if not query.isActive:
                    del queries[name]
                    error = tally.error or query.exception()
                    fail(name, error_message(error) if error else "the query stopped")
            for result in refresh(ctx):
                if result.status != "up_to_date":
                    on_result(result)
                    if result.failed:
                        results.append(result)
            stop.wait(POLL_SECONDS)
    finally:
        for query, tally in queries.values():
            stop_gracefully(query, tally)


def stop_gracefully(query, tally: StreamTally, poll_seconds: float = 0.2) -> None:
    """Stop a running query after the batch in flight (if any) has finished."""
    while query.isActive and query.status.get("isTriggerActive"):
        time.sleep(poll_seconds)
    query.stop()
    if tally.detach_listener is not None:
        tally.detach_listener()
        # Spark's event bus tells the listener of a batch after the batch ends, so a stop can
        # come first (CI saw it); the query keeps its recent progress itself.
        for progress in progress_reports(query):
            tally.progressed(progress)
        for batch_id in sorted(tally.pending):  # batches whose progress never came
            tally.on_batch(tally.pending.pop(batch_id))
