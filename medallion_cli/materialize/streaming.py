"""The streaming driver: one Structured Streaming query per model.

Over landing files (and over Delta tables on an engine with a Delta streaming source), the
model's SQL is the streaming query. On an engine that follows Delta tables through their commit
logs (the embedded engine, see engines/delta_log.py), the query streams the input tables' new
commits, and each micro-batch runs the model's SQL on the rows those commits added.
Each micro-batch goes through foreachBatch into the same checks and writes as incremental
models, committed with a Delta app transaction (app id = model and query, version = batch id).
Spark's checkpoint (one folder per model) says which input is done; the app transaction says
which batch is in the table. A batch replayed after a crash finds its id already committed and
writes nothing, so every row lands exactly once.
"""

from __future__ import annotations

import json
from typing import Callable

from ..core.errors import MedallionError
from ..core.failures import error_message
from ..core.faults import crash_point
from ..core.locations import join
from ..core.nodes import CompiledNode
from ..engines.base import Engine, WriteResult
from ..spark.files import read_text
from .checkpoints import (
    QueryStart,
    caught_up,
    definition_key,
    prepare_checkpoint,
    ran_once,
    record_caught_up,
    record_ran_once,
    refresh_done,
)
from .checks import check_table_properties, checked_rows
from .context import CORRUPT_COLUMN, RESCUED_COLUMN, BuildContext, Outcome
from .empty import check_on_no_rows
from .inputs import commit_streams, committed_inputs, streamed_tables
from .landing import StillBeingWritten, changed_note, check_settled
from .rows import model_rows
from .tally import BatchReport, StreamTally
from .throughput import progress_listener, progress_reports, stream_stats
from .writes import refuse_new_columns, write_incremental

DEFAULT_WATCH_INTERVAL = "10 seconds"


def query_app_id(engine: Engine, node: CompiledNode, checkpoint: str) -> str:
    """The app id for Delta app transactions: the model and its checkpoint's query id.

    A new checkpoint (after --full-refresh or by hand) is a new query whose batch ids start at 0
    again; a new app id keeps those batches from being taken for replays of the old ones."""
    query_id = json.loads(read_text(engine, join(checkpoint, "metadata")))["id"]
    return f"medallion:{node.name}:{query_id}"


def write_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally, start: QueryStart,
                rows_of: Callable, batch, batch_id: int) -> None:
    """foreachBatch: write the rows `rows_of(batch, batch_id)` gives as (rows, rows read)."""
    try:
        _write_batch(ctx, node, tally, start, rows_of, batch, batch_id)
    except BaseException as exc:  # Spark wraps it; keep the original to report it plainly
        tally.error = exc
        raise


def _write_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally, start: QueryStart,
                 rows_of: Callable, batch, batch_id: int) -> None:
    crash_point(node.name, "batch_start", batch_id)
    path = ctx.project.table_path(node.file)
    done = _committed(ctx, node, tally)
    app_id = tally.app_id
    if done is not None and done >= batch_id:
        with tally.lock:
            tally.replayed += 1
        return
    check_settled(ctx.project.checkpoint_path(node.file), batch_id, node.file.rel_path)
    # A refresh's first batch replaces the table; until it commits, every build that starts
    # the query again (after a kill) starts it as a refresh (see prepare_checkpoint).
    refreshing = start.replace_first and batch_id == 0
    replace = refreshing or not ctx.engine.table_exists(path)
    txn = (app_id, batch_id)
    new_rows, rows_read = rows_of(batch, batch_id)
    if not replace and (rows_read == 0 or rows_read is None and not
                        ctx.engine.capabilities.skips_empty_writes and new_rows.isEmpty()):
        return  # commits that added no rows (compaction), an empty file: nothing to write
    with checked_rows(ctx, node, new_rows, replace, txn, settled=False) as checks, \
            ctx.phases.timing("write"):
        result = write_incremental(ctx, node, checks, path, replace=replace, txn=txn,
                                   metadata={definition_key(node): start.definition})
        malformed, rescued = (_kept(checks.rows, result, c)
                              for c in (CORRUPT_COLUMN, RESCUED_COLUMN))
    if rows_read is None:
        rows_read = _rows_in_batch(node, new_rows, result, checks.checked)
        if rows_read == 0 and not replace:
            return  # an empty file, on an engine that skips empty writes: nothing was written
    crash_point(node.name, "committed", batch_id)
    if refreshing:
        refresh_done(ctx, node)
    limit = node.config.optimize_after_files
    if limit and ctx.engine.file_count(path) > limit:
        # Streaming writes small files; a compaction commit changes no data, so readers
        # downstream (streams included) do not see it as new rows.
        ctx.engine.optimize(path, node.config.zorder_by, node.config.cluster_by)
    report = BatchReport(node.name, batch_id, result.rows or 0, result.version, malformed,
                         rescued, checks.counts, result.files_added or 0, rows_read,
                         app_id=app_id, rows_checked=checks.checked)
    ctx.record_batch(report)
    tally.add(report)


def _committed(ctx: BuildContext, node: CompiledNode, tally: StreamTally) -> int | None:
    """The last batch id of this query the model's table has. At the query's first look (its
    app id is read from the checkpoint once per query), the event log learns it too: a killed
    run may have committed batches it did not live to record."""
    first = tally.app_id is None
    if first:
        tally.app_id = query_app_id(ctx.engine, node, ctx.project.checkpoint_path(node.file))
    done = ctx.engine.committed_version(ctx.project.table_path(node.file), tally.app_id)
    if first:
        ctx.record_committed(node.name, tally.app_id, done)
    return done


def _rows_in_batch(node: CompiledNode, rows, result: WriteResult, checked: int | None) -> int:
    """The model's rows in a batch Spark's own source fed, from a pass already made where
    there was one: the expectations' count, or an append's written rows. (Spark's
    numInputRows counts a source's rows again each time the batch is computed.) Counting them
    beforehand was a pass of its own over the batch: for landing files, parsing them again."""
    if checked is not None:
        return checked
    if node.config.strategy == "append" and result.rows is not None:
        return result.rows
    return rows.count()


def _kept(rows, result: WriteResult, column: str) -> int:
    """Rows written with a value in `column` (malformed, rescued): from the written files'
    statistics where the engine has them, else by a pass over the rows."""
    if column not in rows.columns:
        return 0
    if column in result.non_null:
        return result.non_null[column]
    return rows.where(rows[column].isNotNull()).count()


def start_query(ctx: BuildContext, node: CompiledNode, continuous: bool = False,
                on_batch: Callable[[BatchReport], None] = lambda report: None):
    """Start the model's streaming query; returns (query, tally, how it started).

    continuous: run on the model's processing-time trigger until stopped (--watch); otherwise
    process what is there now (available_now) and stop."""
    checkpoint = ctx.project.checkpoint_path(node.file)
    check_table_properties(ctx, node)
    tables = streamed_tables(ctx, node)
    tally = StreamTally(on_batch)
    start = prepare_checkpoint(ctx, node, tables)
    if start.changed:
        _refuse_new_columns_now(ctx, node)
    if tables and not ctx.engine.capabilities.delta_streaming_source:
        df = commit_streams(ctx, tables)

        def rows_of(batch, batch_id):
            inputs, rows_read = committed_inputs(ctx, node, tables, batch, batch_id)
            return model_rows(ctx, node, inputs=inputs), rows_read
    else:
        df = model_rows(ctx, node, streaming=True)
        if not df.isStreaming:
            raise MedallionError("a streaming model must read a source or a streaming model",
                                 path=node.file.rel_path,
                                 hint="use materialized='incremental' for a model over batch "
                                 "tables")

        def rows_of(batch, batch_id):
            return batch, None
    name = f"medallion_{node.name}"
    writer = (df.writeStream
              .foreachBatch(lambda batch, batch_id: write_batch(
                  ctx, node, tally, start, rows_of, batch, batch_id))
              .option("checkpointLocation", str(checkpoint))
              .queryName(name))
    if continuous:
        listener, streams = progress_listener(name, tally.progressed), ctx.engine.spark.streams
        streams.addListener(listener)
        tally.detach_listener = lambda: streams.removeListener(listener)
        interval = node.config.trigger
        writer = writer.trigger(processingTime=DEFAULT_WATCH_INTERVAL
                                if interval == "available_now" else interval)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start(), tally, start


def _refuse_new_columns_now(ctx: BuildContext, node: CompiledNode) -> None:
    """An edit that makes the rows' columns ones the table lacks fails when it is first built,
    from the rows' schema alone, rather than at the next batch that has rows: it would not
    "apply from now on" as an edit does."""
    if node.config.on_schema_change != "fail":
        return
    schemas: dict = {}
    check_on_no_rows(ctx, node, schemas)
    refuse_new_columns(node, schemas[node.name].fieldNames(),
                       ctx.engine.read_table(ctx.project.table_path(node.file)).columns)


def raise_query_error(query, tally: StreamTally) -> None:
    if tally.error is not None:
        raise tally.error
    if query.exception() is not None:
        raise RuntimeError(error_message(query.exception()))


def build_streaming(ctx: BuildContext, node: CompiledNode) -> Outcome:
    """Process everything new once (trigger available_now), then stop; start no query when
    its inputs are as they were when it last caught up."""
    finished = ran_once(ctx, node)
    if finished:
        return Outcome("up_to_date", message=f"a once-only flow: it ran at {finished}; a "
                       f"--full-refresh of {node.config.flow_into} runs it again")
    with ctx.phases.timing("fingerprint"):
        done, state = caught_up(ctx, node)
    if done:
        return Outcome("up_to_date", message="no new input since it last caught up")
    with ctx.phases.timing("query_start"):
        query, tally, start = start_query(ctx, node)
    try:
        query.awaitTermination()
    except Exception:
        if isinstance(tally.error, StillBeingWritten):  # its batches before it stay
            first = f"{tally.batches} batch(es) committed; " if tally.batches else ""
            return Outcome("warn", message=first + tally.error.message)
        raise_query_error(query, tally)
        raise
    raise_query_error(query, tally)
    crash_point(node.name, "stopped", tally.batches)
    if tally.app_id is None:  # no batch ran, so none told the event log what a killed run did
        _committed(ctx, node, tally)
    facts = [f"{tally.batches} batch(es)" if tally.batches else "no new data"]
    if tally.replayed:
        facts.append(f"{tally.replayed} replayed batch(es) already committed")
    if tally.malformed:
        facts.append(f"{tally.malformed} malformed row(s) kept in {CORRUPT_COLUMN}")
    if tally.rescued:
        facts.append(f"{tally.rescued} row(s) with fields outside the schema kept in "
                     f"{RESCUED_COLUMN}")
    changed_files = changed_note(ctx.project.checkpoint_path(node.file), str(ctx.project.root))
    message = "; ".join(facts + list(start.notes) + [changed_files] * bool(changed_files))
    status = "warn" if start.changed or changed_files else "success" if tally.batches else "up_to_date"
    stats = stream_stats(progress_reports(query), tally.rows_read)
    record_ran_once(ctx, node)
    if status != "warn":  # a warning is said again until it no longer holds
        # Only once its batches are in the event log: until then, a build killed meanwhile
        # must start the query again, whose first batch records what the log lacks.
        ctx.after_recorded(lambda: record_caught_up(ctx, node, state))
    if not tally.batches:
        return Outcome(status, message=message, stream=stats)
    return Outcome(status, WriteResult(tally.version, tally.rows, tally.files_added),
                   message=message, expectations=tally.expectations, rows_read=tally.rows_read,
                   rows_checked=tally.rows_checked,
                   stream=stats, malformed=tally.malformed, rescued=tally.rescued)
