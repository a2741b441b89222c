"""build --reset-flow: a streaming model's query started again from a point the user names
(--from-version, --from-timestamp, --from-earliest), its table kept as it is (rows, SCD2
history, remembered deletes), where --full-refresh would recompute the table from all its
inputs still hold: for an edit its checkpoint cannot follow (another input, another
aggregation), as a declarative pipeline's flow is started again with a startingVersion.

The first version of each Delta table the new query reads is resolved once and kept in its
checkpoint (START_FILE), read at every start of that query: a batch replayed after a kill, or
a first run that found nothing yet, reads from the same point, never from the table's start.
The intent is recorded beside the checkpoint before the old one goes, so a build killed in
between finishes the reset rather than starting the query from its inputs' beginning.
"""

from __future__ import annotations

import datetime as dt
import json
import re

from ...core.crash_points import crash_point
from ...core.errors import MedallionError
from ...core.locations import join
from ...core.nodes import CompiledNode
from ...core.project import Project
from ...dag.graph import Graph
from ...storage.files import remove, write_text
from ..context import BuildContext, FlowReset
from ..sources.inputs import streamed_refs
from ..state import read_json
from .checkpoints import refresh_due

RESET_SUFFIX = ".resetting"  # beside the checkpoint: a reset under way
START_FILE = "medallion_start.json"  # in it: {table: first version} of a reset's query


def reset_refusal(project: Project, graph: Graph, node: CompiledNode,
                  reset: FlowReset) -> MedallionError | None:
    """Why the model's flow cannot start from that point, known before Spark starts: a
    version or time of inputs that are not Delta tables, a version of several tables, or
    every input again into an append model (its rows twice)."""
    sources = [project.sources[key] for key in node.sources]
    tables = streamed_refs(graph, node) + list(node.change_refs) + [
        f"{s.source}.{s.name}" for s in sources if s.format == "delta"]
    others = [f"{s.source}.{s.name} ({s.format})" for s in sources if s.format != "delta"]
    asked = "--from-version" if reset.version is not None else "--from-timestamp"
    if others and (reset.version is not None or reset.timestamp):
        return MedallionError(
            f"{asked} names a point in the Delta tables a flow streams, but {node.name} reads "
            f"{', '.join(others)}", path=node.file.rel_path,
            hint="start it again with --from-earliest, or recompute it: medallion build "
                 f"--full-refresh -s {node.name}+")
    if reset.version is not None and len(tables) != 1:
        return MedallionError(
            f"--from-version is a version of one table, and {node.name} streams "
            f"{len(tables)} ({', '.join(tables)})", path=node.file.rel_path,
            hint="start it from a time of each (--from-timestamp) or from --from-earliest")
    if reset.version is None and not reset.timestamp and node.config.strategy != "merge":
        return MedallionError(
            f"--from-earliest reads {node.name}'s inputs again from their start, which an "
            "append model adds to its table a second time", path=node.file.rel_path,
            hint="start it after what its table holds (--from-version N, --from-timestamp "
                 f"T), or recompute it: medallion build --full-refresh -s {node.name}+")
    return None


def _asked(ctx: BuildContext, node: CompiledNode) -> bool:
    return (ctx.flow_reset is not None and node.name in ctx.selected
            and node.config.materialized == "streaming")


def reset_due(ctx: BuildContext, node: CompiledNode) -> bool:
    """Whether the model's query starts again from a named point in this build."""
    return _asked(ctx, node) or read_json(
        ctx, ctx.project.checkpoint_path(node.file) + RESET_SUFFIX) is not None


def reset_checkpoint(ctx: BuildContext, node: CompiledNode, tables: dict[str, str]) -> str | None:
    """A reset asked now, or left unfinished by a killed build: the old checkpoint replaced by
    one holding where the new query starts; returns what the build says (None: no reset).
    tables: relation -> the Delta tables the query streams."""
    checkpoint = ctx.project.checkpoint_path(node.file)
    record = checkpoint + RESET_SUFFIX
    pending = None if _asked(ctx, node) else read_json(ctx, record)
    if pending is None and not _asked(ctx, node):
        return None
    if refresh_due(ctx, node):  # a refresh an earlier build left unfinished recomputes it all
        remove(ctx.engine, record)
        return None
    if pending is None:
        reset = ctx.flow_reset
        assert reset is not None  # (_asked)
        # resolved before anything changes: a point past the table's leaves it all as it was
        versions = {} if reset.version is None and not reset.timestamp else {
            path: _first_version(ctx, node, relation, path, reset)
            for relation, path in tables.items()}
        pending = {"said": reset.said(), "versions": versions}
        write_text(ctx.engine, record, json.dumps(pending))
    remove(ctx.engine, checkpoint)
    crash_point(node.name, "reset", 0)
    write_text(ctx.engine, join(checkpoint, START_FILE), json.dumps(pending["versions"]))
    remove(ctx.engine, record)
    return f"its query started again from {pending['said']}, its table kept as it was"


def stream_starts(ctx: BuildContext, node: CompiledNode) -> dict[str, int]:
    """Each Delta table's first version for the model's query, if a reset started it."""
    return read_json(ctx, join(ctx.project.checkpoint_path(node.file), START_FILE)) or {}


def _first_version(ctx: BuildContext, node: CompiledNode, relation: str, path: str,
                   reset: FlowReset) -> int:
    """The version of the table at `path` the new query reads from: the one named, or the
    first committed at or after the time (the next one when none was)."""
    if reset.version is not None:
        latest = ctx.engine.table_version(path)
        if reset.version > latest + 1:
            raise MedallionError(f"--from-version {reset.version}: {relation}, which "
                                 f"{node.name} streams, has versions up to {latest}",
                                 path=node.file.rel_path,
                                 hint=f"name one up to {latest + 1} (the next commit)")
        return reset.version
    assert reset.timestamp is not None  # (no point at all reads no version)
    when = dt.datetime.fromisoformat(reset.timestamp)
    millis = (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp() * 1000
    history = sorted(ctx.engine.history(path), key=lambda commit: int(commit["version"]))
    return next((int(c["version"]) for c in history if int(c["timestamp"]) >= millis),
                int(history[-1]["version"]) + 1)  # after every commit: the next one


def inputs_changed(node: CompiledNode, said: str) -> MedallionError | None:
    """Spark refusing a checkpoint whose query read another number of inputs (an edit added or
    removed one), said with the two ways on: a reset keeping the table, or a full refresh."""
    found = re.search(r"There are \[(\d+)\] sources in the checkpoint offsets and now there are "
                      r"\[(\d+)\] sources requested by the query", said)
    if not found:
        return None
    return MedallionError(
        f"its stream cannot go on from its checkpoint, which read {found.group(1)} input(s), "
        f"while the edited model reads {found.group(2)}; nothing was written",
        path=node.file.rel_path,
        hint=f"start its query again, its table kept: medallion build -s {node.name} "
             "--reset-flow --from-timestamp T (T: its table's last commit, in medallion history "
             f"{node.name}; or --from-version N of its one input, or --from-earliest for a "
             "merge model); or recompute it: "
             f"medallion build --full-refresh -s {node.name}+")
