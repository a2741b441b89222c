"""What building a node shares across its steps: the context it runs in, what it returns, and
the names of the columns medallion adds to rows."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..core.project import Project
from ..dag.graph import Graph
from ..engines.base import Engine, WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .streaming.tally import BatchReport

DELETE_COLUMN = "_medallion_delete"
CORRUPT_COLUMN = "_corrupt_record"
SOURCE_FILE_COLUMN = "_source_file"
RESCUED_COLUMN = "_rescued_data"  # JSON fields outside a source's schema
FAILED_RULES = "_failed_rules"
VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"


@dataclass
class Phases:
    """Seconds a node's build spent in each step (fingerprint, expectations, write, ...), summed
    over its micro-batches: where the time goes, in run_results.json."""

    seconds: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            with self.lock:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - began

    def rounded(self) -> dict[str, float]:
        return {phase: round(seconds, 3) for phase, seconds in self.seconds.items()}


@dataclass(frozen=True)
class BuildContext:
    """A node's build: the project, the graph, and the engine, bound to the node's own Spark
    session (its temp views are its own, so nodes built side by side never see each other's)."""

    project: Project
    graph: Graph
    engine: Engine
    full_refresh: bool = False
    selected: frozenset[str] = frozenset()  # the nodes this invocation builds
    # The event log's record of streaming micro-batches: each, right after its data commit;
    # and at a query's first batch, (model, app id, last batch id its table has committed).
    record_batch: Callable[[BatchReport], None] = lambda report: None
    record_committed: Callable[[str, str, int | None], None] = lambda model, app_id, committed: None
    # Runs an action once the batches recorded so far are in the event log.
    after_recorded: Callable[[Callable[[], None]], None] = lambda action: action()
    phases: Phases = field(default_factory=Phases)  # the node's own (see runner.own_session)
    # --defer: model -> the --state run's table
    deferred: dict[str, str] = field(default_factory=dict)
    # build --start/--end: the event_time range each node's backfill replaces (ranges.py)
    event_range: tuple[str | None, str | None] | None = None
    flow_reset: FlowReset | None = None  # build --reset-flow
    # a reset streaming query's first version of each Delta table it streams (flow_reset.py)
    stream_starts: dict[str, int] = field(default_factory=dict)
    # a streaming query's folder, in its checkpoint, where Delta keeps the schema of each table
    # it streams (inputs.stream_of)
    schema_logs: str | None = None


def input_table(ctx: BuildContext, name: str) -> str:
    """Where the table of model or seed `name` is read: this target's, or with --defer the
    --state run's when this target has none."""
    return ctx.deferred.get(name) or ctx.project.table_path(ctx.graph.nodes[name].file)


@dataclass(frozen=True)
class FlowReset:
    """build --reset-flow: where each selected streaming model's new query starts (its table
    kept): a version of the one Delta table it streams, the first commit at or after a time of
    each, or neither: its inputs' earliest (streaming/flow_reset.py)."""

    version: int | None = None
    timestamp: str | None = None  # an ISO date or timestamp, UTC

    def said(self) -> str:
        return (f"version {self.version}" if self.version is not None else
                f"the first commit at or after {self.timestamp}" if self.timestamp else
                "its inputs' earliest")


@dataclass(frozen=True)
class Outcome:
    status: str  # "success" | "up_to_date" | "warn" | "error" (committed, but input left out)
    write: WriteResult | None = None
    message: str = ""
    expectations: dict[str, int] = field(default_factory=dict)  # rule -> rows that failed it
    rows_read: int | None = None
    stream: dict[str, Any] = field(default_factory=dict)  # a streaming query's rates and lag
    malformed: int | None = None  # rows kept in _corrupt_record (streaming reads of files)
    rescued: int | None = None  # rows with fields outside the schema kept in _rescued_data
    rows_checked: int | None = None  # rows its expectations were evaluated on (None: none)


@contextmanager
def cached(df: DataFrame) -> Iterator[DataFrame]:
    """The DataFrame, computed once for the reads within the block, then released."""
    df = df.persist()
    try:
        yield df
    finally:
        df.unpersist()
