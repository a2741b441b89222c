"""The event log: a Delta table in the warehouse (`<warehouse>/_medallion/events`) that every
build, test and streaming micro-batch appends to, written by the target's own engine.

One row per event (the columns: EVENT_COLUMNS; documented in docs/operating.md):
- `run_started` / `run_finished`: a command began and ended (`run_finished` is missing for a
  process that was killed);
- `node`: a seed, model or test finished, with its status, rows, version, expectations, error;
- `batch`: a streaming micro-batch committed, with its query's id (the app id of its Delta
  app transactions). A process killed after a batch's data commit but before its event was
  written loses the event; the next run of the query records it at its first batch (every
  batch its table has committed beyond the last the log has for the query, marked as such).
  So that it need not read the log to know there is nothing to record, the last batch the log
  has for a query is noted beside its checkpoint (LOGGED_FILE) after each append.
Events go through a background writer, one commit per second at most (fewer when commits are
slow: FLUSH_SHARE), so they never hold up a build or a micro-batch; a failure to write them is
reported once and the data stays as built. On a local warehouse delta-rs appends them whatever
the engine; on object storage the target's engine does (on delta-spark a Spark job).
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import pyarrow as pa
from deltalake.exceptions import TableNotFoundError

from ..core.error_text import error_message
from ..core.errors import RunStopped
from ..core.locations import join
from ..engines.deltars import open_table
from ..run.runner import NodeResult
from ..storage.files import read_text, write_text
from .tablefacts import newest_value

if TYPE_CHECKING:
    from ..core.nodes import CompiledNode
    from ..core.project import Project
    from ..dag.graph import Graph
    from ..engines.base import Engine
    from ..materialize.streaming.tally import BatchReport

EVENTS_FOLDER = ("_medallion", "events")
COUNTS = pa.map_(pa.string(), pa.int64())
TIMESTAMP = pa.timestamp("us", tz="UTC")
EVENT_COLUMNS = pa.schema([
    ("run_id", pa.string()), ("event_time", TIMESTAMP), ("event_type", pa.string()),
    ("command", pa.string()), ("target", pa.string()), ("engine", pa.string()),
    ("node", pa.string()), ("kind", pa.string()), ("materialized", pa.string()),
    ("status", pa.string()), ("started_at", TIMESTAMP), ("seconds", pa.float64()),
    ("batch_id", pa.int64()), ("query_id", pa.string()), ("rows_read", pa.int64()), ("rows_written", pa.int64()),
    ("failing_rows", pa.int64()), ("files_added", pa.int64()), ("version", pa.int64()), ("expectations", COUNTS),
    ("malformed", pa.int64()), ("rescued", pa.int64()), ("source_lag", COUNTS),
    ("newest_event_time", TIMESTAMP), ("message", pa.string()),
    # added later: older logs gain it (null) on their next append
    ("rows_checked", pa.int64()),
])
FLUSH_SECONDS = 1.0  # how long the background writer gathers events into one commit, at least
# ...and at least this many times as long as the last commit took: on delta-spark an append is
# a Spark job (1-2 s) that would otherwise take a core from the build it records.
FLUSH_SHARE = 2
LOGGED_FILE = "medallion_logged.json"  # beside a checkpoint: {query_id, batch_id} in the log
RECOVERED = "committed by an earlier run that stopped before recording it; counts not known"


def events_path(warehouse: str) -> str:
    return join(warehouse, *EVENTS_FOLDER)


def logged_events(warehouse: str, columns: list[str],
                  filters: list[tuple[str, str, Any]]) -> pa.Table | None:
    """The event log's rows that pass `filters`, with those of `columns` it has (a log written
    before a column was added lacks it); None when nothing has been logged yet."""
    try:
        log = open_table(events_path(warehouse))
    except TableNotFoundError:
        return None
    logged = {f.name for f in log.schema().fields}
    return log.to_pyarrow_table(columns=[c for c in columns if c in logged], filters=filters)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass(frozen=True)
class Run:
    """One command's run: what every event of it carries."""

    run_id: str
    command: str
    target: str
    engine: str


class EventLog:
    """Records one run's events into the warehouse's event log."""

    def __init__(self, engine: Engine, project: Project, graph: Graph, command: str,
                 on_problem: Callable[[str], None] = lambda message: None):
        self.engine = engine
        self.project = project
        self.graph = graph
        self.path = events_path(project.target.warehouse)
        self.run = Run(uuid.uuid4().hex, command, project.target.name, project.target.engine)
        self.on_problem = on_problem
        self.problem: str | None = None  # the first failure to write, reported once
        # events, and actions to run once the events before them are written
        self.queued: queue.Queue[dict[str, Any] | Callable[[], None]] = queue.Queue()
        self.flushes = 0
        self.last_append = 0.0  # seconds the last commit took
        self.closed = threading.Event()
        self.writer = threading.Thread(target=self._write_queued, daemon=True,
                                       name="medallion-event-log")
        self.writer.start()

    # What a run records.

    def run_started(self, nodes: int) -> None:
        self.queued.put(self._event("run_started", status="running",
                                    message=f"{nodes} node(s) selected"))

    def node_finished(self, result: NodeResult) -> None:
        node = self.graph.nodes.get(result.name)
        ended = now()
        test = result.kind in ("test", "unit")
        self.queued.put(self._event(
            "node", node=result.name, kind=result.kind, materialized=result.materialized,
            status=result.status, event_time=ended,
            started_at=ended - dt.timedelta(seconds=result.seconds), seconds=result.seconds,
            rows_read=result.rows_read, rows_written=None if test else result.rows,
            failing_rows=result.rows if test else None, files_added=result.files_added,
            version=result.version, expectations=result.expectations or None,
            rows_checked=result.rows_checked, malformed=result.malformed, rescued=result.rescued,
            source_lag=result.stream.get("kafka_lag") or None,
            message=result.message or None,
            # read by the writer thread: the table's log, not the build's time
            newest_of=node if result.status in ("success", "warn") else None))

    def run_finished(self, results: list[NodeResult], started: float) -> None:
        failed = [r.name for r in results if r.failed]
        self.queued.put(self._event(
            "run_finished", status="error" if failed else "success",
            seconds=round(time.time() - started, 3),
            message=f"failed: {', '.join(failed)}" if failed else None))

    def batch_committed(self, report: BatchReport) -> None:
        node = self.graph.nodes[report.model]
        self.queued.put(self._event(
            "batch", node=report.model, kind=node.file.kind, materialized="streaming",
            status="success", batch_id=report.batch_id, query_id=report.app_id,
            rows_read=report.rows_read, rows_written=report.rows,
            files_added=report.files_added, version=report.version,
            expectations=report.expectations or None, rows_checked=report.rows_checked,
            malformed=report.malformed, rescued=report.rescued, source_lag=report.kafka_lag or None,
            seconds=report.seconds, newest_of=node))

    def batches_committed(self, model: str, query_id: str, committed: int | None) -> None:
        """At a query's first batch: record the batches up to `committed` (the last its table
        has) that are not in the log, which a killed run committed but never recorded."""
        if committed is None or self._logged(model, query_id) >= committed:
            return
        self.queued.join()  # this run's earlier events for the query are in the log first
        recorded = None  # no log yet, or none of the query's batches in it: all are missing
        if self.engine.table_exists(self.path):
            from ..spark.pyspark_api import F

            log = self.engine.read_table(self.path)
            newest = log.where(F.col("query_id") == query_id).agg(F.max("batch_id")).first()
            recorded = None if newest is None else newest[0]
        node = self.graph.nodes[model]
        for batch_id in range(0 if recorded is None else recorded + 1, committed + 1):
            self.queued.put(self._event(
                "batch", node=model, kind=node.file.kind, materialized="streaming",
                status="success", batch_id=batch_id, query_id=query_id, message=RECOVERED))

    def after_written(self, action: Callable[[], None]) -> None:
        """Run `action` once every event queued before it is in the log (or failed to be)."""
        self.queued.put(action)

    def close(self, timeout: float = 60) -> None:
        """Write what is queued, then stop the writer."""
        self.closed.set()
        self.writer.join(timeout)

    # How it is written.

    def _event(self, event_type: str, **fields: Any) -> dict[str, Any]:
        return {"run_id": self.run.run_id, "event_time": fields.pop("event_time", None) or now(),
                "event_type": event_type, "command": self.run.command,
                "target": self.run.target, "engine": self.run.engine, **fields}

    def _newest(self, node: CompiledNode | None) -> dt.datetime | None:
        """The newest event_time in the node's table, from its files' statistics."""
        if node is None or node.config.materialized == "view":
            return None
        column = node.config.event_time
        if not column:
            return None
        try:
            return newest_value(self.project.table_path(node.file), column)
        except Exception:  # a table without statistics: not known
            return None

    def _write_queued(self) -> None:
        while True:
            closing = self.closed.wait(max(FLUSH_SECONDS, FLUSH_SHARE * self.last_append))
            events, actions = [], []
            while not self.queued.empty():
                event = self.queued.get()
                if callable(event):
                    actions.append(event)
                    continue
                node = event.pop("newest_of", None)
                events.append({**event, "newest_event_time": self._newest(node)}
                              if node is not None else event)
            if events:
                self.flushes += 1
                started = time.perf_counter()
                if self._append(events, (f"medallion-run:{self.run.run_id}", self.flushes)):
                    self._note_logged(events)
                self.last_append = time.perf_counter() - started
            for action in actions:
                self._run(action)
            for _ in events + actions:
                self.queued.task_done()
            if closing and self.queued.empty():
                return

    def _run(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # a skipped record only costs the next build a query start
            self.on_problem(f"after writing the event log: {error_message(exc)}")

    def _append(self, events: list[dict[str, Any]], txn: tuple[str, int]) -> bool:
        try:
            rows = pa.Table.from_pylist(events, schema=EVENT_COLUMNS)
            self.engine.append_rows(rows, self.path, txn)
            return True
        except RunStopped:  # said once, by the node it stops (the run ends there)
            return False
        except Exception as exc:  # the data is built; the log only misses these events
            if self.problem is None:
                self.problem = f"the event log {self.path} was not written: {error_message(exc)}"
                self.on_problem(self.problem)
            return False

    def _logged_file(self, model: str) -> str:
        return join(self.project.checkpoint_path(self.graph.nodes[model].file), LOGGED_FILE)

    def _logged(self, model: str, query_id: str) -> int:
        """The last batch of the query the log is known to have; -1 when not known."""
        try:
            noted = json.loads(read_text(self.engine, self._logged_file(model)))
        except (FileNotFoundError, ValueError):
            return -1
        return noted["batch_id"] if noted.get("query_id") == query_id else -1

    def _note_logged(self, events: list[dict[str, Any]]) -> None:
        last: dict[str, tuple[str, int]] = {}
        for event in events:
            if event["event_type"] == "batch":
                last[event["node"]] = (event["query_id"], event["batch_id"])
        for model, (query_id, batch_id) in last.items():
            try:
                write_text(self.engine, self._logged_file(model),
                                       json.dumps({"query_id": query_id, "batch_id": batch_id}))
            except Exception:  # without the note, the query's next run reads the log instead
                pass

