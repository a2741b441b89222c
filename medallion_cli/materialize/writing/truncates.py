"""truncate_when (SCD1): the latest truncate event, this batch's or remembered in
`<model>_truncates`, and the events newer than it. The MERGE that applies them deletes every
stored row not newer than that truncate, so an event older than it that arrives later stays
out, as in a full recompute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...engines.sql import newer_condition, quote, sql_literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...core.config import NodeConfig
    from ..context import BuildContext

TRUNCATED_AT = "_truncated_at"


def after_truncates(ctx: BuildContext | None, cfg: NodeConfig, df: DataFrame,
                    existing: str | None, path: str | None, txn: tuple[str, int] | None
                    ) -> tuple[DataFrame, dict[str, str] | None]:
    """truncate_when: the events newer than the latest truncate (this batch's or remembered at
    path), and that truncate's sequence as SQL literals (None when there was none), for the
    MERGE to delete the stored rows not newer than it. What is remembered changes first, under
    the batch's app transaction: a replay finds it done and reads the same truncate."""
    from ...spark.pyspark_api import F

    assert cfg.truncate_when is not None  # (merge_rows calls it for those alone)
    seq = list(cfg.sequence_by)
    latest_first = [F.col(c).desc_nulls_last() for c in seq]
    truncating = F.coalesce(F.expr(cfg.truncate_when), F.lit(False))
    brought = df.where(truncating).select(*seq)
    kept = False
    candidates = brought.withColumn("_new", F.lit(True))
    if path is not None:
        assert ctx is not None  # (None only where no table is read or written: unit tests)
        kept = ctx.engine.table_exists(path)
        if kept and existing is not None:  # a first build or full refresh forgets earlier ones
            candidates = candidates.unionByName(
                ctx.engine.read_table(path).select(*seq, F.lit(False).alias("_new")))
    # the latest truncate; on a tie the remembered one, which needs no new write
    found = candidates.orderBy(*latest_first, "_new").select(
        "_new", *[F.col(c).cast("string").alias(c) for c in seq]).first()
    if path is not None and ctx is not None and (
            found is not None and found["_new"] or kept and existing is None):
        ctx.engine.write(brought.orderBy(*latest_first).limit(1).withColumn(
            TRUNCATED_AT, F.current_timestamp()), path, "overwrite", txn=txn)
    events = df.where(~truncating)
    if found is None:
        return events, None
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    through = {c: sql_literal(found[c], types[c]) for c in seq}
    not_newer = newer_condition(cfg.sequence_by, lambda c: through[c], quote)
    return events.where(f"NOT coalesce({not_newer}, false)"), through
