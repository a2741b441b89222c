"""`medallion build --watch`: keep streaming models running, and batch models fresh, until stopped.

After the first pass (every selected node, once), each streaming model runs as a continuous
query on its processing-time trigger, and the batch models and the data tests run again where
their inputs changed (an unchanged one costs a few file reads): at once when a streaming model
a batch model reads commits, else every 2 s (edits, batch sources), one with a target lag at
most every its wait (`medallion plan`; what lands meanwhile is refreshed together). Each result
is printed as it comes (a verdict recalled on unchanged inputs is not); each model is checked
as edited (report/static_checks.py) before it runs again. A node that fails is tried again
after a backoff (2 s, doubling to a minute), what reads it waiting meanwhile rather than run
on stale data; its error is printed when new. The command exits non-zero when anything failed.
Ctrl-C (SIGINT) or SIGTERM stops what refreshes (its Spark jobs cancelled: a commit is whole or
not made) and every query after the batch it has in flight; a second one stops them at once.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator

from ..core.error_text import error_message
from ..core.errors import MedallionError
from ..dag.graph import Graph
from ..materialize.context import BuildContext
from ..materialize.strategies import strategy_for
from ..materialize.streaming.driver import start_query
from ..materialize.streaming.tally import BatchReport, StreamTally
from ..report.static_checks import refusals
from ..run.runner import NodeResult, own_session
from ..run.scheduler import NOT_STARTED, STOPPED, execute
from ..spark.progress import progress_reports
from .invocation import (
    COMMAND_KINDS,
    Invocation,
    Loaded,
    load,
    selected_nodes,
    selected_tests,
)
from .modes import refresh_waits
from .plan import plan, runner

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

POLL_SECONDS = 2.0
# Seconds before a failed node is first tried again (2 unless set); each try in a row that
# fails doubles it, to 30 times as long (a minute). Tests set it short.
BACKOFF_VARIABLE = "MEDALLION_WATCH_BACKOFF"


def restart_backoff() -> tuple[float, ...]:
    """Seconds before a failed node is tried again, by how many times in a row it failed."""
    setting = os.environ.get(BACKOFF_VARIABLE, "2")
    try:
        first = float(setting)
    except ValueError:
        first = 0.0  # not a number: refused as one below 0 is
    if not first > 0:  # 0 or less would try a failing node again at every poll
        raise MedallionError(f"{BACKOFF_VARIABLE}={setting!r} is not a number of seconds above 0",
                             hint=f"unset it, or set e.g. {BACKOFF_VARIABLE}=2")
    return (first, first * 2, first * 4, first * 8, first * 16, first * 30)


def retried(backoff: tuple[float, ...]) -> str:
    return (f"\n(tried again after a backoff of {backoff[0]:g} s, doubling to "
            f"{backoff[-1]:g} s; what reads it waits)")


@dataclass(frozen=True)
class Stops:
    """Ctrl-C or SIGTERM: `gently` at the first (after the batches in flight), `now` at the
    second. `woken` ends the wait between refreshes early: set by a stop, and by a streaming
    commit that a batch model reads (gold follows its input's commit, not the next poll)."""
    gently: threading.Event
    now: threading.Event
    woken: threading.Event = field(default_factory=threading.Event)

    def rest(self, seconds: float) -> None:
        """Wait until woken (by a commit or a stop), or `seconds` at most."""
        self.woken.wait(seconds)
        self.woken.clear()


@contextmanager
def stop_on_signals() -> Iterator[Stops]:
    """Turn SIGINT/SIGTERM into Stops instead of an exception raised wherever the main thread
    is (a JVM call, mid-way, would leave py4j broken)."""
    stops = Stops(threading.Event(), threading.Event())

    def stop(*_: object) -> None:
        (stops.now if stops.gently.is_set() else stops.gently).set()
        stops.woken.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stops
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class Failing:
    """A node that failed under --watch: how often in a row, when it is tried again, and the
    error it last printed."""
    times: int
    due: float
    said: str


def note_failure(failing: dict[str, Failing], name: str, message: str,
                 backoff: tuple[float, ...]) -> bool:
    """Record a failure and its backoff; True when its error is new (to be printed)."""
    before = failing.get(name)
    times = before.times + 1 if before else 1
    wait = backoff[min(times, len(backoff)) - 1]
    failing[name] = Failing(times, time.monotonic() + wait, message)
    return before is None or before.said != message


@dataclass
class RefreshSchedule:
    """When each batch model refreshed to a target lag may refresh again: its wait after its
    last write (modes.refresh_waits), so that what lands meanwhile is refreshed together."""
    waits: dict[str, float]
    due: dict[str, float] = field(default_factory=dict)  # name -> monotonic time

    def held(self, now: float) -> set[str]:
        return {name for name, due in self.due.items() if due > now}

    def told(self, result: NodeResult, now: float) -> None:
        if result.name in self.waits and result.status in ("success", "warn"):
            self.due[result.name] = now + self.waits[result.name]


def held_back(ctx: BuildContext, failing: dict[str, Failing], stopped: set[str]) -> set[str]:
    """Nodes not to run now: those failing until their next try, streaming models whose query
    does not run, and everything that reads them (it would read stale or half-fixed data)."""
    now = time.monotonic()
    held = {n for n, f in failing.items() if f.due > now} | stopped
    return held | {d for n in held for d in ctx.graph.descendants(n)}


def watch(ctx: BuildContext, selected: list[str], first_pass: list[NodeResult],
          reload: Callable[[], Graph],
          refresh: Callable[[BuildContext, set[str], Callable[[NodeResult], None],
                             threading.Event], None],
          report: Callable[[NodeResult], None], on_batch: Callable[[BatchReport], None],
          stops: Stops) -> list[NodeResult]:
    """Run until stopped; returns every result it reported (refreshes, tests, failures).
    reload(): the project's graph as its files are now, each poll (an edit, a fix, counts).
    refresh(ctx, held, on_result, stop): the batch models and data tests but those held, once,
    each result told as it comes; it stops what runs when `stop` is set."""
    nodes = ctx.graph.nodes
    streaming = [n for n in selected if nodes[n].config.materialized == "streaming"
                 and not nodes[n].config.once]  # a once-only flow ran in the first pass
    ctx = replace(ctx, full_refresh=False)  # --full-refresh applies to the first pass only
    queries: dict[str, tuple[StreamingQuery, StreamTally]] = {}
    failing: dict[str, Failing] = {}
    backoff = restart_backoff()
    for result in first_pass:  # printed already; tried again after a backoff
        if result.failed:
            note_failure(failing, result.name, result.message, backoff)
    reported: list[NodeResult] = []
    # Streaming models a batch model reads: their commits wake the refresh.
    read_by_batch = {n for n in streaming if any(
        nodes[c].config.materialized != "streaming" for c in ctx.graph.children.get(n, ()))}

    def committed(report: BatchReport) -> None:
        if report.rows and report.model in read_by_batch:
            stops.woken.set()

    def said(result: NodeResult) -> None:
        if result.message in (NOT_STARTED, STOPPED) or result.recalled:
            # Ctrl-C ended the watch as this ran: what it committed stays; not a failure. A
            # verdict recalled on unchanged inputs was said when it was reached.
            return
        if result.failed:
            if not note_failure(failing, result.name, result.message, backoff):
                return  # the same error again: said once
            result = replace(result, message=result.message + retried(backoff))
        elif result.status in ("success", "warn"):
            failing.pop(result.name, None)
        if result.status not in ("up_to_date", "skipped"):
            reported.append(result)
            report(result)

    def failed(name: str, message: str) -> None:
        said(NodeResult(name, nodes[name].file.kind, "streaming", "error", message=message))

    try:
        while not stops.gently.is_set():
            held = held_back(ctx, failing, set())
            for name in streaming:
                if name in queries or name in held:
                    continue
                try:
                    ctx = replace(ctx, graph=reload())  # the model as it is now (fixed?)
                    if refused := refusals(ctx.project, ctx.graph, [name]).get(name):
                        raise MedallionError(refused)
                    # Each query in a session of its own, as in the first pass: queries'
                    # micro-batches run side by side, each registering its inputs' views.
                    node = ctx.graph.nodes[name]
                    into = strategy_for(node).into
                    assert into is not None  # a streaming strategy adds rows through one
                    queries[name] = start_query(own_session(ctx), node, into, continuous=True,
                                                on_batch=on_batch, on_commit=committed)[:2]
                except Exception as exc:
                    failed(name, error_message(exc))
            for name, (query, tally) in list(queries.items()):
                if tally.batches:
                    failing.pop(name, None)  # it works again: the next failure waits briefly
                if not query.isActive:
                    del queries[name]
                    error = tally.error or query.exception()
                    failed(name, error_message(error) if error else "the query stopped")
            try:
                ctx = replace(ctx, graph=reload())
            except MedallionError as exc:  # an edit that breaks the project: the last good one
                said(NodeResult("files", "project", "", "error", message=str(exc)))
                stops.rest(POLL_SECONDS)
                continue
            said(NodeResult("files", "project", "", "up_to_date"))  # it loads (again)
            refresh(ctx, held_back(ctx, failing, set(streaming) - set(queries)) - set(streaming),
                    said, stops.gently)
            stops.rest(POLL_SECONDS)
    finally:
        for query, tally in queries.values():
            stop_gracefully(query, tally, stops.now)
    return reported


def stop_gracefully(query: StreamingQuery, tally: StreamTally, now: threading.Event | None = None,
                    poll_seconds: float = 0.2) -> None:
    """Stop a running query after the batch in flight (if any) has finished, or at once when
    `now` is set."""
    while query.isActive and query.status.get("isTriggerActive") and not (now and now.is_set()):
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


def keep_fresh(inv: Invocation, ctx: BuildContext, chosen: list[str], results: list[NodeResult],
           command: str, on_result: Callable[[NodeResult], None],
           on_batch: Callable[[BatchReport], None]) -> list[NodeResult]:
    """After the first pass: keep the nodes fresh until SIGINT/SIGTERM; returns what it said."""
    # delta-rs and an HTTP server: for --watch alone, not every command importing this module
    from ..report.metrics import metrics_served

    quiet = replace(inv, full_refresh=False)
    latest: list[Loaded] = []
    schedule = RefreshSchedule({})
    lags: list[object] = []  # the lags and modes the schedule's waits were planned for

    def reload() -> Graph:
        """The project rendered again, so is_incremental() and edited SQL are current."""
        latest[:] = [load(quiet, engine=ctx.engine)]
        return latest[0].graph

    def refresh(watch_ctx: BuildContext, held: set[str], told: Callable[[NodeResult], None],
                stop: threading.Event) -> None:
        """Batch models, and then their data tests (`build`), as they are due."""
        again = latest[0]
        planned_for = [(n, c.config.target_lag, c.config.materialized)
                       for n, c in again.graph.nodes.items()]
        if lags != [planned_for]:  # planned again only when a lag or mode changed
            lags[:], schedule.waits = [planned_for], refresh_waits(again)
        held = held | schedule.held(time.monotonic())
        names = [n for n in selected_nodes(quiet, again, COMMAND_KINDS[command])
                 if again.graph.nodes[n].config.materialized not in ("streaming", "view")
                 and n not in held]
        tests = [t for t in selected_tests(quiet, again) if not set(again.tests[t].refs) & held
                 ] if command == "build" else []
        def scheduled(result: NodeResult) -> None:
            schedule.told(result, time.monotonic())
            told(result)

        steps = plan(again.graph, again.tests, names, tests,
                     watch_ctx.engine.capabilities.stages_writes)
        refused = refusals(again.project, again.graph, names)  # the models as edited
        execute(steps.order, steps.parents, runner(watch_ctx, again.tests, True, refused),
                steps.labels, quiet.threads or again.project.target.threads, scheduled,
                on_interrupt=watch_ctx.engine.cancel_jobs, stop=stop, gates=steps.gates)

    with metrics_served(inv.metrics_port, lambda: (
            ctx.project, latest[0].graph if latest else ctx.graph)), stop_on_signals() as stops:
        return watch(ctx, chosen, results, reload, refresh, on_result, on_batch, stops)
