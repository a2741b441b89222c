"""What a streaming model keeps beside its checkpoint between builds: which reader of Delta
tables made it, whether a refresh is under way (so a killed refresh is finished, not appended
to), the state of its inputs when it last caught up, and for a once-only flow when it ran; and
how its query starts from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from ...core.locations import join
from ...core.nodes import CompiledNode
from ...engines.base import Engine
from ...storage.files import remove, write_text
from ..context import BuildContext
from ..state import DEFINITION_KEY, definition, inputs_fingerprint, read_json

# How a checkpoint reads Delta tables, recorded beside it: one of the commit-log stream
# (embedded) cannot be resumed by Delta's streaming source (delta-spark) or the other way round.
# Checkpoints without the record come from the embedded engine, until then the only one.
READER_FILE = "medallion_reader.json"
# A streaming model rebuilt from scratch (--full-refresh, an engine switch) gets a new
# checkpoint, and the new query's first batch replaces its table. The intent is recorded beside
# the checkpoint before the old one goes, and removed once that batch committed: a build killed
# anywhere in between leaves the record, and the next build finishes the refresh instead of
# appending every input again.
REFRESH_SUFFIX = ".refreshing"
# The state of a streaming model's inputs when its query last processed all of them.
CAUGHT_UP_FILE = "medallion_caught_up.json"
ONCE_FILE = "medallion_ran_once.json"  # a once-only flow's: when it finished


def definition_key(node: CompiledNode) -> str:
    """Where a commit says which definition wrote it: a flow's own key, beside its table's."""
    return DEFINITION_KEY + (f".{node.name}" if node.config.flow_into else "")


def refresh_due(ctx: BuildContext, node: CompiledNode) -> bool:
    """Whether this build starts the streaming model's query over (--full-refresh, or a
    refresh an earlier build did not finish)."""
    return ctx.full_refresh or read_json(
        ctx, ctx.project.checkpoint_path(node.file) + REFRESH_SUFFIX) is not None


def ran_once(ctx: BuildContext, node: CompiledNode) -> str | None:
    """When a once-only flow ran, if it did and no refresh is due."""
    if not node.config.once or refresh_due(ctx, node):
        return None
    done = read_json(ctx, join(ctx.project.checkpoint_path(node.file), ONCE_FILE))
    return str(done["finished_at"]) if done else None


def record_ran_once(ctx: BuildContext, node: CompiledNode) -> None:
    if node.config.once:
        write_text(ctx.engine, join(ctx.project.checkpoint_path(node.file), ONCE_FILE),
                              json.dumps({"finished_at": datetime.now(timezone.utc).strftime(
                                  "%Y-%m-%d %H:%M:%S UTC")}))


@dataclass(frozen=True)
class QueryStart:
    """How a streaming model's query starts."""

    replace_first: bool  # its first batch replaces the table (a refresh)
    definition: str  # the hash of its SQL and config, written with every batch
    changed: bool = False  # the definition differs from the one the table was last written with
    notes: tuple[str, ...] = ()  # what the build output should say


def _delta_reader(engine: Engine) -> str:
    return "delta-source" if engine.capabilities.delta_streaming_source else "commit-log"


def has_run(ctx: BuildContext, checkpoint: str) -> bool:
    """Whether a query has run from this checkpoint (Spark writes its metadata first)."""
    return read_json(ctx, join(checkpoint, "metadata")) is not None


def reader_changed(ctx: BuildContext, checkpoint: str) -> bool:
    """Whether the checkpoint was made by the other engine's reader of Delta tables."""
    recorded = read_json(ctx, join(checkpoint, READER_FILE))
    if recorded is None:
        if not has_run(ctx, checkpoint):
            return False  # no checkpoint yet
        recorded = {"reader": "commit-log"}
    return bool(recorded["reader"] != _delta_reader(ctx.engine))


def table_gone(ctx: BuildContext, node: CompiledNode, checkpoint: str) -> bool:
    """Whether a streaming model's table is missing (deleted by hand, or a warehouse restored
    without it) while its checkpoint says its inputs were read. A flow's table is its target's,
    which rebuilds it and restarts the flow (restart_readers)."""
    return (not node.config.flow_into and has_run(ctx, checkpoint)
            and not ctx.engine.table_exists(ctx.project.table_path(node.file)))


def restart_readers(ctx: BuildContext, node: CompiledNode) -> None:
    """A table rebuilt from nothing has versions its streaming readers' checkpoints do not
    know, and has lost the rows flows appended to it: each flow and streaming reader, and
    their own streaming readers, is marked to start over when it next runs (in this build,
    after it, or in a later one), as a --full-refresh of them all would."""
    def streaming_children(name: str) -> list[str]:
        return [child for child in ctx.graph.children.get(name, ())
                if ctx.graph.nodes[child].config.materialized == "streaming"]

    waiting = [n.name for n in ctx.graph.nodes.values() if n.config.flow_into == node.name]
    waiting += streaming_children(node.name)
    marked: set[str] = set()
    while waiting:
        name = waiting.pop()
        if name in marked:
            continue
        marked.add(name)
        checkpoint = ctx.project.checkpoint_path(ctx.graph.nodes[name].file)
        if has_run(ctx, checkpoint):  # not one never built
            write_text(ctx.engine, checkpoint + REFRESH_SUFFIX, json.dumps(
                {"reason": f"{node.name}'s table was rebuilt", "restart": True}))
        waiting += streaming_children(name)


def prepare_checkpoint(ctx: BuildContext, node: CompiledNode,
                       tables: dict[str, str]) -> QueryStart:
    """Decide whether the query starts over (and set its checkpoint up for that), and what has
    changed since its table was last written. tables: the Delta tables it streams."""
    checkpoint = ctx.project.checkpoint_path(node.file)
    notes, reason = [], None
    pending = read_json(ctx, checkpoint + REFRESH_SUFFIX)
    if ctx.full_refresh:
        reason = "--full-refresh"
    elif pending is not None:
        reason = pending.get("reason", "refresh")
        notes.append(f"recomputed from its inputs: {reason}" if pending.get("restart") else
                     f"finished a refresh ({reason}) that an earlier build did not complete")
    elif tables and reader_changed(ctx, checkpoint):
        reason = "engine switch"
        notes.append(f"recomputed from its inputs: its checkpoint was made by the other "
                     f"engine, whose reader of Delta tables the {ctx.engine.name} engine cannot "
                     "resume")
    elif table_gone(ctx, node, checkpoint):
        reason = "its table was missing"
        notes.append("rebuilt from its inputs: its table was gone, though its checkpoint had "
                     "read them (going on from the checkpoint would have left the rows before "
                     "it out)")
        restart_readers(ctx, node)
    if reason:
        write_text(ctx.engine, checkpoint + REFRESH_SUFFIX, json.dumps({"reason": reason}))
        remove(ctx.engine, checkpoint)
        notes += _downstream_note(ctx, node)
    if tables:
        write_text(ctx.engine, join(checkpoint, READER_FILE),
                              json.dumps({"reader": _delta_reader(ctx.engine)}))
    current = definition(node)
    path = ctx.project.table_path(node.file)
    written = (None if reason or not ctx.engine.table_exists(path)
               else ctx.engine.last_commit_value(path, definition_key(node)))
    changed = written is not None and written != current
    if changed:
        notes.append("its SQL or config changed since its table was last written: the change "
                     "applies only to rows that arrive from now on; to apply it to every row, "
                     f"run medallion build --full-refresh -s {node.name}+")
    # A flow never replaces the table it appends to: its refresh is the table's (graph.py
    # check_flow_refresh), whose own query replaced it before the flow runs again.
    return QueryStart(reason is not None and not node.config.flow_into, current, changed,
                      tuple(notes))


def caught_up(ctx: BuildContext, node: CompiledNode) -> tuple[bool, str | None]:
    """Whether a streaming model processed everything its inputs hold now, and the state of
    those inputs (with its definition) to record once it has. A query that ran to the end
    (available_now) on inputs in a recorded state has nothing new in them: starting it again
    would find no data, at the cost of a query start. Never when a refresh is due."""
    state = inputs_fingerprint(ctx, definition(node), node.refs, node.sources)
    checkpoint = ctx.project.checkpoint_path(node.file)
    if (state is None or refresh_due(ctx, node)
            or not ctx.engine.table_exists(ctx.project.table_path(node.file))):
        return False, state
    recorded = read_json(ctx, join(checkpoint, CAUGHT_UP_FILE))
    return (recorded is not None and recorded.get("state") == state
            and recorded.get("reader") == _delta_reader(ctx.engine)), state


def record_caught_up(ctx: BuildContext, node: CompiledNode, state: str | None) -> None:
    if state is not None:
        write_text(ctx.engine, join(ctx.project.checkpoint_path(node.file), CAUGHT_UP_FILE),
                              json.dumps({"state": state, "reader": _delta_reader(ctx.engine)}))


def mark_refreshes(ctx: BuildContext, nodes: list[CompiledNode]) -> None:
    """Before a --full-refresh runs anything: each streaming model it selects is to be
    refreshed, even if this build is killed before that model starts (the next build finishes
    the refresh; a reader of a refreshed table cannot go on from its old checkpoint)."""
    for node in nodes:
        if node.config.materialized == "streaming":
            write_text(ctx.engine, ctx.project.checkpoint_path(node.file) + REFRESH_SUFFIX,
                                  json.dumps({"reason": "--full-refresh"}))


def refresh_done(ctx: BuildContext, node: CompiledNode) -> None:
    """The refresh's first batch committed: the table is replaced."""
    remove(ctx.engine, ctx.project.checkpoint_path(node.file) + REFRESH_SUFFIX)


def _downstream_note(ctx: BuildContext, node: CompiledNode) -> list[str]:
    """Streaming models that read this one as a stream cannot read its replaced table as new
    rows: say which must start over too, unless this build (or a pending refresh) does."""
    readers = [child for child in ctx.graph.children.get(node.name, ())
               if ctx.graph.nodes[child].config.materialized == "streaming"
               and not (ctx.full_refresh and child in ctx.selected)
               and read_json(ctx, ctx.project.checkpoint_path(
                   ctx.graph.nodes[child].file) + REFRESH_SUFFIX) is None]
    if not readers:
        return []
    return [f"its table is replaced, so the streaming models that read it ({', '.join(readers)}) "
            f"must start over too: medallion build --full-refresh -s {' '.join(readers)} "
            f"(or select {node.name}+)"]

