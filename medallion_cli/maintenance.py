"""Table maintenance and time travel: optimize, vacuum, show, history, restore.

They work on the Delta tables of models and seeds (and `<model>_quarantine` tables) through the
engine; on the embedded engine they need only the Delta log, so no JVM starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .engines import make_engine
from .errors import MedallionError, closest
from .project import QUARANTINE_SUFFIX
from .tasks import Invocation, Loaded, load, selected_nodes

MIN_RETENTION_HOURS = 168  # Delta's default: a week of versions stays readable


@dataclass(frozen=True)
class TableRef:
    name: str
    path: str  # a location: local path or object-store URI


def parse_hours(text: str) -> float:
    """'168h', '7d', '90m' or a number of hours."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hdm]?)\s*", text)
    if not match:
        raise MedallionError(f"--retain {text!r} is not a duration", hint="e.g. 168h, 7d, 30m")
    value, unit = float(match.group(1)), match.group(2) or "h"
    return value * {"h": 1, "d": 24, "m": 1 / 60}[unit]


def table_of(loaded: Loaded, name: str) -> TableRef:
    """The Delta table of a model, seed or quarantine, by name."""
    graph, project = loaded.graph, loaded.project
    base = name[:-len(QUARANTINE_SUFFIX)] if name.endswith(QUARANTINE_SUFFIX) else name
    if base not in graph.nodes:
        raise MedallionError(f"no model or seed named '{name}'. {closest(name, graph.nodes)}".strip(),
                             hint="medallion ls lists them")
    node = graph.nodes[base]
    if node.config.materialized == "view":
        raise MedallionError(f"'{name}' is a view: it has no table", path=node.file.rel_path)
    path = project.quarantine_path(node.file) if base != name else project.table_path(node.file)
    engine = make_engine(project.target)
    if not engine.table_exists(path):
        raise MedallionError(f"'{name}' has no table yet (nothing at {path})",
                             hint=f"build it: medallion build -s {base}")
    return TableRef(name, path)


def _selected_tables(inv: Invocation) -> tuple[Loaded, list[TableRef]]:
    loaded = load(inv)
    engine = make_engine(loaded.project.target)
    tables = []
    for name in selected_nodes(inv, loaded.graph, tests=loaded.tests):
        node = loaded.graph.nodes[name]
        if node.config.materialized == "view":
            continue
        refs = (TableRef(name, loaded.project.table_path(node.file)),
                TableRef(name + QUARANTINE_SUFFIX, loaded.project.quarantine_path(node.file)))
        tables += [t for t in refs if engine.table_exists(t.path)]
    return loaded, tables


def optimize(inv: Invocation) -> list[tuple[str, dict]]:
    """Compact each selected table's small files (streaming writes many)."""
    loaded, tables = _selected_tables(inv)
    engine = make_engine(loaded.project.target)
    return [(t.name, engine.optimize(t.path)) for t in tables]


def vacuum(inv: Invocation, retain: str, allow_short_retention: bool = False):
    """Delete files older than the retention that no current version needs."""
    hours = parse_hours(retain)
    if hours < MIN_RETENTION_HOURS and not allow_short_retention:
        raise MedallionError(
            f"--retain {retain} is shorter than {MIN_RETENTION_HOURS}h: readers and streaming "
            "queries still on older versions would lose their files",
            hint="pass --allow-short-retention if nothing reads older versions")
    loaded, tables = _selected_tables(inv)
    engine = make_engine(loaded.project.target)
    return [(t.name, len(engine.vacuum(t.path, hours, enforce_retention=False)))
            for t in tables]


def history(inv: Invocation, name: str, limit: int | None = None) -> list[dict]:
    loaded = load(inv)
    return make_engine(loaded.project.target).history(table_of(loaded, name).path, limit)


def show(inv: Invocation, name: str, limit: int = 20, as_of: str | None = None):
    """The table's rows now, or as of a version (a number) or a timestamp (ISO 8601)."""
    loaded = load(inv)
    target = int(as_of) if as_of is not None and as_of.isdigit() else as_of
    try:
        return make_engine(loaded.project.target).snapshot(table_of(loaded, name).path, target,
                                                           limit)
    except MedallionError:
        raise
    except Exception as exc:
        raise MedallionError(f"cannot read '{name}' as of {as_of}: {exc}",
                             hint="medallion history lists its versions and times") from exc


def restore(inv: Invocation, name: str, version: int) -> int:
    """Make an old version current again (as a new version); returns the new version."""
    loaded = load(inv)
    table = table_of(loaded, name)
    engine = make_engine(loaded.project.target)
    current = engine.table_version(table.path)
    if not 0 <= version <= current:
        raise MedallionError(f"'{name}' has versions 0 to {current}; there is no version {version}")
    return engine.restore(table.path, version)
