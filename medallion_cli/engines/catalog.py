"""Where a build names its tables (a target's metastore), as the few things the build asks of
a catalog: what is registered under a name, every entry, dropping one, registering a Delta table
at its path and a view over the catalog's names, with their docs.

Two catalogs (engines.catalog_of): a Hive Metastore service's Thrift API (thrift_catalog.py:
no JVM, on every engine, the only one for an engine whose Spark cannot name a Delta table), or
an engine's Spark's own (SqlCatalog, here: Spark SQL on a Derby metastore or the cluster's, where
the Spark has Delta's catalog: `Capabilities.catalog`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..load.relations import quoted
from .sql import quote, sql_literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A view's columns, (name, Spark SQL type), computed only for a catalog that keeps them
ViewColumns = Callable[[], list[tuple[str, str]]]
# The property of a view naming the warehouse whose build registered it (a table is known by its
# location), so that `medallion catalog prune` finds what a removed or renamed model left
OWNER = "medallion.warehouse"


@dataclass(frozen=True)
class Entry:
    """What a catalog has under a name."""

    schema: str
    table: str
    kind: str  # MANAGED, EXTERNAL or VIEW
    location: str | None = None  # a table's
    warehouse: str | None = None  # a view's OWNER property

    @property
    def view(self) -> bool:
        return self.kind == "VIEW"

    def of_warehouse(self, warehouse: str) -> bool:
        """Whether a build in the warehouse registered it: a table in its folder, a view
        naming it."""
        if self.view:
            return self.warehouse is not None and same_location(self.warehouse, warehouse)
        return self.location is not None and _plain(self.location).startswith(
            _plain(warehouse) + "/")


# What a catalog has under a name, or None
Registered = Entry | None


@dataclass(frozen=True)
class Docs:
    """persist_docs: the relation's description and its columns' ("" and {}: none)."""

    comment: str = ""
    columns: dict[str, str] = field(default_factory=dict)


class Catalog(Protocol):
    def lookup(self, schema: str, table: str) -> Registered: ...

    def entries(self) -> list[Entry]:
        """Every table and view, in every schema."""

    def drop(self, schema: str, table: str, view: bool) -> None: ...

    def register_table(self, schema: str, table: str, path: str, new: bool,
                       docs: Docs) -> None:
        """The Delta table at `path` under the name (new: nothing is there yet), its docs
        written where they changed."""

    def register_view(self, schema: str, table: str, sql: str, columns: ViewColumns,
                      docs: Docs, warehouse: str) -> None:
        """A view of `sql` (which names the catalog's relations) under the name, replacing
        the view there, its OWNER the warehouse."""


def _plain(location: str) -> str:
    """A location as a path or URI (metastores keep local folders as file: URIs)."""
    return location.removeprefix("file://").removeprefix("file:").rstrip("/")


def same_location(found: str, path: str) -> bool:
    return _plain(found) == _plain(path)


def _text(value: str) -> str:
    return sql_literal(value, "string")


class SqlCatalog:
    """Spark SQL on the session's catalog: a Derby metastore, a Hive Metastore service, or a
    cluster's own; the table's docs are Delta's (COMMENT ON TABLE is a commit of the table)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def lookup(self, schema: str, table: str) -> Registered:
        if not self.spark.catalog.databaseExists(schema):
            return None
        return next((e for e in self._listed(schema, table) if e.table == table.lower()), None)

    def entries(self) -> list[Entry]:
        return [entry for row in self.spark.sql("SHOW SCHEMAS").collect()
                for entry in self._listed(row[0], "*")]

    def _listed(self, schema: str, pattern: str) -> list[Entry]:
        """The schema's entries whose names match, as the catalog keeps them: unlike DESCRIBE
        or listTables, SHOW TABLE EXTENDED reads no Delta log, so a table whose folder is gone
        is listed too (and can be dropped)."""
        found = []
        for row in self.spark.sql(f"SHOW TABLE EXTENDED IN {quote(schema)} "
                                  f"LIKE {_text(pattern)}").collect():
            if row.isTemporary:
                continue
            facts = dict(line.split(": ", 1) for line in row.information.splitlines()
                         if ": " in line)
            kind = facts.get("Type", "")
            owner = None
            if kind == "VIEW":
                owner = next((p.value for p in self.spark.sql(
                    f"SHOW TBLPROPERTIES {quoted(schema, row.tableName)}").collect()
                    if p.key == OWNER), None)
            found.append(Entry(row.namespace, row.tableName, kind, facts.get("Location"),
                               owner))
        return found

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
                      docs: Docs, warehouse: str) -> None:
        self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
        named = ""
        if docs.columns:  # Spark takes the columns from the query; named only to comment them
            named = " (" + ", ".join(
                quote(c) + (f" COMMENT {_text(docs.columns[c])}" if c in docs.columns else "")
                for c, _ in columns()) + ")"
        self.spark.sql(f"CREATE OR REPLACE VIEW {quoted(schema, table)}{named}"
                       + (f" COMMENT {_text(docs.comment)}" if docs.comment else "")
                       + f" TBLPROPERTIES ({_text(OWNER)} = {_text(warehouse)}) AS {sql}")
