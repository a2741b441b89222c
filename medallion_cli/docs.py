"""`medallion docs`: one static HTML page describing the project.

The page shows the DAG by layer, and for each model its SQL, config, columns, tests, upstream and
downstream, column-level lineage where sqlglot can resolve it (columns.py), and its freshness
and last runs from the event log (status.py).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from .columns import node_columns
from .datatests import DataTest
from .graph import Graph
from .project import Project
from .rendering import CompiledNode
from .status import table_status

PAGE = Path(__file__).resolve().parent / "docs_page.html"


def describe(project: Project, graph: Graph, tests: dict[str, DataTest],
             table_columns: Callable[[str], dict[str, str] | None]) -> dict:
    """The page's data: every node with its SQL, config, columns, lineage, tests and edges,
    and each table's freshness and last runs from the event log. table_columns gives a built
    table's columns and types (None when there is no table)."""
    statuses = {s.name: s.as_json for s in table_status(project, graph, list(graph.order))}
    columns = node_columns(project, graph, table_columns)
    nodes = []
    for name in graph.order:
        node: CompiledNode = graph.nodes[name]
        nodes.append({
            "name": name, "kind": node.file.kind, "layer": node.file.layer,
            "path": node.file.rel_path, "description": node.file.description,
            "materialized": node.config.materialized,
            "config": {k: v for k, v in node.config.as_dict().items() if v not in ((), {}, None)},
            "sql": node.shown_sql or "", "columns": [asdict(c) for c in columns[name]],
            "upstream": list(node.refs) + [f"{s}.{t}" for s, t in node.sources],
            "downstream": list(graph.children.get(name, ())),
            "tests": [t for t, test in tests.items() if name in test.refs],
            "status": statuses.get(name),
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
