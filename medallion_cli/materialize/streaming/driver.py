"""The streaming driver: one Structured Streaming query per model.

Over landing files (and over Delta tables on an engine with a Delta streaming source), the
model's SQL is the streaming query. On an engine that follows Delta tables through their commit
logs (the embedded engine, see engines/embedded/delta_log.py), the query streams the input
tables' new commits, and each micro-batch runs the model's SQL on the rows those commits added.
Each micro-batch goes through foreachBatch (micro_batch.py; over Spark Connect it runs on the
server: server_batches.py) into the same checks and writes as incremental models, committed
with a Delta app transaction (app id = model and query, version = batch id).
Spark's checkpoint (one folder per model) says which input is done; the app transaction says
which batch is in the table. A batch replayed after a crash finds its id already committed and
writes nothing, so every row lands exactly once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from ...core.config import interval_seconds
from ...core.crash_points import crash_point
from ...core.error_text import error_message
from ...core.errors import MedallionError
from ...core.locations import join
from ...core.nodes import CompiledNode
from ...dag.graph import Graph
from ...engines.base import WriteResult
from ...spark.progress import follow_progress, progress_reports
from ..checks import check_table_properties
from ..context import CORRUPT_COLUMN, RESCUED_COLUMN, BuildContext, Outcome
from ..empty import check_on_no_rows
from ..rows import model_rows
from ..sources.inputs import (
    commit_streams,
    committed_inputs,
    streamed_refs,
    streamed_tables,
)
from ..sources.landing import StillBeingWritten, changed_note
from ..writing.schema_changes import column_changes
from ..writing.writes import Into
from .checkpoints import (
    caught_up,
    prepare_checkpoint,
    ran_once,
    record_caught_up,
    record_ran_once,
)
from .flow_reset import inputs_changed, reset_checkpoint, reset_due, stream_starts
from .micro_batch import committed_batch, write_batch
from .server_batches import collect, server_batch, start_stream, worker_trouble
from .tally import BatchReport, StreamTally
from .throughput import stream_stats

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

    from .checkpoints import QueryStart

DEFAULT_WATCH_INTERVAL = "10 seconds"
SCHEMA_LOGS = "schema_logs"  # in a query's checkpoint (inputs.stream_of)
# Delta's stop at a streamed table's columns changed in place, and how many a build takes (each
# rename, drop, widening and feature turned on is one)
STREAM_SCHEMA_CHANGED = "DELTA_STREAMING_METADATA_EVOLUTION"
SCHEMA_RESTARTS = 10
# How often, under --watch, a query that follows its input's commits looks for a new one
# (0.1 s rather than 0.25 s: silver 0.36 s sooner after bronze in bench/streaming_bench.py,
# for 0.05 cores more of an idle watch's JVM).
FOLLOW_INTERVAL = "100 milliseconds"


def watch_trigger(graph: Graph, node: CompiledNode) -> str:
    """The processing-time trigger of a model's query under --watch: its `trigger` (10 seconds
    unless set). A model that streams from one streaming model alone, on a trigger no longer
    than that model's, follows its commits instead: Spark fires every processing-time trigger
    on the same whole seconds, so it found each commit at the second after it (0.5 s later in
    bench/streaming_bench.py). It looks every 0.1 s, and runs once per commit of its input,
    which commits at most once per an interval no shorter than its own."""
    def interval(trigger: str) -> str:
        return DEFAULT_WATCH_INTERVAL if trigger == "available_now" else trigger

    def seconds(trigger: str) -> float:
        found = interval_seconds(interval(trigger))
        assert found is not None  # load/model_config.py accepts no other trigger
        return found

    own = interval(node.config.trigger)
    streamed = streamed_refs(graph, node)
    if node.sources or node.change_refs or len(streamed) != 1:
        return own
    followed = graph.nodes[streamed[0]].config
    if followed.once or seconds(followed.trigger) < seconds(node.config.trigger):
        return own
    return FOLLOW_INTERVAL


def start_query(ctx: BuildContext, node: CompiledNode, into: Into, continuous: bool = False,
                on_batch: Callable[[BatchReport], None] = lambda report: None,
                on_commit: Callable[[BatchReport], None] = lambda report: None,
                tally: StreamTally | None = None
                ) -> tuple[StreamingQuery, StreamTally, QueryStart]:
    """Start the model's streaming query; returns (query, tally, how it started).

    into: how each batch's rows join the table (the node's strategy, strategies.py);
    continuous: run on the model's processing-time trigger until stopped (--watch); otherwise
    process what is there now (available_now) and stop. on_batch: each batch's report (under
    --watch, once Spark's progress for it is in); on_commit: the same, at the batch's commit;
    tally: an earlier query's of this build, counting on (its callbacks taken)."""
    checkpoint = ctx.project.checkpoint_path(node.file)
    check_table_properties(ctx, node)
    tables = streamed_tables(ctx, node)
    tally = tally or StreamTally(on_batch, on_commit)
    tally.error = None
    reset = reset_checkpoint(ctx, node, tables)
    start = prepare_checkpoint(ctx, node, tables)
    if reset is not None:
        start = replace(start, notes=start.notes + (reset,))
    # a query --reset-flow started reads its tables from where it said, replays too
    ctx = replace(ctx, stream_starts=stream_starts(ctx, node),
                  schema_logs=join(str(checkpoint), SCHEMA_LOGS))
    if start.changed:
        _refuse_new_columns_now(ctx, node)
    if tables and not ctx.engine.capabilities.delta_streaming_source:
        df = commit_streams(ctx, tables)

        def rows_of(batch: DataFrame, batch_id: int) -> tuple[DataFrame, int | None]:
            inputs, rows_read = committed_inputs(ctx, node, tables, batch, batch_id)
            return model_rows(ctx, node, inputs=inputs), rows_read
    else:
        df = model_rows(ctx, node, streaming=True)
        if not df.isStreaming:
            raise MedallionError("a streaming model must read a source or a streaming model",
                                 path=node.file.rel_path,
                                 hint="use materialized='incremental' for a model over batch "
                                 "tables")

        def rows_of(batch: DataFrame, batch_id: int) -> tuple[DataFrame, int | None]:
            return batch, None
    name = f"medallion_{node.name}"
    on_progress = tally.progressed
    each_batch: Callable[[DataFrame, int], None]
    if ctx.engine.capabilities.batches_on_server:  # foreachBatch there (server_batches.py)
        each_batch = server_batch(ctx, node, start, tally, into)

        def on_progress(progress: dict[str, Any]) -> None:
            collect(ctx, node, tally, progress.get("batchId"))
            tally.progressed(progress)
    else:
        def each_batch(batch: DataFrame, batch_id: int) -> None:
            write_batch(ctx, node, tally, start, into, rows_of, batch, batch_id)
    writer = (df.writeStream.foreachBatch(each_batch)
              .option("checkpointLocation", str(checkpoint))
              .queryName(name))
    if continuous:
        tally.detach_listener = follow_progress(ctx.engine.spark, name, on_progress)
        writer = writer.trigger(processingTime=watch_trigger(ctx.graph, node))
    else:
        writer = writer.trigger(availableNow=True)
    return start_stream(writer, ctx.project.target), tally, start


def _refuse_new_columns_now(ctx: BuildContext, node: CompiledNode) -> None:
    """An edit that makes the rows' columns ones the table lacks fails when it is first built,
    from the rows' schema alone, rather than at the next batch that has rows: it would not
    "apply from now on" as an edit does."""
    if node.config.on_schema_change != "fail":
        return
    schemas: dict[str, StructType] = {}
    check_on_no_rows(ctx, node, schemas)
    column_changes(node, {f.name: f.dataType.simpleString() for f in schemas[node.name].fields},
                   ctx.engine.table_columns(ctx.project.table_path(node.file)) or {})


def raise_query_error(query: StreamingQuery, tally: StreamTally, node: CompiledNode) -> None:
    if tally.error is not None:
        raise tally.error
    failure = query.exception()
    if failure is not None:
        said = error_message(failure)
        raise inputs_changed(node, said) or RuntimeError(said)


def server_said(ctx: BuildContext, node: CompiledNode, tally: StreamTally,
                failure: BaseException | None = None) -> None:
    """Over Spark Connect, what the server's batches did (server_batches.py), and a server
    that could not run them said in one line."""
    if tally.server_reports is None:
        return
    collect(ctx, node, tally)
    problem = failure is not None and worker_trouble(ctx.project.target, failure)
    if problem:
        raise problem from failure


def build_streaming(ctx: BuildContext, node: CompiledNode, into: Into) -> Outcome:
    """Process everything new once (trigger available_now), then stop; start no query when
    its inputs are as they were when it last caught up."""
    finished = ran_once(ctx, node)
    if finished:
        return Outcome("up_to_date", message=f"a once-only flow: it ran at {finished}; a "
                       f"--full-refresh of {node.config.flow_into} runs it again")
    with ctx.phases.timing("fingerprint"):
        done, state = caught_up(ctx, node)
    if done and not reset_due(ctx, node):
        return Outcome("up_to_date", message="no new input since it last caught up")
    with ctx.phases.timing("query_start"):
        query, tally, start = start_query(ctx, node, into)
    restarts = 0
    for restarts in range(SCHEMA_RESTARTS + 1):
        try:
            query.awaitTermination()
            break
        except Exception as exc:
            if restarts < SCHEMA_RESTARTS and STREAM_SCHEMA_CHANGED in error_message(exc):
                # Delta stopped it at a table's columns changed in place, its schema log
                # holding the change: started again, it goes on with them (a reset, done)
                with ctx.phases.timing("query_start"):
                    query, tally, _ = start_query(replace(ctx, flow_reset=None), node, into,
                                                  tally=tally)
                continue
            server_said(ctx, node, tally, exc)
            if isinstance(tally.error, StillBeingWritten):  # its batches before it stay
                first = f"{tally.batches} batch(es) committed; " if tally.batches else ""
                return Outcome("warn", message=first + tally.error.message)
            raise_query_error(query, tally, node)
            raise
    # Spark's exception, asked here only over Connect (raise_query_error asks it anyway)
    server_said(ctx, node, tally, query.exception() if tally.server_reports else None)
    raise_query_error(query, tally, node)
    crash_point(node.name, "stopped", tally.batches)
    if tally.app_id is None:  # no batch ran, so none told the event log what a killed run did
        committed_batch(ctx, node, tally)
    facts = [f"{tally.batches} batch(es)" if tally.batches else "no new data"]
    if tally.replayed:
        facts.append(f"{tally.replayed} replayed batch(es) already committed")
    if restarts:
        facts.append(f"its query started again {restarts} time(s) with its inputs' columns "
                     "changed in place")
    if tally.malformed:
        facts.append(f"{tally.malformed} malformed row(s) kept in {CORRUPT_COLUMN}")
    if tally.rescued:
        facts.append(f"{tally.rescued} row(s) with fields outside the schema kept in "
                     f"{RESCUED_COLUMN}")
    changed_files = changed_note(ctx.project.checkpoint_path(node.file), str(ctx.project.root),
                                 node.name)
    message = "; ".join(facts + list(start.notes) + ([changed_files] if changed_files else []))
    # rows a landed file gained after its batch read it are missing from the table: a failure
    # (its readers are skipped) until a refresh reads the files whole, though the batches stay
    status = ("error" if changed_files else "warn" if start.changed
              else "success" if tally.batches else "up_to_date")
    stats = stream_stats(progress_reports(query), tally.rows_read)
    record_ran_once(ctx, node)
    if status in ("success", "up_to_date"):  # a warning is said again until it no longer holds
        # Only once its batches are in the event log: until then, a build killed meanwhile
        # must start the query again, whose first batch records what the log lacks.
        ctx.after_recorded(lambda: record_caught_up(ctx, node, state))
    if not tally.batches:
        return Outcome(status, message=message, stream=stats)
    assert tally.version is not None  # set by each batch counted
    return Outcome(status, WriteResult(tally.version, tally.rows, tally.files_added),
                   message=message, expectations=tally.expectations, rows_read=tally.rows_read,
                   rows_checked=tally.rows_checked,
                   stream=stats, malformed=tally.malformed, rescued=tally.rescued)
