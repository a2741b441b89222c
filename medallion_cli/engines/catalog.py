"""Where a build names its tables (a target's metastore), as the few things the build asks of
a catalog: what is registered under a name, dropping an entry, registering a Delta table at its
path and a view over the catalog's names, with their docs.

Two catalogs, chosen by the engine's capability (`Capabilities.catalog`): its Spark's own
(SqlCatalog, here: Spark SQL on whatever metastore that Spark reaches, where the Spark has
Delta's catalog), or a Hive Metastore service's Thrift API (thrift_catalog.py: no JVM, for an
engine whose Spark cannot name a Delta table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..load.relations import quoted
from .sql import quote, sql_literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# What a catalog has under a name: (table type: MANAGED, EXTERNAL or VIEW, location), or None
Registered = tuple[str, str | None] | None
# A view's columns, (name, Spark SQL type), computed only for a catalog that keeps them
ViewColumns = Callable[[], list[tuple[str, str]]]


@dataclass(frozen=True)
class Docs:
    """persist_docs: the relation's description and its columns' ("" and {}: none)."""

    comment: str = ""
    columns: dict[str, str] = field(default_factory=dict)


class Catalog(Protocol):
    def lookup(self, schema: str, table: str) -> Registered: ...

    def drop(self, schema: str, table: str, view: bool) -> None: ...

    def register_table(self, schema: str, table: str, path: str, new: bool,
                       docs: Docs) -> None:
        """The Delta table at `path` under the name (new: nothing is there yet), its docs
        written where they changed."""

    def register_view(self, schema: str, table: str, sql: str, columns: ViewColumns,
                      docs: Docs) -> None:
        """A view of `sql` (which names the catalog's relations) under the name, replacing
        the view there."""


def same_location(found: str, path: str) -> bool:
    """Whether a catalog's location is the path (metastores keep local folders as file:
    URIs)."""
    def strip(p: str) -> str:
        return p.removeprefix("file://").removeprefix("file:").rstrip("/")

    return strip(found) == strip(path)


def _text(value: str) -> str:
    return sql_literal(value, "string")


class SqlCatalog:
    """Spark SQL on the session's catalog: a Derby metastore, a Hive Metastore service, or a
    cluster's own; the table's docs are Delta's (COMMENT ON TABLE is a commit of the table)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def lookup(self, schema: str, table: str) -> Registered:
        if not self.spark.catalog.tableExists(f"{schema}.{table}"):
            return None
        kind = self.spark.catalog.getTable(f"{schema}.{table}").tableType
        rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {quoted(schema, table)}").collect()
        return kind, next((r.data_type for r in rows if r.col_name == "Location"), None)

    def drop(self, schema: str, table: str, view: bool) -> None:
        self.spark.sql(f"DROP {'VIEW' if view else 'TABLE'} {quoted(schema, table)}")

    def register_table(self, schema: str, table: str, path: str, new: bool,
                       docs: Docs) -> None:
        name = quoted(schema, table)
        self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        if new:
            self.spark.sql(f"CREATE TABLE {name} USING delta LOCATION {_text(path)}")
        if docs.comment and self.spark.catalog.getTable(
                f"{schema}.{table}").description != docs.comment:
            self.spark.sql(f"COMMENT ON TABLE {name} IS {_text(docs.comment)}")
        if docs.columns:
            current = {c.name: c.description
                       for c in self.spark.catalog.listColumns(f"{schema}.{table}")}
            for column, text in docs.columns.items():
                if column in current and current[column] != text:
                    self.spark.sql(f"ALTER TABLE {name} ALTER COLUMN {quote(column)} "
                                   f"COMMENT {_text(text)}")

    def register_view(self, schema: str, table: str, sql: str, columns: ViewColumns,
                      docs: Docs) -> None:
        self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        named = ""
        if docs.columns:  # Spark takes the columns from the query; named only to comment them
            named = " (" + ", ".join(
                quote(c) + (f" COMMENT {_text(docs.columns[c])}" if c in docs.columns else "")
                for c, _ in columns()) + ")"
        self.spark.sql(f"CREATE OR REPLACE VIEW {quoted(schema, table)}{named}"
                       + (f" COMMENT {_text(docs.comment)}" if docs.comment else "")
                       + f" AS {sql}")
