"""`medallion docs`: one static HTML page describing the project.

The page shows the DAG by layer, and for each model its SQL, config, columns, tests, upstream and
downstream, and column-level lineage where sqlglot can resolve it. Column names come from the
Delta tables already built (asked of the engine: the embedded one reads the Delta log, no JVM),
from sources' declared schemas, and from each model's own SELECT, in DAG order.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Callable

import sqlglot
from sqlglot import exp
from sqlglot.lineage import lineage
from sqlglot.optimizer.qualify import qualify

from .datatests import DataTest
from .graph import Graph
from .project import Project
from .rendering import CompiledNode

PAGE = Path(__file__).resolve().parent / "docs_page.html"


def _ddl_columns(ddl: str) -> dict[str, str]:
    schema = sqlglot.parse_one(f"create table t ({ddl})", read="spark").this
    return {c.name: c.args["kind"].sql("spark") for c in schema.expressions
            if isinstance(c, exp.ColumnDef)}


def _output_columns(sql: str, schema: dict) -> list[str]:
    try:
        query = qualify(sqlglot.parse_one(sql, read="spark"), schema=schema, dialect="spark",
                        validate_qualify_columns=False)
        names = query.named_selects
        return [] if "*" in names else names
    except Exception:  # a query sqlglot cannot qualify still gets a page, without columns
        return []


def _lineage(column: str, sql: str, schema: dict) -> list[str]:
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


def describe(project: Project, graph: Graph, tests: dict[str, DataTest],
             table_columns: Callable[[str], dict[str, str] | None]) -> dict:
    """The page's data: every node with its SQL, config, columns, lineage, tests and edges.
    table_columns gives a built table's columns and types (None when there is no table)."""
    schema: dict[str, dict[str, str]] = {}
    for source in project.sources.values():
        cols = (table_columns(str(source.path)) if source.format == "delta"
                else _ddl_columns(source.schema) if source.schema else None)
        if cols:
            extra = {} if source.format == "delta" else {"_corrupt_record": "string",
                                                         "_source_file": "string"}
            schema[source.relation] = {**cols, **extra}
    nodes = []
    for name in graph.order:
        node: CompiledNode = graph.nodes[name]
        built = table_columns(project.table_path(node.file))
        documented = {c.get("name"): c.get("description", "") for c in node.file.columns}
        if node.sql is not None:
            columns = list(built or {}) or _output_columns(node.sql, schema)
        else:
            columns = list(built or {})
        types = built or {c: "" for c in columns}
        if columns:
            schema[name] = {c: types.get(c) or "string" for c in columns}
        column_rows = [{"name": c, "type": types.get(c, ""), "description": documented.get(c, ""),
                        "lineage": _lineage(c, node.sql, schema) if node.sql else []}
                       for c in columns]
        nodes.append({
            "name": name, "kind": node.file.kind, "layer": node.file.layer,
            "path": node.file.rel_path, "description": node.file.description,
            "materialized": node.config.materialized,
            "config": {k: v for k, v in node.config.as_dict().items() if v not in ((), {}, None)},
            "sql": node.shown_sql or "", "columns": column_rows,
            "upstream": list(node.refs) + [f"{s}.{t}" for s, t in node.sources],
            "downstream": list(graph.children.get(name, ())),
            "tests": [t for t, test in tests.items() if name in test.refs],
        })
    return {"project": project.name, "nodes": nodes,
            "sources": [{"name": f"{s.source}.{s.name}", "relation": s.relation,
                         "format": s.format, "path": str(s.path)}
                        for s in project.sources.values()]}


def write_docs(project: Project, graph: Graph, tests: dict[str, DataTest],
               table_columns: Callable[[str], dict[str, str] | None],
               out: Path | None = None) -> Path:
    out = out or project.target_dir / "docs" / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(describe(project, graph, tests, table_columns),
                      default=str).replace("</", "<\\/")
    out.write_text(PAGE.read_text().replace("__TITLE__", html.escape(project.name))
                   .replace("__DATA__", data))
    return out
