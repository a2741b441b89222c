"""The batch build of a table maintained per group (`incremental_by`): the groups its inputs'
changes touch are brought up to date, by adding the changes to their sums and counts
(aggregates.py) or by computing them again from their input rows (groups.py); or, when that
cannot be shown equal to a full recompute, the whole table is written again.

Sums and counts take the changes' totals as they are written: no stored row is read apart
first (add_in_place). At 20M input rows and 0.01% changed that halved the embedded engine's
refresh (docs/benchmarks.md).

The touched groups are put in place by one MERGE when they are few next to the table's files,
or when the engine's MERGE costs less than a rewrite however many files it reaches
(delta-rs's). Otherwise, when they reach most files, a MERGE would rewrite them all anyway, in
two passes and with its source materialized (on delta-spark it then cost 1.5-2x a full
recompute), so the table is rewritten in one pass instead: its untouched groups as stored, the
touched ones as computed or with the totals added."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Callable

from ...core.errors import MedallionError
from ...core.nodes import CompiledNode
from ...engines.base import WriteResult
from ...engines.sql import MergeSpec
from ..checks import check_table_properties, checked_rows
from ..context import DELETE_COLUMN, BuildContext, Outcome, cached, input_table
from ..rows import model_rows
from ..state import last_build, rows_read
from .aggregates import (
    MAY_BE_NULL,
    RECOMPUTE,
    Aggregates,
    added_to,
    aggregates_of,
    change_totals,
    inexact_sum,
    sides,
    updated_groups,
)
from .groups import (
    group_replacement,
    in_groups,
    input_changes,
    input_versions,
    touched_groups,
)
from .groups import metadata as group_metadata

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row


def build_by_groups(ctx: BuildContext, node: CompiledNode, into: None = None) -> Outcome:
    check_table_properties(ctx, node)
    path, metadata, unchanged = last_build(ctx, node)
    if unchanged:
        return unchanged
    cfg = node.config
    versions = input_versions(ctx, node)  # before reading: the changes up to these are applied
    metadata = {**metadata, **group_metadata(ctx, node, versions)}
    read = rows_read(ctx, node)  # before the commit, as batch.py says
    with ctx.phases.timing("changed_groups"):
        feeds, why_full = (None, None) if ctx.full_refresh or not ctx.engine.table_exists(
            path) else input_changes(ctx, node, path, versions, read)
    rows = model_rows(ctx, node)
    missing = [k for k in cfg.incremental_by if k not in rows.columns]
    if missing:
        raise MedallionError(f"incremental_by names {', '.join(missing)}, which the model does "
                             "not return", path=node.file.rel_path,
                             hint="name columns of its SELECT: the groups its rows are computed per")
    if feeds is None:
        with checked_rows(ctx, node, rows, replace=True) as checks, ctx.phases.timing("write"):
            write = ctx.engine.write(checks.rows, path, "overwrite", cfg.partition_by,
                                     metadata=metadata,
                                     properties=cfg.delta_properties(checks.rows.columns))
        message = f"recomputed in full: {why_full}" if why_full else ""
        return Outcome("success", write, message, checks.counts, read,
                       rows_checked=checks.checked)
    assert versions is not None  # (input_changes found changes since them)
    # The changes are read several times (rows added, rows removed, the groups they touch):
    # kept in memory, they are small next to the tables.
    with ExitStack() as held:
        feeds = {relation: held.enter_context(cached(feed)) for relation, feed in feeds.items()}
        with ctx.phases.timing("add_changes"):
            changes, why_not_added = added_up(ctx, node, feeds)
        if changes is None:
            assert why_not_added is not None  # (added_up says why it added nothing up)
            return recompute_groups(ctx, node, path, metadata, rows, touched_groups(
                feeds, cfg.incremental_by), why_not_added)
        added_in_place = add_in_place(ctx, node, path, metadata, changes, versions)
        if added_in_place is not None:
            return added_in_place
        return merge_updated(ctx, node, path, metadata, rows, updated_groups(
            changes.aggregates, ctx.engine.read_table(path), touched_groups(
                feeds, cfg.incremental_by), changes.added, changes.removed, DELETE_COLUMN))


@dataclass(frozen=True)
class Changes:
    """The model's SQL over its one input's changes: over the rows they added, and over those
    they removed."""

    aggregates: Aggregates
    relation: str
    added: DataFrame
    removed: DataFrame


def added_up(ctx: BuildContext, node: CompiledNode, feeds: dict[str, DataFrame]
             ) -> tuple[Changes | None, str | None]:
    """(the changes to add to the model's sums and counts, None), or (None, why its groups
    cannot be added up)."""
    aggregates, why_not = aggregates_of(node)
    if aggregates is None:
        return None, why_not
    (relation, feed), = feeds.items()  # aggregates_of allows one input
    added_rows, removed_rows = sides(feed)
    added = model_rows(ctx, node, inputs={relation: added_rows})
    removed = model_rows(ctx, node, inputs={relation: removed_rows})
    why_not = inexact_sum(aggregates, added)
    if why_not:
        return None, why_not
    return Changes(aggregates, relation, added, removed), None


def add_in_place(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict[str, str],
                 changes: Changes, versions: dict[str, int]) -> Outcome | None:
    """Add the changes' totals to the stored groups as they are written: by a MERGE that adds
    them (MergeSpec.added), or by a rewrite that adds them in its one pass over the table
    (replace_groups says which), so that no stored row is read apart first; None when a
    group's sum may have become null (change_totals), or the rows written must be known
    first: for the model's expectations."""
    from ...spark.pyspark_api import F

    cfg = node.config
    if cfg.expectations:
        return None
    without_nulls = ctx.engine.columns_without_nulls(
        input_table(ctx, changes.relation), versions[changes.relation])
    aggregates = changes.aggregates
    with cached(change_totals(aggregates, changes.added, changes.removed, without_nulls)
                ) as totals:
        @cache
        def counts() -> Row:  # (groups, those whose sum may be null), one pass when first asked
            found = totals.select(F.count(F.lit(1)), F.count_if(MAY_BE_NULL)).first()
            assert found is not None  # (an aggregate over all rows: one row)
            return found

        if any(aggregates.may_turn_null(without_nulls)):
            with ctx.phases.timing("add_changes"):
                if counts()[1]:
                    return None
        source = totals.drop(MAY_BE_NULL)
        values = aggregates.values(source.columns)
        with checked_rows(ctx, node, source, replace=False) as checks, \
                ctx.phases.timing("write"):
            rows = aggregates.rows_column(source.columns)
            write, how = replace_groups(
                ctx, node, path, metadata, source.columns, lambda: counts()[0],
                merge_source=lambda: checks.rows, spec=MergeSpec(
                    cfg.incremental_by, null_safe_keys=cfg.incremental_by, added=tuple(values),
                    added_rows=rows),
                rewritten=lambda: added_to(ctx.engine.read_table(path), checks.rows,
                                           cfg.incremental_by, values, rows))
    groups = counts()[0] if how else write.rows  # a rewrite writes every row
    return Outcome("success", write, f"{groups} group(s) updated by adding their inputs' "
                   f"changes to their stored values{how}", checks.counts,
                   rows_checked=checks.checked)


def merge_updated(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict[str, str],
                  rows: DataFrame, updated: DataFrame) -> Outcome:
    """MERGE the updated groups; those whose sums adding cannot tell from null are computed
    from their rows first."""
    from ...spark.pyspark_api import F

    cfg = node.config
    with cached(updated) as updated:
        unclear = updated.where(RECOMPUTE).select(*cfg.incremental_by)
        with ctx.phases.timing("add_changes"):  # one pass counts both
            counted = updated.select(F.count(F.lit(1)), F.count_if(RECOMPUTE)).first()
            assert counted is not None  # (an aggregate over all rows: one row)
            groups, recomputed = counted
        current = updated.where(~F.col(RECOMPUTE) & ~F.col(DELETE_COLUMN)).drop(
            RECOMPUTE, DELETE_COLUMN)
        if recomputed:
            current = current.unionByName(in_groups(rows, unclear))
        with checked_rows(ctx, node, current, replace=False) as checks, \
                ctx.phases.timing("write"):
            df = checks.rows
            gone = updated.where(F.col(DELETE_COLUMN)).drop(RECOMPUTE)
            write, how = replace_groups(
                ctx, node, path, metadata, df.columns, lambda: groups,
                merge_source=lambda: df.withColumn(DELETE_COLUMN, F.lit(False)).unionByName(gone),
                spec=MergeSpec(cfg.incremental_by, null_safe_keys=cfg.incremental_by,
                               delete_column=DELETE_COLUMN),
                rewritten=lambda: _replaced(ctx, path, updated.select(*cfg.incremental_by), df))
        message = (f"{groups} group(s) updated by adding their inputs' changes"
                   + (f" ({recomputed} recomputed: a sum adding cannot tell from null)"
                      if recomputed else "") + how)
    return Outcome("success", write, message, checks.counts, rows_checked=checks.checked)


def recompute_groups(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict[str, str],
                     rows: DataFrame, groups: DataFrame, why_not_added: str) -> Outcome:
    """Compute the touched groups again from their input rows and replace them."""
    cfg = node.config
    with cached(groups) as groups:
        count = groups.count()
        with checked_rows(ctx, node, in_groups(rows, groups), replace=False) as checks, \
                ctx.phases.timing("write"):
            df = checks.rows
            write, how = replace_groups(
                ctx, node, path, metadata, df.columns, lambda: count,
                merge_source=lambda: group_replacement(df, groups),
                spec=MergeSpec(cfg.incremental_by, null_safe_keys=cfg.incremental_by,
                               delete_column=DELETE_COLUMN, replace_groups=True),
                rewritten=lambda: _replaced(ctx, path, groups, df))
        message = (f"{count} group(s) recomputed from their input rows (not added up "
                   f"from the changes: {why_not_added}){how}")
    return Outcome("success", write, message, checks.counts, rows_checked=checks.checked)


def replace_groups(ctx: BuildContext, node: CompiledNode, path: str, metadata: dict[str, str],
                   columns: list[str], group_count: Callable[[], int],
                   merge_source: Callable[[], DataFrame], spec: MergeSpec,
                   rewritten: Callable[[], DataFrame]) -> tuple[WriteResult, str]:
    """Put the touched groups' rows in place, by a MERGE of merge_source() or by writing
    rewritten() (the whole table) over the table: (the write, how it was done, for the
    message). group_count(): how many groups the changes touch.

    Rows land in files by no order of their keys, so `group_count` touched groups reach about
    1 - (1 - 1/files)^group_count of the table's files: most of them once there are as many
    groups as files. Then the table is rewritten rather than MERGEd, unless the engine's MERGE
    is the cheaper anyway (Capabilities.merges_wide_cheaply) or a model reads its change feed:
    a rewrite's feed has every row deleted and inserted again, which would make such a model
    redo all its groups (or see every row as new), where a MERGE's has only the rows that
    changed."""
    cfg = node.config
    properties = cfg.delta_properties(columns)
    # the graph first: counting files reads the table's log
    if (_feed_is_read(ctx, node) or ctx.engine.capabilities.merges_wide_cheaply
            or group_count() < (files := ctx.engine.file_count(path))):
        return ctx.engine.merge(merge_source(), path, spec, metadata, properties=properties), ""
    write = ctx.engine.write(rewritten(), path, "overwrite", cfg.partition_by, metadata=metadata,
                             properties=properties)
    return write, f"; the table rewritten, as they reach most of its {files} file(s)"


def _replaced(ctx: BuildContext, path: str, groups: DataFrame, rows: DataFrame) -> DataFrame:
    """The table with the stored rows of `groups` replaced by `rows`."""
    untouched = in_groups(ctx.engine.read_table(path), groups, inside=False)
    return untouched.select(*rows.columns).unionByName(rows)


def _feed_is_read(ctx: BuildContext, node: CompiledNode) -> bool:
    """Whether a model reads this one's changes: as a table maintained per group, or through
    ref(.., changes=true)."""
    children = (ctx.graph.nodes[name] for name in ctx.graph.children.get(node.name, ()))
    return any(child.config.incremental_by or node.name in child.change_refs
               for child in children)
