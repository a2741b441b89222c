"""Table maintenance and time travel: optimize, vacuum, show, history, restore.

They work on the Delta tables of models and seeds (and `<model>_quarantine` tables) through the
engine; on the embedded engine they need only the Delta log, so no JVM starts.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..core.error_text import error_message
from ..core.errors import MedallionError, closest
from ..core.project import QUARANTINE_SUFFIX
from ..engines.base import Engine, Json
from ..materialize.clustering import check_clustering, check_layout_columns
from ..run.locking import warehouse_lock
from .invocation import Invocation, Loaded, engine_of, load, selected_nodes

if TYPE_CHECKING:
    import pyarrow as pa

MIN_RETENTION_HOURS = 168  # Delta's default: a week of versions stays readable


@dataclass(frozen=True)
class TableRef:
    name: str
    path: str  # a location: local path or object-store URI
    zorder_by: tuple[str, ...] = ()  # its model's, for optimize
    origin: str = ""  # the model's file
    cluster_by: tuple[str, ...] = ()  # its model's, for optimize


def parse_hours(text: str) -> float:
    """'168h', '7d', '90m' or a number of hours."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hdm]?)\s*", text)
    if not match:
        raise MedallionError(f"--retain {text!r} is not a duration", hint="e.g. 168h, 7d, 30m")
    value, unit = float(match.group(1)), match.group(2) or "h"
    return value * {"h": 1, "d": 24, "m": 1 / 60}[unit]


def table_of(loaded: Loaded, engine: Engine, name: str) -> TableRef:
    """The Delta table of a model, seed or quarantine, by name."""
    graph, project = loaded.graph, loaded.project
    base = name[:-len(QUARANTINE_SUFFIX)] if name.endswith(QUARANTINE_SUFFIX) else name
    if base not in graph.nodes:
        raise MedallionError(
            f"no model or seed named '{name}'. {closest(name, graph.nodes)}".strip(),
            hint="medallion ls lists them")
    node = graph.nodes[base]
    if node.config.materialized == "view":
        raise MedallionError(f"'{name}' is a view: it has no table", path=node.file.rel_path)
    path = project.quarantine_path(node.file) if base != name else project.table_path(node.file)
    if not engine.table_exists(path):
        raise MedallionError(f"'{name}' has no table yet (nothing at {path})",
                             hint=f"build it: medallion build -s {base}")
    return TableRef(name, path)


def _selected_tables(inv: Invocation) -> tuple[Loaded, Engine, list[TableRef]]:
    loaded = load(inv)
    engine = engine_of(loaded.project, inv)
    tables = []
    for name in selected_nodes(inv, loaded):
        node = loaded.graph.nodes[name]
        if node.config.materialized == "view":
            continue
        refs = (TableRef(name, loaded.project.table_path(node.file), node.config.zorder_by,
                         node.file.rel_path, node.config.cluster_by),
                TableRef(name + QUARANTINE_SUFFIX, loaded.project.quarantine_path(node.file)))
        tables += [t for t in refs if engine.table_exists(t.path)]
    return loaded, engine, tables


def optimize(inv: Invocation) -> list[tuple[str, dict[str, int]]]:
    """Compact each selected table's small files (streaming writes many)."""
    loaded, engine, tables = _selected_tables(inv)
    for t in tables:
        check_clustering(engine, t.cluster_by, t.origin)
        if t.zorder_by or t.cluster_by:
            check_layout_columns(engine.table_columns(t.path) or {}, f"table '{t.name}'",
                                 t.origin, zorder_by=t.zorder_by, cluster_by=t.cluster_by)
    with warehouse_lock(loaded.project.target.warehouse, "optimize"):
        return [(t.name, engine.optimize(t.path, t.zorder_by, t.cluster_by)) for t in tables]


def vacuum(inv: Invocation, retain: str, allow_short_retention: bool = False
           ) -> list[tuple[str, int]]:
    """Delete files older than the retention that no current version needs."""
    hours = parse_hours(retain)
    if hours < MIN_RETENTION_HOURS and not allow_short_retention:
        raise MedallionError(
            f"--retain {retain} is shorter than {MIN_RETENTION_HOURS}h: readers and streaming "
            "queries still on older versions would lose their files",
            hint="pass --allow-short-retention if nothing reads older versions")
    loaded, engine, tables = _selected_tables(inv)
    with warehouse_lock(loaded.project.target.warehouse, "vacuum"):
        return [(t.name, len(engine.vacuum(t.path, hours, enforce_retention=False)))
                for t in tables]


def _one_table(inv: Invocation, name: str) -> tuple[Loaded, Engine, TableRef]:
    loaded = load(inv)
    engine = engine_of(loaded.project, inv)
    return loaded, engine, table_of(loaded, engine, name)


@dataclass(frozen=True)
class Commit:
    version: int
    when: dt.datetime
    operation: str
    rows: dict[str, int]  # inserted / updated / deleted / written, as far as the commit says


# Row counts in commit metrics, as delta-rs and Delta Lake for Spark name them.
ROW_METRICS = {
    "inserted": ("num_target_rows_inserted", "numTargetRowsInserted"),
    "updated": ("num_target_rows_updated", "numTargetRowsUpdated"),
    "deleted": ("num_target_rows_deleted", "numTargetRowsDeleted", "num_deleted_rows",
                "numDeletedRows"),
    "written": ("num_added_rows", "numOutputRows"),
}


def describe_commit(commit: Json) -> Commit:
    metrics = commit.get("operationMetrics") or {}
    rows: dict[str, int] = {}
    for label, names in ROW_METRICS.items():
        found = next((metrics[n] for n in names if metrics.get(n) is not None), None)
        if found is not None:
            rows[label] = int(found)
    if "inserted" in rows:  # a MERGE: what it wrote is what it inserted and updated
        rows.pop("written", None)
    return Commit(commit["version"],
                  dt.datetime.fromtimestamp(commit["timestamp"] / 1000, dt.timezone.utc),
                  commit["operation"], rows)


def history(inv: Invocation, name: str, limit: int | None = None) -> list[Commit]:
    _, engine, table = _one_table(inv, name)
    return [describe_commit(c) for c in engine.history(table.path, limit)]


def _query(loaded: Loaded, engine: Engine, sql: str, refs: Sequence[str],
           sources: Sequence[tuple[str, str]], limit: int, what: str) -> pa.Table:
    """The first `limit` rows of Spark SQL over the project's tables (views computed)."""
    from ..materialize.context import BuildContext
    from ..materialize.rows import with_views
    from ..materialize.sources.inputs import register_relations

    ctx = BuildContext(loaded.project, loaded.graph, engine)
    try:
        register_relations(ctx, refs, sources, given=with_views(ctx, refs))
        return engine.spark.sql(sql).limit(limit).toArrow()
    except Exception as exc:
        raise MedallionError(f"cannot run {what}: {error_message(exc)}") from exc


def show_inline(inv: Invocation, text: str, limit: int = 20) -> pa.Table:
    """Rows of ad hoc SQL (Jinja: ref, source, macros, vars) over the project's tables."""
    from ..load.rendering import Renderer

    loaded = load(inv, with_engine=True)
    engine = loaded.engine
    assert engine is not None  # load(with_engine=True) made one
    renderer = Renderer(loaded.project, table_exists=engine.table_exists)
    sql, record = renderer.render_text(text, "--inline")
    return _query(loaded, engine, sql, record.refs, record.sources, limit,
                  "the --inline query")


def show_cte(inv: Invocation, name: str, cte: str, limit: int = 20) -> pa.Table:
    """The first rows of one CTE of a model's SQL, computed now over its inputs (as a full
    build would read them): the CTEs up to it, then `select * from` it."""
    import sqlglot
    from sqlglot import exp

    loaded = load(inv)
    node = loaded.graph.nodes.get(name)
    if node is None or node.sql is None:
        raise MedallionError(f"no model '{name}' with SQL to show a CTE of",
                             hint="medallion ls lists the models")
    query = sqlglot.parse_one(node.sql, read="spark")
    defined = query.ctes if isinstance(query, exp.Query) else []
    ctes = [c.alias_or_name for c in defined]
    if cte not in ctes:
        said = closest(cte, ctes) or (f"its CTEs: {', '.join(ctes)}" if ctes else "it has none")
        raise MedallionError(f"the model '{name}' has no CTE '{cte}'; {said}",
                             path=node.file.rel_path)
    sql = exp.select("*").from_(cte)
    for each in defined[:ctes.index(cte) + 1]:  # it and those before it, which it may read
        sql = sql.with_(each.alias_or_name, as_=each.this.copy())
    return _query(loaded, engine_of(loaded.project, inv), sql.sql("spark"), node.refs,
                  node.sources, limit, f"the CTE '{cte}' of '{name}'")


def show(inv: Invocation, name: str, limit: int = 20, as_of: str | None = None) -> pa.Table:
    """The table's rows now, or as of a version (a number) or a timestamp (ISO 8601); a view's
    rows are its SQL run now."""
    loaded = load(inv)
    node = loaded.graph.nodes.get(name)
    if node is not None and node.config.materialized == "view":
        if as_of is not None:
            raise MedallionError(f"'{name}' is a view: it has no versions to read as of",
                                 path=node.file.rel_path, hint="show it without --as-of")
        assert node.sql is not None  # a view is a model (seeds are tables)
        return _query(loaded, engine_of(loaded.project, inv), node.sql, node.refs, node.sources,
                      limit, f"the view '{name}'")
    engine = engine_of(loaded.project, inv)
    table = table_of(loaded, engine, name)
    target = int(as_of) if as_of is not None and as_of.isdigit() else as_of
    try:
        return engine.snapshot(table.path, target, limit)
    except MedallionError:
        raise
    except Exception as exc:
        raise MedallionError(f"cannot read '{name}' as of {as_of}: {error_message(exc)}",
                             hint="medallion history lists its versions and times") from exc


def restore(inv: Invocation, name: str, version: int) -> int:
    """Make an old version current again (as a new version); returns the new version."""
    loaded, engine, table = _one_table(inv, name)
    current = engine.table_version(table.path)
    if not 0 <= version <= current:
        raise MedallionError(f"'{name}' has versions 0 to {current}; there is no version {version}")
    with warehouse_lock(loaded.project.target.warehouse, "restore"):
        return engine.restore(table.path, version)
