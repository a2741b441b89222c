"""One streaming micro-batch (foreachBatch): skipped when its app transaction is already in
the table (a replay), else its rows checked and written in one commit with the app transaction
(app id = model and query, version = batch id), and reported to the query's tally.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable

from ...core.crash_points import crash_point
from ...core.locations import join
from ...core.nodes import CompiledNode
from ...engines.base import Engine, WriteResult
from ...storage.files import read_text
from ..checks import checked_rows
from ..compaction import compact_if_due
from ..context import CORRUPT_COLUMN, RESCUED_COLUMN, BuildContext
from ..sources.landing import check_settled
from ..writing.writes import Into, write_incremental
from .checkpoints import QueryStart, definition_key, refresh_done
from .tally import BatchReport, StreamTally

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    # a batch's rows and how many rows its input commits added (None: not known beforehand)
    RowsOf = Callable[[DataFrame, int], tuple[DataFrame, int | None]]


def query_app_id(engine: Engine, node: CompiledNode, checkpoint: str) -> str:
    """The app id for Delta app transactions: the model and its checkpoint's query id.

    A new checkpoint (after --full-refresh or by hand) is a new query whose batch ids start at 0
    again; a new app id keeps those batches from being taken for replays of the old ones."""
    query_id = json.loads(read_text(engine, join(checkpoint, "metadata")))["id"]
    return f"medallion:{node.name}:{query_id}"


def write_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally, start: QueryStart,
                into: Into, rows_of: RowsOf, batch: DataFrame, batch_id: int) -> None:
    """foreachBatch: write the rows `rows_of(batch, batch_id)` gives as (rows, rows read)."""
    try:
        _write_batch(ctx, node, tally, start, into, rows_of, batch, batch_id)
    except BaseException as exc:  # Spark wraps it; keep the original to report it plainly
        tally.error = exc
        raise


def _write_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally, start: QueryStart,
                 into: Into, rows_of: RowsOf, batch: DataFrame, batch_id: int) -> None:
    crash_point(node.name, "batch_start", batch_id)
    path = ctx.project.table_path(node.file)
    done = committed_batch(ctx, node, tally)
    app_id = tally.app_id
    assert app_id is not None  # committed_batch read it
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
        result = write_incremental(ctx, node, checks, path, replace, into, txn=txn,
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
    compact_if_due(ctx, node)  # streams write small files
    report = BatchReport(node.name, batch_id, result.rows or 0, result.version, malformed,
                         rescued, checks.counts, result.files_added or 0, rows_read,
                         app_id=app_id, rows_checked=checks.checked)
    ctx.record_batch(report)
    tally.add(report)


def committed_batch(ctx: BuildContext, node: CompiledNode, tally: StreamTally) -> int | None:
    """The last batch id of this query the model's table has. At the query's first look (its
    app id is read from the checkpoint once per query), the event log learns it too: a killed
    run may have committed batches it did not live to record."""
    first = tally.app_id is None
    if tally.app_id is None:
        tally.app_id = query_app_id(ctx.engine, node, ctx.project.checkpoint_path(node.file))
    done = ctx.engine.committed_version(ctx.project.table_path(node.file), tally.app_id)
    if first:
        ctx.record_committed(node.name, tally.app_id, done)
    return done


def _rows_in_batch(node: CompiledNode, rows: DataFrame, result: WriteResult,
                   checked: int | None) -> int:
    """The model's rows in a batch Spark's own source fed, from a pass already made where
    there was one: the expectations' count, or an append's written rows. (Spark's
    numInputRows counts a source's rows again each time the batch is computed.) Counting them
    beforehand was a pass of its own over the batch: for landing files, parsing them again."""
    if checked is not None:
        return checked
    if node.config.strategy == "append" and result.rows is not None:
        return result.rows
    return rows.count()


def _kept(rows: DataFrame, result: WriteResult, column: str) -> int:
    """Rows written with a value in `column` (malformed, rescued): from the written files'
    statistics where the engine has them, else by a pass over the rows."""
    if column not in rows.columns:
        return 0
    if column in result.non_null:
        return result.non_null[column]
    return rows.where(rows[column].isNotNull()).count()
