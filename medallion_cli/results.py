"""Run artifacts under target/: compiled SQL per model and run_results.json."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from .project import Project
from .rendering import CompiledNode
from .runner import NodeResult


def write_compiled(project: Project, nodes: list[CompiledNode]) -> None:
    for node in nodes:
        if node.sql is not None:
            out = project.target_dir / "compiled" / node.file.rel_path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(node.shown_sql)


def write_manifest(project: Project, graph, tests) -> Path:
    """target/manifest.json: every model, seed, source and test with config, dependencies and
    rendered SQL, as this invocation saw them."""
    nodes = {}
    for name in graph.order:
        node = graph.nodes[name]
        materialized = node.config.materialized
        nodes[name] = {
            "kind": node.file.kind, "layer": node.file.layer, "path": node.file.rel_path,
            "description": node.file.description, "config": node.config.as_dict(),
            "depends_on": {"refs": list(node.refs),
                           "sources": [f"{s}.{t}" for s, t in node.sources]},
            "children": list(graph.children.get(name, ())),
            "compiled_sql": node.shown_sql,
            "table": None if materialized == "view" else project.table_path(node.file),
            "checkpoint": (project.checkpoint_path(node.file)
                           if materialized == "streaming" else None),
        }
    out = project.target_dir / "manifest.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "project": project.name, "target": project.target.name,
        "engine": project.target.engine, "warehouse": project.target.warehouse,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nodes": nodes,
        "sources": {f"{s.source}.{s.name}": {"format": s.format, "path": str(s.path),
                                             "schema": s.schema} for s in project.sources.values()},
        "tests": {name: {"depends_on": list(t.refs), "severity": t.severity, "origin": t.origin,
                         "key": t.key, "compiled_sql": t.shown_sql} for name, t in tests.items()},
    }, indent=2, default=str))
    return out


def write_run_results(project: Project, command: str, results: list[NodeResult],
                      started: float, spark_start_seconds: float | None = None) -> Path:
    out = project.target_dir / "run_results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": command,
        "target": project.target.name,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "elapsed_seconds": round(time.time() - started, 3),
        # of which starting Spark (the JVM, JARs): the rest is medallion's and the queries'
        "spark_start_seconds": None if spark_start_seconds is None else round(
            spark_start_seconds, 3),
        "results": [{k: v for k, v in asdict(r).items() if k != "detail"} for r in results],
    }, indent=2))
    return out
