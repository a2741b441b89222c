"""Each node's columns and where they come from: from the Delta tables already built (asked of
the engine: the embedded one reads the Delta log, no JVM), from sources' declared schemas, and
from each model's own SELECT, in DAG order; column-level lineage where sqlglot can resolve it.
Shown on the docs page and sent in OpenLineage's column lineage facet."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Collection

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.lineage import lineage
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from ..core.config import CHANGE_FEED_TYPES
from ..core.nodes import CompiledNode, changes_relation
from ..core.project import Project, SourceTable
from ..dag.graph import Graph
from ..materialize.context import IS_CURRENT, VALID_FROM, VALID_TO
from ..materialize.sources.read_columns import read_columns
from .query_checks import mark_written


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    lineage: list[str]  # `relation.column` it is computed from (a model's name, a source's relation)


def frozen(schema: dict[str, Any]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """A schema as a cache's key: an editor checks the project at each keystroke, and only
    what the edit reaches has other SQL or inputs."""
    return tuple((relation, tuple(columns.items())) for relation, columns in schema.items())


@dataclass(frozen=True)
class Analysis:
    """A model's SELECT qualified against its inputs' columns and typed, once per SQL and
    inputs for both the columns it gives and the static checks (read only: it is shared)."""
    tree: exp.Expr | None  # None when qualify refused it (error) or could not follow it
    error: str = ""  # qualify's complaint: a column no input has...
    partial: exp.Expr | None = None  # the tree as far as qualify got, to place its complaint

    @cached_property
    def columns(self) -> dict[str, str] | None:
        """The SELECT's columns and their types ("": not known); None when not known."""
        return _selected(self.tree, True) if isinstance(self.tree, exp.Query) else None


def analysed(sql: str, schema: dict[str, dict[str, str]]) -> Analysis:
    return _analysed(sql, frozen(typed(schema)))


@lru_cache(maxsize=4096)
def _analysed(sql: str, key: tuple[Any, ...]) -> Analysis:
    schema: dict[str, object] = {relation: dict(columns) for relation, columns in key}
    tree = None
    try:
        tree = sqlglot.parse_one(sql, read="spark")
        mark_written(tree)
        qualified = qualify(tree, schema=schema, dialect="spark", validate_qualify_columns=True,
                            quote_identifiers=False)
        return Analysis(annotate_types(qualified, schema=schema, dialect="spark"))
    except OptimizeError as exc:
        return Analysis(None, str(exc), tree)
    except Exception:  # noqa: BLE001 - SQL sqlglot cannot parse or follow is Spark's to judge
        return Analysis(None)


def _output_columns(sql: str, schema: dict[str, Any], derive_types: bool) -> dict[str, str]:
    """The SELECT's columns, with the types sqlglot infers when derive_types ("": not known):
    from its analysis, else (qualify refused it: a check's finding) qualified leniently."""
    known = analysed(sql, schema).columns if derive_types else None
    if known is not None:
        return dict(known)
    try:
        query = qualify(sqlglot.parse_one(sql, read="spark"), schema=schema, dialect="spark",
                        validate_qualify_columns=False)
        if derive_types:
            query = annotate_types(query, schema=schema, dialect="spark")
    except Exception:  # a query sqlglot cannot qualify still gets a page, without columns
        return {}
    return _selected(query, derive_types) if isinstance(query, exp.Query) else {}


def _selected(query: exp.Query, typed_columns: bool) -> dict[str, str]:
    if "*" in query.named_selects:
        return {}
    return {s.alias_or_name: "" if not typed_columns or s.type is None
            or s.type.this == exp.DataType.Type.UNKNOWN else s.type.sql("spark").lower()
            for s in query.selects}


def column_lineage(project: Project, node: CompiledNode, column: str,
                   schema: dict[str, dict[str, str]]) -> list[str]:
    """`relation.column` inputs of one of the node's columns (relation_columns' schema)."""
    return _lineage(column, node.sql, typed(inputs_of(project, node, schema))) if node.sql \
        else []


def _lineage(column: str, sql: str, schema: dict[str, Any]) -> list[str]:
    """`table.column` inputs of one output column, or [] where sqlglot cannot resolve it."""
    try:
        root = lineage(column, sql, schema=schema, dialect="spark")
    except Exception:
        return []
    found = []
    for node in root.walk():
        if not node.downstream and isinstance(node.source, exp.Table):
            found.append(f"{node.source.name}.{node.name.split('.')[-1]}")
    return sorted(set(found))


def _kept(node: CompiledNode, selected: dict[str, str]) -> dict[str, str]:
    """The columns a model's table keeps of its SELECT's: without except_columns, with SCD2's
    validity columns."""
    cfg = node.config
    kept = {c: kind for c, kind in selected.items() if c not in cfg.except_columns}
    if kept and cfg.scd_type == 2:
        kept.update({VALID_FROM: "timestamp", VALID_TO: "timestamp", IS_CURRENT: "boolean"})
    return kept


def _header(seed: Path) -> list[str]:
    """A seed's columns before it is built: its CSV's header."""
    with seed.open(newline="", encoding="utf-8-sig") as rows:
        return next(csv.reader(rows), [])


def source_columns(source: SourceTable,
                   table_columns: Callable[[str], dict[str, str] | None]) -> dict[str, str]:
    """A source table's columns and types as models read it: a Delta table's own, or what
    reading its declaration gives ({} where only a read can tell)."""
    if source.format == "delta":
        return table_columns(str(source.path)) or {}
    return read_columns(source) or {}


def node_columns(project: Project, graph: Graph,
                 table_columns: Callable[[str], dict[str, str] | None]) -> dict[str, list[Column]]:
    """Every node's columns, in DAG order, with their descriptions and lineage. table_columns
    gives a built table's columns and types (None when there is no table)."""
    schema = relation_columns(project, graph, table_columns)
    found = {}
    for name in graph.order:
        node = graph.nodes[name]
        known = typed(inputs_of(project, node, schema))
        documented = {c.get("name"): c.get("description", "") for c in node.file.columns}
        found[name] = [Column(c, kind, documented.get(c, ""),
                              _lineage(c, node.sql, known) if node.sql else [])
                       for c, kind in schema.get(name, {}).items()]
    return found


def relation_columns(project: Project, graph: Graph,
                     table_columns: Callable[[str], dict[str, str] | None],
                     derive_types: bool = False, rebuilt: Collection[str] = (),
                     needed: Collection[str] | None = None) -> dict[str, dict[str, str]]:
    """Each source's relation and each node with known columns -> its columns and types ("":
    not known), in DAG order. A model not built yet has the types sqlglot infers for its
    SELECT only when derive_types: right in kind (what the static checks compare) but not
    always in width (coalesce(int, 1) is a bigint to sqlglot), so not for the docs page.
    rebuilt: models whose SELECT's columns win over their table's (a build about to write
    them); needed: the nodes to derive (default: all)."""
    schema: dict[str, dict[str, str]] = {}
    for source in project.sources.values():
        cols = source_columns(source, table_columns)
        if cols:
            schema[source.relation] = cols
    for name in graph.order:
        if needed is not None and name not in needed:
            continue
        node = graph.nodes[name]
        if node.sql is None:  # a seed: its table, else (or rebuilt) its CSV's header
            header = {c: node.config.column_types.get(c, "") for c in _header(node.file.path)}
            columns = header if name in rebuilt else (
                table_columns(project.table_path(node.file)) or header)
        elif name in rebuilt:  # (its own table is `this`, which is_incremental() SQL reads)
            own = table_columns(project.table_path(node.file)) or {}
            columns = _derived(project, node, schema, derive_types, own) or own
        else:
            columns = table_columns(project.table_path(node.file)) or _derived(
                project, node, schema, derive_types)
        if columns:
            schema[name] = columns
    return schema


def _derived(project: Project, node: CompiledNode, schema: dict[str, dict[str, str]],
             derive_types: bool, own: dict[str, str] | None = None) -> dict[str, str]:
    assert node.sql is not None
    inputs = inputs_of(project, node, schema) | ({node.name: own} if own else {})
    return _kept(node, _output_columns(node.sql, typed(inputs), derive_types))


def inputs_of(project: Project, node: CompiledNode, schema: dict[str, dict[str, str]]
              ) -> dict[str, dict[str, str]]:
    """The columns of the relations the node reads (not all: sqlglot normalizes every
    relation it is given, at each call)."""
    read = [*node.refs, *(project.sources[key].relation for key in node.sources)]
    found = {relation: schema[relation] for relation in read if relation in schema}
    for name in node.change_refs:  # ref(name, changes=true): its rows with what changed
        if name in schema:
            found[changes_relation(name)] = {**schema[name], **CHANGE_FEED_TYPES}
    return found


def typed(schema: dict[str, dict[str, str]]) -> dict[str, object]:
    """The columns as sqlglot's optimizer takes them, with the types not known as such."""
    return {relation: {c: kind or "unknown" for c, kind in columns.items()}
            for relation, columns in schema.items()}
