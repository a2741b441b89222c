"""Run artifacts under target/: compiled SQL per model and run_results.json."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError
from ..core.nodes import CompiledNode
from ..core.project import Project
from ..dag.graph import Graph
from ..dag.selection import checksum
from ..load.datatests import DataTest
from ..load.relations import spark_sql
from ..run.runner import NodeResult

if TYPE_CHECKING:  # (its module reads Delta logs: ls and compile do not load it)
    from .freshness import SourceFreshness


def write_compiled(project: Project, nodes: dict[str, CompiledNode],
                   chosen: list[CompiledNode]) -> dict[str, str]:
    """target/compiled/<model path>: each chosen model's SQL naming real relations (load/relations.py),
    ready to paste into spark-sql; returned by name."""
    compiled = spark_sql(project, nodes, chosen)
    for node in chosen:
        if node.name in compiled:
            out = project.target_dir / "compiled" / node.file.rel_path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(compiled[node.name])
    return compiled


def write_manifest(project: Project, graph: Graph, tests: dict[str, DataTest]) -> Path:
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
            "checksum": checksum(node),  # what state:modified compares
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


def read_state(folder: str | None) -> dict[str, Any] | None:
    """--state: the nodes of an earlier run's manifest.json in `folder` (as dbt's --state)."""
    if folder is None:
        return None
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        raise MedallionError(f"--state {folder}: no manifest.json there", path=str(path),
                             hint="pass the target/ folder of an earlier run (copy it aside "
                                  "first: every command writes a new target/manifest.json)")
    nodes: dict[str, Any] = json.loads(path.read_text())["nodes"]
    return nodes


def read_run_results(project: Project) -> dict[str, Any] | None:
    """The last build's, run's, seed's or test's target/run_results.json, if there is one."""
    path = project.target_dir / "run_results.json"
    return json.loads(path.read_text()) if path.is_file() else None


def write_run_results(project: Project, command: str, results: list[NodeResult],
                      started: float, spark_start_seconds: float | None = None,
                      event_range: tuple[str | None, str | None] | None = None) -> Path:
    """target/run_results.json; event_range: a backfill's (--start/--end), which `retry`
    takes again."""
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
        **({"event_range": list(event_range)} if event_range else {}),
        "results": [{k: v for k, v in asdict(r).items() if k != "detail"} for r in results],
    }, indent=2))
    return out


def write_sources(project: Project, checked: list[SourceFreshness]) -> Path:
    """target/sources.json: `medallion source freshness`'s findings, as dbt writes them."""
    out = project.target_dir / "sources.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target": project.target.name, "results": [c.as_json for c in checked]}, indent=2))
    return out


def read_sources(project: Project) -> dict[str, dict[str, Any]]:
    """The last `medallion source freshness` findings by source (source.table), if any."""
    path = project.target_dir / "sources.json"
    if not path.is_file():
        return {}
    return {r["source"]: {**r, "checked_at": json.loads(path.read_text())["generated_at"]}
            for r in json.loads(path.read_text())["results"]}
