"""Deleted keys remembered in `<model>_tombstones` (the key, its sequence and when it was
deleted) for `tombstone_retention`, so that an event older than a delete that arrives later does
not bring the key back, as a full recompute would not (writes.py's MERGE semantics)."""

from __future__ import annotations

import datetime as dt

from ..core.config import interval_seconds
from ..engines.base import MergeSpec
from ..engines.sql import newer_condition, quote
from .context import DELETE_COLUMN, BuildContext

DELETED_AT = "_deleted_at"
TOMBSTONED = "_medallion_tombstoned"  # an event whose key has a remembered delete


def retention_cutoff(cfg) -> str:
    """SQL: the time before which a remembered delete is forgotten."""
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(
        seconds=interval_seconds(cfg.tombstone_retention))
    return f"CAST('{cutoff:%Y-%m-%d %H:%M:%S}' AS TIMESTAMP)"


def remembered_deletes(ctx: BuildContext, cfg, tombstones: str):
    """The deletes remembered within the retention: older ones are forgotten whether or not a
    MERGE of the tombstones has removed them yet."""
    return ctx.engine.read_table(tombstones).where(f"{DELETED_AT} >= {retention_cutoff(cfg)}")


def without_superseded(events, cfg, remembered):
    """The events minus those older than a remembered delete of their key, each flagged
    (TOMBSTONED) when its key has one: a newer event brings the key back."""
    from ..spark.pyspark_api import F

    keys = list(cfg.unique_key)
    deleted = remembered.select(
        *keys, *[F.col(c).alias(f"_tomb_{c}") for c in cfg.sequence_by],
        F.lit(True).alias("_tomb"))
    newer = newer_condition(cfg.sequence_by, quote, lambda c: quote(f"_tomb_{c}")) or "true"
    joined = events.join(deleted, keys, "left")
    keep = F.expr(f"_tomb IS NULL OR {DELETE_COLUMN} OR ({newer})")
    return (joined.where(keep).withColumn(TOMBSTONED, F.col("_tomb").isNotNull())
            .drop("_tomb", *[f"_tomb_{c}" for c in cfg.sequence_by]))


def anything_to_remember(events, cfg) -> bool:
    """Whether the events delete a key or bring back one with a remembered delete; one pass
    over them (cached, and counting their expectations on the way). Without either there is
    nothing to remember or forget: a quiet streaming batch skips the tombstones' pass (a join
    with them, 0.2 s of a 1-row batch's 1 s). A delete past its retention is ignored by
    readers and goes with the next write."""
    from ..spark.pyspark_api import F

    flagged = F.col(TOMBSTONED) if TOMBSTONED in events.columns else F.lit(False)
    deletes, back = events.agg(F.count_if(F.col(DELETE_COLUMN)), F.count_if(flagged)).first()
    return bool(deletes or back)


def write_tombstones(ctx: BuildContext, events, cfg, path: str, replace: bool,
                     txn: tuple[str, int] | None) -> None:
    """Remember deletes: for SCD1 the keys whose latest event is a delete (a newer row brings
    the key back and is forgotten), for SCD2 every delete (each ends a version, which a late
    event's recomputed history must still see). Deletes older than the retention are forgotten.
    Written before the model's table, under the same app transaction: a batch replayed after a
    crash between the two writes finds it done. A batch with nothing to remember or forget
    writes nothing (a MERGE costs seconds on delta-spark even with nothing to merge), and on
    delta-spark a batch of new deletes is appended: the deletes past the retention, which
    readers ignore already, go with the next MERGE."""
    from ..spark.pyspark_api import F

    keys, seq = list(cfg.unique_key), list(cfg.sequence_by)
    expire = f"t.{DELETED_AT} < {retention_cutoff(cfg)}"
    deleted_at = F.current_timestamp().alias(DELETED_AT)
    if cfg.scd_type == 2:  # a delete is one row of history: nothing brings it back
        deletes = events.where(DELETE_COLUMN).select(*keys, *seq, deleted_at)
        if replace:
            ctx.engine.write(deletes, path, "overwrite", txn=txn)
        elif ctx.engine.capabilities.skips_empty_writes or not deletes.isEmpty():
            ctx.engine.merge(deletes, path, MergeSpec(
                keys=tuple(keys + seq), null_safe_keys=tuple(seq), expire=expire), txn=txn)
        return
    # (distinct_events kept one row per key: its latest)
    rows = events.select(*keys, *seq, deleted_at, (~F.col(DELETE_COLUMN)).alias(DELETE_COLUMN))
    if replace:
        ctx.engine.write(rows.where(~F.col(DELETE_COLUMN)).drop(DELETE_COLUMN), path, "overwrite",
                         txn=txn)
        return
    known = ctx.engine.read_table(path).select(*keys)
    marked = rows.join(known.withColumn("_known", F.lit(True)), keys, "left").where(
        f"NOT {DELETE_COLUMN} OR _known")  # deletes, and keys that have one
    relevant = marked.drop("_known")
    if not ctx.engine.capabilities.skips_empty_writes:
        # An engine whose every write commits, and whose MERGE costs seconds (7 of a 60 s
        # increment on delta-spark): one query says whether there is anything to write, and
        # whether any key has a tombstone. New deletes only, the usual batch, match nothing:
        # appended, under the same app transaction.
        count, with_tombstone = marked.agg(F.count(F.lit(1)), F.count("_known")).first()
        if not count:
            return
        if not with_tombstone:
            ctx.engine.write(relevant.drop(DELETE_COLUMN), path, "append", txn=txn)
            return
    ctx.engine.merge(relevant, path, MergeSpec(
        keys=tuple(keys), sequence_by=tuple(seq), delete_column=DELETE_COLUMN, expire=expire),
        txn=txn)
