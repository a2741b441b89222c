"""Deleted keys remembered in `<model>_tombstones` (the key, its sequence and when it was
deleted) for `tombstone_retention`, so that an event older than a delete that arrives later does
not bring the key back, as a full recompute would not (writes.py's MERGE semantics)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.config import interval_seconds
from ...engines.sql import MergeSpec, newer_condition, quote
from ..context import DELETE_COLUMN, BuildContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...core.config import NodeConfig

DELETED_AT = "_deleted_at"
TOMBSTONED = "_medallion_tombstoned"  # an event whose key has a remembered delete


def retention_cutoff(cfg: NodeConfig) -> str:
    """SQL: the time before which a remembered delete is forgotten."""
    seconds = interval_seconds(cfg.tombstone_retention)
    assert seconds is not None  # (an interval: load/model_config.py checked it)
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds)
    return f"CAST('{cutoff:%Y-%m-%d %H:%M:%S}' AS TIMESTAMP)"


def remembered_deletes(ctx: BuildContext, cfg: NodeConfig, tombstones: str) -> DataFrame:
    """The deletes remembered within the retention: older ones are forgotten whether or not a
    MERGE of the tombstones has removed them yet."""
    return ctx.engine.read_table(tombstones).where(f"{DELETED_AT} >= {retention_cutoff(cfg)}")


def without_superseded(events: DataFrame, cfg: NodeConfig, tombstones: DataFrame) -> DataFrame:
    """The events minus those older than a delete of their key remembered within the retention,
    each flagged (TOMBSTONED) when its key has a row in the tombstones table, remembered or past
    the retention: a newer event brings the key back, and the tombstones' write (which reads
    the flag instead of joining the table again) must not add a second row for such a key."""
    keys = list(cfg.unique_key)
    # As SQL text, which costs a few calls into the JVM where each Column object costs some.
    deleted = tombstones.selectExpr(
        *map(quote, keys), *[f"{quote(c)} AS {quote('_tomb_' + c)}" for c in cfg.sequence_by],
        f"{DELETED_AT} >= {retention_cutoff(cfg)} AS _tomb_live", "true AS _tomb")
    newer = newer_condition(cfg.sequence_by, quote, lambda c: quote(f"_tomb_{c}")) or "true"
    joined = events.join(deleted, keys, "left")
    keep = f"_tomb IS NULL OR NOT _tomb_live OR {quote(DELETE_COLUMN)} OR ({newer})"
    return joined.where(keep).selectExpr(*map(quote, events.columns),
                                         f"_tomb IS NOT NULL AS {TOMBSTONED}")


@dataclass(frozen=True)
class ToRemember:
    """What a batch's events hold for the tombstones: deletes, and events of keys that have a
    tombstone (without_superseded's flag)."""
    deletes: int
    tombstoned: int

    def __bool__(self) -> bool:
        return bool(self.deletes or self.tombstoned)


def to_remember(events: DataFrame) -> ToRemember:
    """Whether the events delete a key or touch one with a tombstone; one pass over them
    (cached, and counting their expectations on the way). Without either there is nothing to
    remember or forget: a quiet streaming batch skips the tombstones' pass (a join with them,
    0.2 s of a 1-row batch's 1 s). A delete past its retention is ignored by readers and goes
    with the next MERGE of the tombstones."""
    from ...spark.pyspark_api import F

    flagged = F.col(TOMBSTONED) if TOMBSTONED in events.columns else F.lit(False)
    counts = events.agg(F.count_if(F.col(DELETE_COLUMN)), F.count_if(flagged)).first()
    assert counts is not None  # (an aggregate over all rows: one row)
    deletes, tombstoned = counts
    return ToRemember(deletes, tombstoned)


def write_tombstones(ctx: BuildContext, events: DataFrame, cfg: NodeConfig, path: str,
                     replace: bool, txn: tuple[str, int] | None,
                     counted: ToRemember | None = None) -> None:
    """Remember deletes: for SCD1 the keys whose latest event is a delete (a newer row brings
    the key back and is forgotten), for SCD2 every delete (each ends a version, which a late
    event's recomputed history must still see). Deletes older than the retention are forgotten.
    Written before the model's table, under the same app transaction: a batch replayed after a
    crash between the two writes finds it done. A batch with nothing to remember or forget
    writes nothing (a MERGE costs seconds on delta-spark even with nothing to merge), and on
    delta-spark a batch of new deletes is appended: the deletes past the retention, which
    readers ignore already, go with the next MERGE. counted: the events' own pass
    (to_remember), when the caller made it."""
    from ...spark.pyspark_api import F

    def counts() -> ToRemember:
        return counted if counted is not None else to_remember(events)

    keys, seq = list(cfg.unique_key), list(cfg.sequence_by)
    expire = f"t.{DELETED_AT} < {retention_cutoff(cfg)}"
    deleted_at = F.current_timestamp().alias(DELETED_AT)
    if cfg.scd_type == 2:  # a delete is one row of history: nothing brings it back
        deletes = events.where(DELETE_COLUMN).select(*keys, *seq, deleted_at)
        if replace:
            ctx.engine.write(deletes, path, "overwrite", txn=txn)
        elif ctx.engine.capabilities.skips_empty_writes or counts().deletes:
            ctx.engine.merge(deletes, path, MergeSpec(
                keys=tuple(keys + seq), null_safe_keys=tuple(seq), expire=expire), txn=txn)
        return
    # (distinct_events kept one row per key: its latest)
    def tombstone_rows(df: DataFrame) -> DataFrame:
        return df.select(*keys, *seq, deleted_at, (~F.col(DELETE_COLUMN)).alias(DELETE_COLUMN))

    if replace:
        ctx.engine.write(tombstone_rows(events.where(DELETE_COLUMN)).drop(DELETE_COLUMN), path,
                         "overwrite", txn=txn)
        return
    # deletes, and the keys that have a tombstone (without_superseded flagged them)
    relevant = tombstone_rows(events.where(F.col(DELETE_COLUMN) | F.col(TOMBSTONED)))
    if not ctx.engine.capabilities.skips_empty_writes:
        # An engine whose every write commits, and whose MERGE costs seconds (7 of a 60 s
        # increment on delta-spark). New deletes only, the usual batch, match no tombstone:
        # appended, under the same app transaction.
        found = counts()
        if not found:
            return
        if not found.tombstoned:
            ctx.engine.write(relevant.drop(DELETE_COLUMN), path, "append", txn=txn)
            return
    ctx.engine.merge(relevant, path, MergeSpec(
        keys=tuple(keys), sequence_by=tuple(seq), delete_column=DELETE_COLUMN, expire=expire),
        txn=txn)
