"""Debezium change events unpacked into rows of the table they change (`cdc: debezium` on a
source table, from Kafka or from JSON Lines files).

An event is Debezium's envelope, with or without the JSON converter's {"schema", "payload"}
wrapper: `op` (c create, u update, d delete, r snapshot read), `before` and `after` (the row),
and `source` (where in the database's log the change is). Each event becomes a row with the
source's schema columns, from `after` (from `before` for a delete), and:
  _cdc_op            the event's op
  _cdc_deleted       true for a delete
  _cdc_committed_at  source.ts_ms as a timestamp: when the database committed the change
  _cdc_lsn           source.lsn, the change's position in the database log (PostgreSQL; else null)
- A Kafka tombstone (a record with a null value, sent after each delete so log compaction can
  drop the key, and sometimes all that is left of the delete) is a delete of the key its record
  key holds, at the record's timestamp, with a null _cdc_lsn: older than the delete it follows.
- An update that changes the key (where the source names its unique_key and the event has a
  before image) is a delete of the old key and a create of the new one.
- An event that is not an envelope (no known op, no row image, not JSON) keeps its text in
  `_corrupt_record`, with null columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.project import SourceTable
from ..context import CORRUPT_COLUMN, RESCUED_COLUMN
from .json_values import parsed_json

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

OP, DELETED, COMMITTED_AT, LSN = "_cdc_op", "_cdc_deleted", "_cdc_committed_at", "_cdc_lsn"
OPS = ("c", "u", "d", "r")
# The envelope's row images are kept as JSON text here and parsed as the source's rows later,
# so that they get the same corrupt and rescued handling as any JSON value.
FIELDS = "before: string, after: string, op: string, source: struct<ts_ms: bigint, lsn: bigint>"
ENVELOPE = f"struct<payload: struct<{FIELDS}>, {FIELDS}>"


def decoded(lines: DataFrame, source: SourceTable, schema: str, options: dict[str, str],
            position: Column, tombstones: tuple[Column, Column] | None = None) -> DataFrame:
    """JSON texts (column `value` of `lines`) as the source's rows: change events unpacked when
    the source says `cdc: debezium`, else each text parsed as a row."""
    if source.cdc == "debezium":
        return change_rows(lines, source, schema, options, position, tombstones)
    return parsed_json(lines, source, schema, options, position)


def change_rows(lines: DataFrame, source: SourceTable, schema: str, options: dict[str, str],
                position: Column, tombstones: tuple[Column, Column] | None = None) -> DataFrame:
    """Debezium events as rows (see the module's doc); `lines`' other columns carried along.
    tombstones: (record key, record timestamp) columns, for Kafka records."""
    from ...spark.pyspark_api import F

    value = F.col("value")
    envelope = F.from_json(value, ENVELOPE)

    def field(name: str) -> Column:
        return F.coalesce(envelope["payload"][name], envelope[name])

    op, before, after = field("op"), field("before"), field("after")
    image = F.when(op == "d", before).otherwise(after)
    bad = value.isNotNull() & (~F.coalesce(op.isin(*OPS), F.lit(False)) | image.isNull()
                               | ~F.is_valid_utf8(value))
    changes = F.array(F.struct(image.alias("image"), op.alias("op")))
    if source.unique_key:
        old_key, new_key = (F.from_json(image_text, schema) for image_text in (before, after))
        same_key = F.lit(True)
        for column in source.unique_key:
            same_key = same_key & old_key[column].eqNullSafe(new_key[column])
        changes = F.when((op == "u") & before.isNotNull() & ~same_key, F.array(
            F.struct(before.alias("image"), F.lit("d").alias("op")),
            F.struct(after.alias("image"), F.lit("c").alias("op")))).otherwise(changes)
    committed_at, lsn = F.timestamp_millis(field("source")["ts_ms"]), field("source")["lsn"]
    if tombstones is not None:
        key, timestamp = tombstones
        tombstone = value.isNull()
        changes = F.when(tombstone, F.array(F.struct(
            F.coalesce(F.get_json_object(key, "$.payload"), key).alias("image"),
            F.lit("d").alias("op")))).otherwise(changes)
        committed_at = F.when(tombstone, timestamp).otherwise(committed_at)
    changes = F.when(bad, F.array(F.struct(F.lit(None).cast("string").alias("image"),
                                           F.lit(None).cast("string").alias("op"))
                                  )).otherwise(changes)
    carried = [c for c in lines.columns if c != "value"]
    events = lines.select(F.explode(changes).alias("change"), value.alias("_event"),
                          bad.alias("_bad"), committed_at.alias(COMMITTED_AT), lsn.alias(LSN),
                          *carried)
    rows = parsed_json(
        events.select(F.col("change.image").alias("value"), F.col("change.op").alias(OP),
                      "_event", "_bad", COMMITTED_AT, LSN, *carried),
        source, schema, options, position)
    corrupt = F.when(F.col("_bad"), F.col("_event")).otherwise(F.col(CORRUPT_COLUMN))
    row_columns = rows.columns[:rows.columns.index(CORRUPT_COLUMN)]
    return rows.select(*row_columns, corrupt.alias(CORRUPT_COLUMN), RESCUED_COLUMN, OP,
                       (F.col(OP) == "d").alias(DELETED), COMMITTED_AT, LSN, *carried)
