"""`cdc: snapshot` (as AUTO CDC FROM SNAPSHOT): a batch's rows are whole snapshots of a source,
each one `sequence_by` value, and become change events: every row as it is (an insert or an
update, which the MERGE keeps only where it changed a tracked column, for SCD2) and, for each
key that a snapshot lacks but the one before it had (or, for the batch's first, the table's
current rows), a delete at that snapshot's sequence. The events then go the way of any merge
model's (writes.py): SCD1 or SCD2, deletes remembered. A batch may hold several snapshots;
they apply in order, and a replayed batch computes the same events from the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.config import SNAPSHOT_VANISHED
from ..context import IS_CURRENT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...core.config import NodeConfig
    from ..context import BuildContext


def snapshot_events(ctx: BuildContext | None, cfg: NodeConfig, rows: DataFrame,
                    existing: str | None) -> DataFrame:
    """The batch's snapshots (`rows`) as change events, with SNAPSHOT_VANISHED true on the
    deletes; existing: the table they apply to (None: none yet)."""
    from ...spark.pyspark_api import F, Window

    keys, seq = list(cfg.unique_key), list(cfg.sequence_by)
    present = rows.select(*keys, F.struct(*seq).alias("_snapshot")).distinct()
    snapshots = present.select("_snapshot").distinct()
    known = present.select(*keys)
    stored = None
    if existing is not None and ctx is not None and ctx.engine.table_exists(existing):
        table = ctx.engine.read_table(existing)
        stored = (table.where(F.col(IS_CURRENT)) if cfg.scd_type == 2 else table).select(*keys)
        known = known.unionByName(stored)
    # every key against every snapshot of the batch: was it there, and in the one before?
    grid = known.distinct().crossJoin(snapshots).join(
        present.withColumn("_there", F.lit(True)), [*keys, "_snapshot"], "left")
    before = F.lit(False)
    if stored is not None:
        grid = grid.join(stored.withColumn("_stored", F.lit(True)), keys, "left")
        before = F.coalesce(F.col("_stored"), F.lit(False))
    previous = F.lag(F.coalesce(F.col("_there"), F.lit(False))).over(
        Window.partitionBy(*keys).orderBy("_snapshot"))
    vanished = grid.withColumn("_before", F.coalesce(previous, before)).where(
        F.col("_before") & F.col("_there").isNull())
    deletes = vanished.select(*keys, *[F.col(f"_snapshot.{c}").alias(c) for c in seq])
    types = dict(rows.dtypes)
    others = [F.lit(None).cast(types[c]).alias(c) for c in rows.columns
              if c not in keys and c not in seq]
    return rows.withColumn(SNAPSHOT_VANISHED, F.lit(False)).unionByName(
        deletes.select(*keys, *seq, *others).withColumn(SNAPSHOT_VANISHED, F.lit(True)))
