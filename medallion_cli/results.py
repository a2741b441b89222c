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
            out.write_text(node.sql)


def write_run_results(project: Project, command: str, results: list[NodeResult],
                      started: float) -> Path:
    out = project.target_dir / "run_results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": command,
        "target": project.target.name,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "elapsed_seconds": round(time.time() - started, 3),
        "results": [{k: v for k, v in asdict(r).items() if k != "detail"} for r in results],
    }, indent=2))
    return out


def summary(results: list[NodeResult]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    order = ("success", "up_to_date", "warn", "error", "skipped")
    return "Done. " + ", ".join(f"{counts.get(s, 0)} {s.replace('_', ' ')}" for s in order)
