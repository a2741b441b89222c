"""`medallion docs`: one static HTML page describing the project.

The page shows the DAG by layer, and for each model its SQL, config, columns, tests, upstream and
downstream, column-level lineage where sqlglot can resolve it (columns.py), followed hop by hop
back to the sources, and its freshness and last runs from the event log (status.py). Each
source has a page too: format, location, schema, freshness limits and last check, tests.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from ..core.nodes import CompiledNode
from ..core.project import Project, SourceTable
from ..dag.graph import Graph
from ..load.datatests import DataTest
from ..load.relations import spark_sql
from .artifacts import read_sources
from .columns import node_columns, source_columns
from .status import table_status

PAGE = Path(__file__).resolve().parent / "docs_page.html"


def describe(project: Project, graph: Graph, tests: dict[str, DataTest],
             table_columns: Callable[[str], dict[str, str] | None]) -> dict[str, Any]:
    """The page's data: every node with its SQL, config, columns, lineage, tests and edges,
    and each table's freshness and last runs from the event log. table_columns gives a built
    table's columns and types (None when there is no table)."""
    statuses = {s.name: s.as_json for s in table_status(project, graph, list(graph.order))}
    columns = node_columns(project, graph, table_columns)
    shown = {s.relation: f"{s.source}.{s.name}" for s in project.sources.values()}

    def hops(lineage: list[str]) -> list[dict[str, Any]]:  # `relation.column` -> the node it is in
        return [{"node": shown.get(relation, relation), "column": column}
                for relation, _, column in (entry.partition(".") for entry in lineage)]

    sql = spark_sql(project, graph.nodes, list(graph.nodes.values()))  # as compile writes it
    nodes = []
    for name in graph.order:
        node: CompiledNode = graph.nodes[name]
        nodes.append({
            "name": name, "kind": node.file.kind, "layer": node.file.layer,
            "path": node.file.rel_path, "description": node.file.description,
            "materialized": node.config.materialized,
            "config": {k: v for k, v in node.config.as_dict().items() if v not in ((), {}, None)},
            "sql": sql.get(name, ""),
            "columns": [{**asdict(c), "lineage": hops(c.lineage)} for c in columns[name]],
            "upstream": list(node.refs) + [f"{s}.{t}" for s, t in node.sources],
            "downstream": list(graph.children.get(name, ())),
            "tests": [t for t, test in tests.items() if name in test.refs],
            "status": statuses.get(name),
        })
    checked = read_sources(project)
    return {"project": project.name, "nodes": nodes,
            "sources": [describe_source(s, graph, tests, table_columns, checked)
                        for s in project.sources.values()]}


def describe_source(source: SourceTable, graph: Graph, tests: dict[str, DataTest],
                    table_columns: Callable[[str], dict[str, str] | None],
                    checked: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A source's page: where and how it is read, its columns, freshness and tests."""
    name = f"{source.source}.{source.name}"
    documented = {c.get("name"): c.get("description", "") for c in source.columns}
    key = (source.source, source.name)
    return {
        "name": name, "relation": source.relation, "format": source.format,
        "path": str(source.path), "description": source.description, "origin": source.origin,
        "columns": [{"name": c, "type": t, "description": documented.get(c, "")}
                    for c, t in source_columns(source, table_columns).items()],
        "loaded_at_field": source.loaded_at_field, "freshness": source.freshness,
        "last_check": checked.get(name),
        "tests": [t for t, test in tests.items() if key in test.sources],
        "downstream": [n for n in graph.order if key in graph.nodes[n].sources],
    }


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
