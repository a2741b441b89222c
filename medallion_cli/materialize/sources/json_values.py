"""JSON texts (landing lines, Kafka values) parsed into a source's schema so that nothing is
lost: a text that does not fit keeps its raw form in `_corrupt_record`, fields outside the
schema are kept in `_rescued_data` (or fail the build, or are dropped, as the source says)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from ...core.project import SourceTable
from ..context import CORRUPT_COLUMN, RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ESCAPED_PREFIX = "base64:"


def parsed_json(lines: DataFrame, source: SourceTable, schema: str, options: dict[str, str],
                position: Column) -> DataFrame:
    """JSON texts (column `value` of `lines`) as the schema's columns, `_corrupt_record` and
    `_rescued_data`, with `lines`' other columns carried along. position: a column saying where
    a text came from, for errors (its file, its topic and offset)."""
    from ...spark.pyspark_api import F, T

    value = F.col("value")
    parsed = F.from_json(value, f"{schema}, {CORRUPT_COLUMN} string",
                         {**options, "columnNameOfCorruptRecord": CORRUPT_COLUMN,
                          "mode": "PERMISSIVE"})
    # pyspark types fromDDL as DataType's; a DDL of columns gives a StructType
    names = T.StructType.fromDDL(schema).fieldNames()  # type: ignore[attr-defined]
    extra_names = F.array_except(F.json_object_keys(value), F.array(*map(F.lit, names)))
    extra = F.to_json(F.map_filter(F.from_json(value, "map<string,variant>"),
                                   lambda k, v: ~k.isin(names)))
    # Listing a text's keys parses it a second time; a flat object of schema fields alone
    # needs no listing to show it has none other.
    valid, may_have_others = F.is_valid_utf8(value), ~value.rlike(only_keys_pattern(names))
    if source.unknown_fields == "fail":
        extra = F.raise_error(F.concat(
            F.lit(f"source '{source.source}.{source.name}' has field(s) outside its schema: "),
            F.array_join(extra_names, ", "), F.lit(" in "), position,
            F.lit(" (add them to the schema, or set unknown_fields: rescue or ignore)")))
    carried = [c for c in lines.columns if c != "value"]
    rows = lines.select(
        F.when(valid, parsed).alias("row"),
        F.when(valid & may_have_others & (F.size(extra_names) > 0), extra).alias(RESCUED_COLUMN),
        F.when(~valid, value).alias("_invalid"), *carried)
    return rows.select(
        *[F.col("row")[n].alias(n) for n in names],
        F.coalesce(F.col("_invalid"), F.col("row")[CORRUPT_COLUMN]).alias(CORRUPT_COLUMN),
        RESCUED_COLUMN, *carried)


def only_keys_pattern(names: list[str]) -> str:
    """A Java regex that matches a JSON object whose keys are among `names`, written plainly,
    and whose values are strings or plain words (numbers, true, false, null): what landing
    files mostly hold. A text it matches has no other key. One it does not match (nested
    values, escaped keys, or not JSON) may have one: its keys are listed. A name JSON writes
    with escapes is left out (its escaped form could spell another key). Possessive
    quantifiers: a text is scanned once, without backtracking."""
    plain = [name for name in names if json.dumps(name, ensure_ascii=False)[1:-1] == name]
    if not plain:
        return r"^\s*+\{\s*+\}\s*+$"
    key = "(?:" + "|".join(map(re.escape, plain)) + ")"
    value = r'(?:"(?:[^"\\]++|\\.)*+"|[^",:{}\[\]\s]++)'
    pair = rf'"{key}"\s*+:\s*+{value}\s*+'
    return rf'^\s*+\{{\s*+(?:{pair}(?:,\s*+{pair})*+)?\}}\s*+$'


def readable(column: Column) -> Column:
    """Text that is not valid UTF-8 as `base64:<its bytes>`, so no reader chokes on it."""
    from ...spark.pyspark_api import F

    return F.when(F.is_valid_utf8(column), column).otherwise(
        F.concat(F.lit(ESCAPED_PREFIX), F.base64(column.cast("binary"))))
