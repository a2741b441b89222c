"""What a build does with a model edited since its table was written, for `medallion plan`:
its SQL or config hashed as each commit records it (materialize/state.py definition), read
from the table's log with delta-rs (no JVM), and said per mode: what the next build
recomputes, and what a --full-refresh would (a stream goes on from its checkpoint; SCD2
history and remembered deletes come back only from inputs still there), and what an
incremental or streaming model's edit does to its table's columns (on_schema_change), by their
names as sqlglot derives them from its SELECT.
"""

from __future__ import annotations

from ..core.errors import WriteError
from ..core.nodes import CompiledNode
from ..core.project import Project
from ..dag.graph import Graph
from ..engines import engine_class
from ..materialize.state import definition
from ..materialize.streaming.checkpoints import definition_key
from ..materialize.writing.schema_changes import column_changes
from ..report.columns import relation_columns
from ..report.static_checks import built_columns


def recorded_definition(path: str, key: str) -> str | None:
    """The definition the table's last data-writing commit records (None: no table, or one
    written before definitions were recorded, or one this machine cannot read)."""
    from deltalake.exceptions import DeltaError, TableNotFoundError

    from ..engines.base import last_commit_value
    from ..engines.deltars import open_table

    try:
        return last_commit_value(open_table(path).history(10), key)
    except (TableNotFoundError, DeltaError, OSError):
        return None


def change_effect(project: Project, graph: Graph, node: CompiledNode) -> str:
    """What the next build does with the model's edit; "" when it has none (or no table)."""
    if node.config.materialized == "view":
        return ""  # a view's SQL runs when read: an edit holds at once
    written = recorded_definition(project.table_path(node.file), definition_key(node))
    if written is None or written == definition(node):
        return ""
    config, name = node.config, node.name
    refresh = f"medallion build --full-refresh -s {name}+"
    if config.materialized == "streaming":
        said = ("edited since its table was written: its stream goes on from its checkpoint, "
                "so the edit applies to rows arriving from now on, not to the rows written "
                f"before; `{refresh}` recomputes the table from its inputs still there (and "
                "restarts the streams that read it)")
    elif config.materialized == "incremental":
        said = ("edited since its table was written: its next build applies the edit to new "
                "rows only (is_incremental()), and an edit that adds columns is refused unless "
                f"on_schema_change allows it; `{refresh}` recomputes every row")
    elif config.incremental_by:
        return ("edited since its table was written: its next build recomputes every group "
                "(the groups kept are the old SQL's)")
    else:
        return "edited since its table was written: recomputed in full at its next build"
    said += columns_effect(project, graph, node)
    if config.scd_type == 2:
        said += ("; a full refresh rebuilds its SCD2 history from those inputs: versions whose "
                 "events are gone (landing files removed, Kafka past retention) are lost")
    elif config.delete_when or config.truncate_when:
        said += ("; a full refresh forgets its remembered deletes (tombstones): a late update "
                 "of a key deleted by an event no longer in the inputs comes back")
    return said


def columns_effect(project: Project, graph: Graph, node: CompiledNode) -> str:
    """"; its table's columns: ..." for an edit that changes them (by name: a type is compared
    when the build has the rows' own, sqlglot's being right in kind, not always in width)."""
    table = built_columns(project.table_path(node.file))
    derived = relation_columns(project, graph, built_columns, rebuilt=(node.name,), needed={
        node.name, *graph.ancestors(node.name)}).get(node.name)
    if not table or not derived:
        return ""
    try:
        added, changes = column_changes(node, dict.fromkeys(derived, ""), table)
    except WriteError as refused:
        return f"; its next build refuses it: {refused.message}"
    said = [f"adds {', '.join(added)} with its rows"] if added else []
    if changes:
        said.append(f"{changes.said()} in place (Delta's column mapping, no data file rewritten)")
        why = engine_class(project.target.engine).capabilities.evolves_in_place
        if why is not None:
            said.append(f"which {why}: its next build refuses it")
    return "; its table's columns: " + ", ".join(said) if said else ""
