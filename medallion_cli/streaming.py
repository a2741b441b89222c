"""Streaming models: one Structured Streaming query per model.

Over landing files (and over Delta tables on an engine with a Delta streaming source), the
model's SQL is the streaming query. On an engine that follows Delta tables through their commit
logs (the embedded engine, see engines/delta_log.py), the query streams the input tables' new
commits, and each micro-batch runs the model's SQL on the rows those commits added.
Each micro-batch goes through foreachBatch into the same append / MERGE code as incremental
models, committed with a Delta app transaction (app id = model and query, version = batch id).
Spark's checkpoint (one folder per model) says which input is done; the app transaction says
which batch is in the table. A batch replayed after a crash finds its id already committed and
writes nothing, so every row lands exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .engines import Engine, WriteResult
from .errors import MedallionError
from .failures import error_message
from .faults import crash_point
from .locations import join
from .materializations import (
    CORRUPT_COLUMN,
    BuildContext,
    Outcome,
    built_table,
    checked_rows,
    model_rows,
    write_incremental,
)
from .rendering import CompiledNode

DEFAULT_WATCH_INTERVAL = "10 seconds"


@dataclass(frozen=True)
class BatchReport:
    model: str
    batch_id: int
    rows: int
    version: int
    malformed: int
    expectations: dict
    files_added: int
    rows_read: int  # rows the batch's input commits added, or the model's rows for the batch


@dataclass
class StreamTally:
    """What a streaming query did, batch by batch (foreachBatch runs on a Spark thread)."""

    on_batch: Callable[[BatchReport], None] = lambda report: None
    batches: int = 0
    replayed: int = 0
    rows: int = 0
    files_added: int = 0
    malformed: int = 0
    expectations: dict = field(default_factory=dict)  # rule -> failing rows, over all batches
    version: int | None = None
    rows_read: int | None = None
    app_id: str | None = None  # read from the checkpoint at the query's first batch
    note: str = ""  # what the build should know about how the query started
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, report: BatchReport) -> None:
        with self.lock:
            self.batches += 1
            self.rows += report.rows
            self.files_added += report.files_added
            self.malformed += report.malformed
            self.version = report.version
            self.rows_read = (self.rows_read or 0) + report.rows_read
            for rule, count in report.expectations.items():
                self.expectations[rule] = self.expectations.get(rule, 0) + count
        self.on_batch(report)


def query_app_id(engine: Engine, node: CompiledNode, checkpoint: str) -> str:
    """The app id for Delta app transactions: the model and its checkpoint's query id.

    A new checkpoint (after --full-refresh or by hand) is a new query whose batch ids start at 0
    again; a new app id keeps those batches from being taken for replays of the old ones."""
    query_id = json.loads(engine.read_text(join(checkpoint, "metadata")))["id"]
    return f"medallion:{node.name}:{query_id}"


def write_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally, replace_first: bool,
                rows_of: Callable, batch, batch_id: int) -> None:
    """foreachBatch: write the rows `rows_of(batch, batch_id)` gives as (rows, rows read)."""
    try:
        _write_batch(ctx, node, tally, replace_first, rows_of, batch, batch_id)
    except BaseException as exc:  # Spark wraps it; keep the original to report it plainly
        tally.error = exc
        raise


def _write_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally, replace_first: bool,
                 rows_of: Callable, batch, batch_id: int) -> None:
    crash_point(node.name, "batch_start", batch_id)
    path = ctx.project.table_path(node.file)
    if tally.app_id is None:  # one read of the checkpoint per query, not per micro-batch
        tally.app_id = query_app_id(ctx.engine, node, ctx.project.checkpoint_path(node.file))
    app_id = tally.app_id
    done = ctx.engine.committed_version(path, app_id)
    if done is not None and done >= batch_id:
        with tally.lock:
            tally.replayed += 1
        return
    replace = not ctx.engine.table_exists(path) or (replace_first and tally.batches == 0)
    txn = (app_id, batch_id)
    new_rows, rows_read = rows_of(batch, batch_id)
    if rows_read is None:
        # Spark's own source fed the query: count the batch once. (Spark's numInputRows counts
        # a source's rows again each time the batch is computed: expectations, MERGE.)
        rows_read = new_rows.count()
    if not replace and not rows_read:
        return  # commits that added no rows (compaction): nothing to write
    with checked_rows(ctx, node, new_rows, replace, txn) as (rows, counts):
        result = write_incremental(ctx, node, rows, path, replace=replace, txn=txn)
        # Malformed rows kept in the table: counted from the written files' statistics where
        # the engine has them for this column, else by a pass over the rows.
        malformed = (0 if CORRUPT_COLUMN not in rows.columns
                     else result.non_null[CORRUPT_COLUMN] if CORRUPT_COLUMN in result.non_null
                     else rows.where(rows[CORRUPT_COLUMN].isNotNull()).count())
    crash_point(node.name, "committed", batch_id)
    limit = node.config.optimize_after_files
    if limit and ctx.engine.file_count(path) > limit:
        # Streaming writes small files; a compaction commit changes no data, so readers
        # downstream (streams included) do not see it as new rows.
        ctx.engine.optimize(path)
    tally.add(BatchReport(node.name, batch_id, result.rows or 0, result.version, malformed,
                          counts, result.files_added or 0, rows_read))


# How a streaming model's checkpoint reads Delta tables, recorded beside it: a checkpoint of the
# commit-log stream (embedded) cannot be resumed by Delta's streaming source (delta-spark) or
# the other way round. Checkpoints without the record come from the embedded engine, which
# until the delta-spark engine ran was the only one.
READER_FILE = "medallion_reader.json"


def _delta_reader(engine: Engine) -> str:
    return "commit-log" if engine.follows_commit_log else "delta-source"


def reader_changed(ctx: BuildContext, checkpoint: str) -> bool:
    """Whether the checkpoint was made by the other engine's reader of Delta tables."""
    try:
        recorded = json.loads(ctx.engine.read_text(join(checkpoint, READER_FILE)))["reader"]
    except FileNotFoundError:
        try:
            ctx.engine.read_text(join(checkpoint, "metadata"))
        except FileNotFoundError:
            return False  # no checkpoint yet
        recorded = "commit-log"
    return recorded != _delta_reader(ctx.engine)


def start_query(ctx: BuildContext, node: CompiledNode, continuous: bool = False,
                on_batch: Callable[[BatchReport], None] = lambda report: None):
    """Start the model's streaming query; returns (query, tally).

    continuous: run on the model's processing-time trigger until stopped (--watch); otherwise
    process what is there now (available_now) and stop."""
    checkpoint = ctx.project.checkpoint_path(node.file)
    tables = streamed_tables(ctx, node)
    tally = StreamTally(on_batch)
    switched = bool(tables) and not ctx.full_refresh and reader_changed(ctx, checkpoint)
    if ctx.full_refresh or switched:
        # A new checkpoint reads every input from the start; the first batch replaces the table,
        # so until it commits the old table stays readable and intact.
        ctx.engine.remove_folder(checkpoint)
    if switched:
        tally.note = (f"recomputed from its inputs: its checkpoint was made by the other engine, "
                      f"whose reader of Delta tables the {ctx.engine.name} engine cannot resume")
    if tables:
        ctx.engine.write_text(join(checkpoint, READER_FILE),
                              json.dumps({"reader": _delta_reader(ctx.engine)}))
    if tables and ctx.engine.follows_commit_log:
        df = _commit_streams(ctx, tables)

        def rows_of(batch, batch_id):
            return commit_rows(ctx, node, tables, batch, batch_id)
    else:
        df = model_rows(ctx, node, streaming=True)
        if not df.isStreaming:
            raise MedallionError("a streaming model must read a source or a streaming model",
                                 path=node.file.rel_path,
                                 hint="use materialized='incremental' for a model over batch "
                                 "tables")

        def rows_of(batch, batch_id):
            return batch, None
    replace_first = ctx.full_refresh or switched
    writer = (df.writeStream
              .foreachBatch(lambda batch, batch_id: write_batch(
                  ctx, node, tally, replace_first, rows_of, batch, batch_id))
              .option("checkpointLocation", str(checkpoint))
              .queryName(f"medallion_{node.name}"))
    if continuous:
        interval = node.config.trigger
        writer = writer.trigger(processingTime=DEFAULT_WATCH_INTERVAL
                                if interval == "available_now" else interval)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start(), tally


def streamed_tables(ctx: BuildContext, node: CompiledNode) -> dict[str, str]:
    """Relation -> Delta table, for the inputs a streaming model streams from Delta tables
    (refs to streaming models, Delta sources)."""
    tables = {name: built_table(ctx, ctx.graph.nodes[name]) for name in node.refs
              if ctx.graph.nodes[name].config.materialized == "streaming"}
    sources = [ctx.project.sources[key] for key in node.sources]
    tables.update({s.relation: s.path for s in sources if s.format == "delta"})
    files = [f"{s.source}.{s.name}" for s in sources if s.format != "delta"]
    if tables and files and ctx.engine.follows_commit_log:
        raise MedallionError(
            f"this streaming model reads landing files ({', '.join(files)}) and streaming "
            f"tables ({', '.join(tables)}) together, which the {ctx.engine.name} engine cannot "
            "stream in one query", path=node.file.rel_path,
            hint="ingest the files in a bronze model of their own and ref() it here")
    return tables


def _commit_streams(ctx: BuildContext, tables: dict[str, str]):
    """One stream of (relation, version) over the commits of every followed table."""
    from pyspark.sql import functions as F

    streams = [ctx.engine.commit_stream(path).withColumn("relation", F.lit(relation))
               for relation, path in tables.items()]
    union = streams[0]
    for stream in streams[1:]:
        union = union.unionByName(stream)
    return union


def commit_rows(ctx: BuildContext, node: CompiledNode, tables: dict[str, str], batch,
                batch_id: int):
    """(the model's rows for one micro-batch of commits, input rows read). The query's first
    batch reads each table as of the newest commit it took; later ones what their commits added."""
    versions: dict[str, list[int]] = {relation: [] for relation in tables}
    for row in batch.collect():  # one small row per commit
        versions[row["relation"]].append(row["version"])
    inputs, rows_read = {}, 0
    for relation, path in tables.items():
        inputs[relation], count = ctx.engine.read_commits(path, versions[relation],
                                                          from_snapshot=batch_id == 0)
        rows_read += count
    return model_rows(ctx, node, inputs=inputs), rows_read


def raise_query_error(query, tally: StreamTally) -> None:
    if tally.error is not None:
        raise tally.error
    if query.exception() is not None:
        raise RuntimeError(error_message(query.exception()))


def build_streaming(ctx: BuildContext, node: CompiledNode) -> Outcome:
    """Process everything new once (trigger available_now), then stop."""
    query, tally = start_query(ctx, node)
    try:
        query.awaitTermination()
    except Exception:
        raise_query_error(query, tally)
        raise
    raise_query_error(query, tally)
    facts = f"{tally.batches} batch(es)" + (f"; {tally.note}" if tally.note else "")
    if tally.replayed:
        facts += f", {tally.replayed} replayed batch(es) already committed"
    if tally.malformed:
        facts += f", {tally.malformed} malformed row(s) kept in {CORRUPT_COLUMN}"
    if not tally.batches:
        return Outcome("up_to_date", message="no new data" + (
            f"; {tally.replayed} replayed batch(es) already committed" if tally.replayed else ""))
    return Outcome("success", WriteResult(tally.version, tally.rows, tally.files_added),
                   message=facts, expectations=tally.expectations, rows_read=tally.rows_read)


def stop_gracefully(query, poll_seconds: float = 0.2) -> None:
    """Stop a running query after the batch in flight (if any) has finished."""
    while query.isActive and query.status.get("isTriggerActive"):
        time.sleep(poll_seconds)
    query.stop()
