"""The columns reading a source gives (read_source), known from its declaration alone, for
what must know them before Spark starts: the static checks and the docs page. Each reader's
own docstring says the same (landing.py, kafka.py, debezium.py); test_landing.py compares
this with what reading gives."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ...core.project import SourceTable
from ..context import CORRUPT_COLUMN, RESCUED_COLUMN, SOURCE_FILE_COLUMN
from .debezium import COMMITTED_AT, DELETED, LSN, OP
from .kafka import POSITION

CDC = {OP: "string", DELETED: "boolean", COMMITTED_AT: "timestamp", LSN: "bigint"}
KAFKA = dict(zip(POSITION.values(), ("string", "string", "int", "bigint", "timestamp")))


def ddl_columns(ddl: str) -> dict[str, str]:
    """`a bigint, b decimal(10, 2)` as {a: bigint, b: decimal(10,2)}: types as Spark's
    simpleString writes them, as a built table's are."""
    schema = sqlglot.parse_one(f"create table t ({ddl})", read="spark").this
    return {c.name: c.args["kind"].sql("spark").lower().replace(" ", "")
            for c in schema.expressions if isinstance(c, exp.ColumnDef)}


def read_columns(source: SourceTable) -> dict[str, str] | None:
    """Column -> type of the source's rows as a model reads them; None where only a read can
    tell (no declared schema, or a Delta table: its log says)."""
    if source.format == "kafka" and not source.schema:
        return {"value": "string", **KAFKA}
    if source.format == "delta" or not source.schema:
        return None
    columns = {**ddl_columns(source.schema), **(CDC if source.cdc == "debezium" else {})}
    parsed = source.format == "kafka" or (source.format == "json" and (
        source.unknown_fields != "ignore" or bool(source.cdc)))
    if parsed:  # read as text, then parsed here: what does not fit is kept apart
        columns.update({CORRUPT_COLUMN: "string", RESCUED_COLUMN: "string"})
    elif source.format in ("json", "csv"):
        columns[CORRUPT_COLUMN] = "string"
    return {**columns, **(KAFKA if source.format == "kafka" else {SOURCE_FILE_COLUMN: "string"})}
