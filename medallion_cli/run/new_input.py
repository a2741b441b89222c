"""How much landing data a build is about to read that its tables have not taken in yet: a
measure of the work ahead, known from file sizes and times before Spark starts. The driver's
JIT is picked by it (spark/conf.py: driver_java_options)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ..core.locations import COMMIT_OR_CHECKPOINT, is_remote, local_files
from ..core.project import Project
from ..dag.graph import Graph


def new_landing_bytes(project: Project, graph: Graph, selected: Iterable[str],
                      full_refresh: bool) -> int:
    """Bytes of the landing files that the selected models read and have not taken in: all of
    a source's files for a model with no table yet (or on --full-refresh), else those changed
    since its table's last commit. Kafka and object stores count for nothing (not listed here),
    nor do views (a view's readers read the files)."""
    total = 0
    for name in selected:
        node = graph.nodes.get(name)
        if node is None or not node.sources or node.config.materialized == "view":
            continue
        table = project.table_path(node.file)
        if is_remote(table):
            continue
        since = None if full_refresh else _last_commit_time(Path(table))
        for key in node.sources:
            source = project.sources.get(key)
            if source is None or source.format == "kafka" or is_remote(source.path):
                continue
            total += sum(size for _, size, modified in local_files(source.path)
                         if since is None or modified > since)
    return total


def _last_commit_time(table: Path) -> int | None:
    log = table / "_delta_log"
    if not log.is_dir():
        return None
    times = [p.stat().st_mtime_ns for p in log.iterdir()
             if re.match(COMMIT_OR_CHECKPOINT, p.name)]
    return max(times, default=None)
