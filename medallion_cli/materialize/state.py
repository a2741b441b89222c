"""What a node keeps between builds, to know what changed since its table was written.

Batch nodes: a fingerprint of their SQL, config and every input's state, in each commit's
metadata (a build with the same fingerprint would write the same table: it is skipped).
Data tests: the same fingerprint of their SQL and inputs when they last passed, in
`<warehouse>/_medallion/tests/` (a build skips a test that would pass again).
Every model: a hash of its SQL and config (its definition) in each commit, batch or
micro-batch (an edited streaming model is said to apply to new rows only; `medallion plan` says
what an edit does); what they keep beside their checkpoint is checkpoints.py's.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any

from ..core.locations import join
from ..core.nodes import CompiledNode
from ..storage.files import list_files, read_text, remove, write_text
from .context import BuildContext, Outcome, input_table

FINGERPRINT_KEY = "medallion.fingerprint"
DEFINITION_KEY = "medallion.definition"


def fingerprint(ctx: BuildContext, node: CompiledNode) -> str | None:
    """What a batch node's table depends on: its SQL (or seed file), its config, and the state of
    every input (Delta versions of tables, file listings of landing sources). A build whose
    fingerprint equals the one its table was written with would write the same table again.
    The SQL is the one that runs once the table exists: is_incremental() changes the text after
    the first build, not what the table holds."""
    content = node.incremental_sql if node.sql is not None else hashlib.sha256(
        node.file.path.read_bytes()).hexdigest()
    return inputs_fingerprint(ctx, content, node.refs, node.sources,
                              node.config.as_dict(defining=True))


def last_build(ctx: BuildContext, node: CompiledNode
               ) -> tuple[str, dict[str, str], Outcome | None]:
    """The node's table, the metadata its next commit records (the new fingerprint), and an
    up-to-date outcome when its inputs, SQL and config are unchanged since its table was
    written."""
    path = ctx.project.table_path(node.file)
    with ctx.phases.timing("fingerprint"):
        state = fingerprint(ctx, node)
        unchanged = (state is not None and not ctx.full_refresh and ctx.engine.table_exists(path)
                     and ctx.engine.last_commit_value(path, FINGERPRINT_KEY) == state)
    if unchanged:
        return path, {}, Outcome("up_to_date",
                                 message="inputs, SQL and config unchanged since the last build")
    # its definition too: what `medallion plan` compares an edited model with
    return path, {DEFINITION_KEY: definition(node), **({FINGERPRINT_KEY: state} if state
                                                       else {})}, None


def inputs_fingerprint(ctx: BuildContext, content: str | None, refs: tuple[str, ...],
                       sources: tuple[tuple[str, str], ...], config: object = None) -> str | None:
    """A hash of a query (its SQL, config) and the state of everything it reads: a model's
    table or a data test's verdict is the same while this is. None when it reads a Kafka topic,
    whose new messages nothing here can see without reading them."""
    if any(ctx.project.sources[key].format == "kafka" for key in sources):
        return None
    inputs: dict[str, Any] = {}
    for name in refs:
        parent = ctx.graph.nodes[name]
        path = input_table(ctx, name)
        if parent.config.materialized == "view":
            inputs[name] = fingerprint(ctx, parent)
            if inputs[name] is None:
                return None
        else:
            inputs[name] = ctx.engine.table_version(path) if ctx.engine.table_exists(path) \
                else None
            if name in ctx.deferred:  # another warehouse's table: its versions are not ours
                inputs[name] = [path, inputs[name]]
    for key in sources:
        source = ctx.project.sources[key]
        inputs[source.relation] = (ctx.engine.table_version(source.path) if source.format ==
                                   "delta" else list_files(ctx.engine, source.path))
    text = json.dumps({"content": content, "config": config, "inputs": inputs},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def test_record(ctx: BuildContext, name: str) -> str:
    """Where a data test's last verdict is recorded: beside the tables it checked."""
    return join(ctx.project.target.warehouse, "_medallion", "tests", f"{name}.json")


def verdict_on(ctx: BuildContext, name: str, state: str | None) -> dict[str, Any] | None:
    """The data test's last verdict when it was reached on inputs in this state, or None:
    {status: success or warn, at: when (UTC, ISO), failures, message}. The test would reach it
    again, so a build need not run it."""
    recorded = read_json(ctx, test_record(ctx, name)) if state else None
    # a record from before warnings were kept has no status: its test runs once more
    return recorded if recorded and recorded.get("state") == state and "status" in recorded \
        else None


def record_test(ctx: BuildContext, name: str, state: str | None, status: str,
                failures: int, message: str) -> None:
    """Keep a pass or a warning with the state of its inputs; forget it otherwise, so a test
    that failed runs again next time (it is what a user is fixing)."""
    location = test_record(ctx, name)
    if status in ("success", "warn") and state:
        write_text(ctx.engine, location, json.dumps({
            "state": state, "status": status, "failures": failures, "message": message,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
    else:
        remove(ctx.engine, location)


def rows_read(ctx: BuildContext, node: CompiledNode) -> int | None:
    """Rows in the Delta tables a batch model reads (through views too), from the tables' file
    statistics; None when it also reads landing files, whose rows are not counted anywhere."""
    total = 0
    for name in node.refs:
        parent = ctx.graph.nodes[name]
        rows = (rows_read(ctx, parent) if parent.config.materialized == "view"
                else ctx.engine.row_count(input_table(ctx, name)))
        if rows is None:
            return None
        total += rows
    for key in node.sources:
        source = ctx.project.sources[key]
        rows = ctx.engine.row_count(source.path) if source.format == "delta" else None
        if rows is None:
            return None
        total += rows
    return total


def definition(node: CompiledNode) -> str:
    """A model's SQL and config, hashed: written with every commit of its table."""
    text = json.dumps({"sql": node.incremental_sql, "config": node.config.as_dict(defining=True)},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_json(ctx: BuildContext, location: str) -> dict[str, Any] | None:
    try:
        recorded: dict[str, Any] = json.loads(read_text(ctx.engine, location))
        return recorded
    except FileNotFoundError:
        return None
