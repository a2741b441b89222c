"""Streaming micro-batches over Spark Connect: foreachBatch runs in a Python worker the server
starts, not in this process, so the function goes there pickled with what a batch needs (the
project, the graph, the node, how the query started) and builds there a context of its own,
whose engine uses the batch's session. medallion_cli must be importable by the server's
Python (spark.pyspark.python), at this client's version.

What each batch did comes back as a file beside the query's checkpoint (its report, the first
look's committed batch id, its phases' seconds); a failure as one more file with the error. This
process reads them when the query stops (or, under --watch, as Spark reports each batch) and
tells the tally and the event log, as a batch run here does itself. Each query run has a folder
of its own: a worker of a server killed mid-batch may live on and write its failure late, into
its run's folder, not into the next build's.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...core.crash_points import arm, armed
from ...core.error_text import error_message
from ...core.errors import MedallionError
from ...core.locations import join
from ...core.nodes import CompiledNode
from ...core.project import Project, Target
from ...dag.graph import Graph
from ...storage.files import list_files, read_text, remove, write_text
from ..context import BuildContext
from ..sources.landing import StillBeingWritten
from ..writing.writes import Into
from .checkpoints import QueryStart
from .micro_batch import write_batch
from .tally import BatchReport, StreamTally

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

FOLDER = "medallion_batches"  # in a checkpoint: a folder per query run, a file per batch
ERROR_FILE = "error.json"
# What a worker fails with when it cannot import medallion (Spark's words, then Python's).
NOT_INSTALLED = ("STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE", "No module named 'medallion_cli")
WORKER_DIED = "Python worker exited unexpectedly"  # Spark's words for a worker that ended
# Spark gives a Python worker it starts 10 s to connect back (PythonWorkerFactory; not a
# setting), and a busy server's may take longer to import pyspark. Its query has not started
# then, so starting it again is safe, after a pause that lets the late worker end and the
# server catch up (on two loaded cores, three starts in a row were late): pauses that double
# from FIRST_PAUSE while they fit in the target's worker_wait (spark: worker_wait).
WORKER_LATE = "Timed out while waiting for the Python worker to connect back"
FIRST_PAUSE = 5.0


def start_pauses(wait: float) -> list[float]:
    """The pauses before each start again: doubling from FIRST_PAUSE, their sum at most `wait`
    (the default 35 s: 5, 10, 20)."""
    pauses: list[float] = []
    while sum(pauses) + FIRST_PAUSE * 2 ** len(pauses) <= wait:
        pauses.append(FIRST_PAUSE * 2 ** len(pauses))
    return pauses


def reports_location(ctx: BuildContext, node: CompiledNode) -> str:
    return join(ctx.project.checkpoint_path(node.file), FOLDER)


@dataclass
class ServerBatch:
    """The foreachBatch function of a query whose batches run on the server."""

    project: Project
    graph: Graph
    node: CompiledNode
    start: QueryStart
    full_refresh: bool
    selected: frozenset[str]
    deferred: dict[str, str]
    reports: str
    into: Into  # how batches' rows join the table (the node's strategy)
    crash_at: str | None = None  # the crash tests' (core/crash_points.py)
    version: str = __version__
    # The worker's own, kept across the query's batches (not pickled)
    _tally: StreamTally | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tally": None}

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.version != __version__:
            raise MedallionError(
                f"the Spark Connect server has medallion {__version__}, and the client "
                f"{self.version}", hint=f"pip install medallion-cli=={self.version} where the "
                "server's Python (spark.pyspark.python) runs")
        if self._tally is None:
            self._tally = StreamTally()
            arm(self.crash_at)
        said: dict[str, Any] = {"batch_id": batch_id, "report": None, "committed": None}
        ctx = self._context(batch, said)
        replayed = self._tally.replayed
        try:
            write_batch(ctx, self.node, self._tally, self.start, self.into,
                        lambda rows, _: (rows, None), batch, batch_id)
        except BaseException as exc:
            write_text(ctx.engine, join(self.reports, ERROR_FILE), json.dumps(_error(exc)))
            raise
        said["replayed"] = self._tally.replayed > replayed
        said["phases"] = ctx.phases.seconds
        write_text(ctx.engine, join(self.reports, f"{batch_id:020d}.json"), json.dumps(said))

    def _context(self, batch: DataFrame, said: dict[str, Any]) -> BuildContext:
        from ...engines import make_engine

        engine = make_engine(self.project.target)
        engine.__dict__["_session"] = batch.sparkSession  # the worker's, on the server

        def committed(model: str, app_id: str, done: int | None) -> None:
            said["committed"] = [app_id, done]

        return BuildContext(self.project, self.graph, engine, self.full_refresh, self.selected,
                            record_batch=lambda report: said.update(report=asdict(report)),
                            record_committed=committed, deferred=self.deferred)


def server_batch(ctx: BuildContext, node: CompiledNode, start: QueryStart,
                 tally: StreamTally, into: Into) -> ServerBatch:
    """The foreachBatch function for the server, reporting into a new folder (past runs'
    removed), which the tally keeps for `collect`."""
    remove(ctx.engine, reports_location(ctx, node))
    tally.server_reports = join(reports_location(ctx, node), uuid.uuid4().hex)
    return ServerBatch(ctx.project, ctx.graph, node, start, ctx.full_refresh, ctx.selected,
                       ctx.deferred, tally.server_reports, into, armed())


def collect(ctx: BuildContext, node: CompiledNode, tally: StreamTally,
            batch_id: int | None = None) -> None:
    """Tell the tally and the event log what the server's batches did: batch `batch_id`'s (as
    Spark reports it, under --watch), or all this run's (once the query stopped), in order."""
    folder = tally.server_reports
    assert folder is not None  # server_batch set it
    names = ([f"{batch_id:020d}.json"] if batch_id is not None
             else [name for name, *_ in list_files(ctx.engine, folder) if name != ERROR_FILE])
    for name in names:
        try:
            said = json.loads(read_text(ctx.engine, join(folder, name)))
        except FileNotFoundError:
            continue
        remove(ctx.engine, join(folder, name))
        _tell(ctx, node, tally, said)
    try:
        error = json.loads(read_text(ctx.engine, join(folder, ERROR_FILE)))
    except FileNotFoundError:
        return
    tally.error = _rebuilt(error)


def _tell(ctx: BuildContext, node: CompiledNode, tally: StreamTally,
          said: dict[str, Any]) -> None:
    if said["committed"] is not None:
        tally.app_id, done = said["committed"]
        ctx.record_committed(node.name, tally.app_id, done)
    if said.get("replayed"):
        with tally.lock:
            tally.replayed += 1
    for phase, seconds in (said.get("phases") or {}).items():
        with ctx.phases.lock:
            ctx.phases.seconds[phase] = ctx.phases.seconds.get(phase, 0.0) + seconds
    if said["report"] is not None:
        report = BatchReport(**said["report"])
        tally.app_id = report.app_id
        ctx.record_batch(report)
        tally.add(report)


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MedallionError):
        return {"class": type(exc).__name__, "message": exc.message, "path": exc.path,
                "line": exc.line, "hint": exc.hint}
    return {"class": None, "message": error_message(exc)}


def _rebuilt(error: dict[str, Any]) -> BaseException:
    if error["class"] is None:
        return RuntimeError(error["message"])
    kind = StillBeingWritten if error["class"] == StillBeingWritten.__name__ else MedallionError
    return kind(error["message"], error["path"], error["line"], error["hint"])


def start_stream(writer: DataStreamWriter, target: Target) -> StreamingQuery:
    """writer.start(), started again when the server's Python worker for its batches was late;
    a server that cannot run them said in one line."""
    pauses = start_pauses(target.worker_wait)
    left = iter(pauses)
    while True:
        try:
            return writer.start()
        except Exception as exc:  # a Spark Connect server may fail it at once
            pause = next(left, None)
            if WORKER_LATE not in str(exc) or pause is None:
                raise worker_trouble(target, exc, pauses) or exc
        time.sleep(pause)


def worker_trouble(target: Target, exc: BaseException,
                   pauses: Sequence[float] = ()) -> MedallionError | None:
    """One line for a server whose Python worker cannot run medallion's batches, or died
    running one; else None."""
    text = str(exc)
    if any(marker in text for marker in NOT_INSTALLED):
        return MedallionError(
            f"target '{target.name}': the Spark Connect server's Python cannot import "
            "medallion_cli, which runs each streaming micro-batch there (foreachBatch)",
            hint=f"pip install medallion-cli=={__version__} into the Python the server runs "
                 "(its spark.pyspark.python)")
    if WORKER_LATE in text:
        return MedallionError(
            f"target '{target.name}': the Spark Connect server's Python worker for this "
            f"model's micro-batches did not connect back within Spark's 10 s, "
            f"{len(pauses) + 1} time(s) in {sum(pauses):g} s: the server is too busy to start "
            "Python processes", path=target.profiles_file,
            hint="nothing was written: build again once the server is less busy, or let it "
                 f"wait longer for them: spark: worker_wait (now {target.worker_wait:g} s)")
    if WORKER_DIED in text:
        return MedallionError(
            f"target '{target.name}': the Spark Connect server's Python worker running a "
            "micro-batch died (killed, or out of memory)",
            hint="what earlier batches committed stays, the rest was not written: build again "
                 "and it goes on from there; the server's log says why the worker ended")
    return None
