"""SCD type 2 history for the keys a batch touches, recomputed from each key's whole timeline
(stored versions, remembered deletes and the new events), so that late and replayed events
give the same rows; a new version starts only where tracked columns change."""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from ...core.errors import WriteError
from ...engines.sql import newer_condition, quote
from ..context import DELETE_COLUMN, IS_CURRENT, VALID_FROM, VALID_TO, BuildContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, WindowSpec

    from ...core.config import NodeConfig


def scd2_history(ctx: BuildContext | None, events: DataFrame, cfg: NodeConfig, path: str | None,
                 remembered: DataFrame | None = None) -> DataFrame:
    """SCD type 2 rows for every key the new events touch, recomputed from the whole timeline.

    The timeline of a key is its stored versions, its remembered delete, and the new events,
    ordered by sequence_by; each version is valid from its own sequence value to the next one's,
    and the last is current unless a delete ends it. Validity comes from the data, not the clock,
    so a replayed or late batch yields the same rows. A closed version with no successor is one
    that a delete closed, and is read back as that delete. remembered: the deletes remembered
    within the retention (tombstones.remembered_deletes), or None."""
    from ...spark.pyspark_api import F, Window

    keys, seqs = list(cfg.unique_key), list(cfg.sequence_by)
    seq = seqs[0]  # validity runs from the first sequence column's values
    columns = [c for c in events.columns if c != DELETE_COLUMN]
    types = dict(events.dtypes)
    events = events.withColumn("_medallion_new", F.lit(1))
    if path is not None:
        assert ctx is not None  # (None only where no table is read or written: unit tests)
        touched = events.select(*keys).distinct()
        stored = as_edited(ctx.engine.read_table(path), cfg, columns, types).join(
            touched, keys, "left_semi")
        closed, nxt = stored.where(F.col(VALID_TO).isNotNull()).alias("c"), stored.alias("n")
        # its successor: a later version of the key from where it ends (versions may share a
        # valid_from: it holds the first sequence column only)
        newer = newer_condition(tuple(seqs), lambda c: f"n.{quote(c)}", lambda c: f"c.{quote(c)}")
        assert newer is not None  # (seqs has its first column: seq)
        later = F.expr(newer) & ~F.expr(" AND ".join(
            f"(n.{quote(c)} IS NOT DISTINCT FROM c.{quote(c)})" for c in seqs))
        closed_by_delete = closed.join(
            nxt, [F.col(f"c.{k}") == F.col(f"n.{k}") for k in keys]
            + [F.col(f"c.{VALID_TO}") == F.col(f"n.{VALID_FROM}"), later], "left_anti")
        deletes = closed_by_delete.select(*[
            F.col(c) if c in keys else
            F.col(VALID_TO).alias(c) if c == seq else F.lit(None).cast(types[c]).alias(c)
            for c in columns], F.lit(True).alias(DELETE_COLUMN), F.lit(0).alias("_medallion_new"))
        versions = stored.select(*columns, F.lit(False).alias(DELETE_COLUMN),
                                 F.lit(0).alias("_medallion_new"))
        events = events.unionByName(versions).unionByName(deletes)
        if remembered is not None:
            remembered = remembered.join(touched, keys, "left_semi")
            events = events.unionByName(remembered.select(*[
                F.col(c) if c in keys or c in seqs else F.lit(None).cast(types[c]).alias(c)
                for c in columns], F.lit(True).alias(DELETE_COLUMN),
                F.lit(0).alias("_medallion_new")))
    # one event per key and sequence value: a new row replaces a stored one with the same value
    same = Window.partitionBy(*keys, *seqs).orderBy(F.col("_medallion_new").desc(),
                                                    F.col(DELETE_COLUMN).desc())
    events = events.withColumn("_medallion_rank", F.row_number().over(same)).where(
        "_medallion_rank = 1")
    timeline = Window.partitionBy(*keys).orderBy(*[F.col(c).asc_nulls_first() for c in seqs])
    events = version_starts(events, cfg, columns, timeline)
    following = F.lead(seq).over(timeline)
    history = (events.withColumn(VALID_TO, following)
               .where(~F.col(DELETE_COLUMN))
               .select(*columns, F.col(seq).alias(VALID_FROM), VALID_TO,
                       F.col(VALID_TO).isNull().alias(IS_CURRENT)))
    if path is None:
        return history
    # Stored versions the recomputed history no longer has (a late event started their run
    # earlier) are deleted by the MERGE.
    version = keys + [VALID_FROM] + seqs[1:]
    kept = history.select(*[F.col(c).alias(f"_kept_{c}") for c in version])
    gone = stored.join(kept, on=reduce(lambda a, b: a & b, [
        stored[c].eqNullSafe(kept[f"_kept_{c}"]) for c in version]), how="left_anti")
    return history.withColumn(DELETE_COLUMN, F.lit(False)).unionByName(
        gone.select(*history.columns).withColumn(DELETE_COLUMN, F.lit(True)))


def as_edited(stored: DataFrame, cfg: NodeConfig, columns: list[str],
              types: dict[str, str]) -> DataFrame:
    """The stored versions under the model's columns as edited: a column renamed since
    (renamed_columns) by its new name, one added since as nulls, as the table holds them once
    this write evolves it (schema_changes.py)."""
    from ...spark.pyspark_api import F

    for old, new in cfg.renamed_columns.items():
        if old in stored.columns and new not in stored.columns:
            stored = stored.withColumnRenamed(old, new)
    added = {c: F.lit(None).cast(types[c]) for c in columns if c not in stored.columns}
    return stored.withColumns(added) if added else stored


def version_starts(events: DataFrame, cfg: NodeConfig, columns: list[str],
                   timeline: WindowSpec) -> DataFrame:
    """The events that start a version: a key's first, the first after a delete, deletes, and
    those whose tracked columns differ from the event before. Untracked columns of a version
    take the values of the last event of its run (updated in place), as AUTO CDC's TRACK
    HISTORY ON does; a re-delivered unchanged row makes no new version."""
    from ...spark.pyspark_api import F, Window

    fixed = list(cfg.unique_key) + list(cfg.sequence_by)
    tracked = list(cfg.track_history_columns) or [
        c for c in columns if c not in fixed and c not in cfg.track_history_except_columns]
    missing = [c for c in tracked + list(cfg.track_history_except_columns) if c not in columns]
    if missing:
        raise WriteError(f"track_history columns {', '.join(missing)} are not columns of "
                         "the model", hint="columns: " + ", ".join(columns))
    before = F.lag(DELETE_COLUMN).over(timeline)
    unchanged = reduce(lambda a, b: a & b, [F.lag(c).over(timeline).eqNullSafe(F.col(c))
                                            for c in tracked], F.lit(True))
    events = events.withColumn("_medallion_start", F.col(DELETE_COLUMN) | before.isNull()
                               | before | ~unchanged)
    untracked = [c for c in columns if c not in fixed and c not in tracked]
    if untracked:
        run = F.sum(F.col("_medallion_start").cast("int")).over(
            timeline.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        whole = Window.partitionBy(*cfg.unique_key, "_medallion_run").orderBy(
            *[F.col(c).asc_nulls_first() for c in cfg.sequence_by]).rowsBetween(
            Window.unboundedPreceding, Window.unboundedFollowing)
        events = events.withColumn("_medallion_run", run)
        events = events.select(*[F.last(c).over(whole).alias(c) if c in untracked else F.col(c)
                                 for c in events.columns])
    return events.where("_medallion_start").drop("_medallion_start", "_medallion_run")
