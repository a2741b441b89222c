"""Compaction as a policy (`compaction`, on by default for a model with a target_lag): after a
build writes a table, and after each micro-batch of a stream, its small files are compacted
when a threshold is passed (small files, their bytes, the mean file size), at most once per
`min_interval`, and, for a model with a target lag, only while the last compaction of the
table took less than half of it: the other half is its refresh's, so compacting never makes
a refresh miss its lag. A compaction changes no data: readers downstream (streams included)
see no new rows in it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..core.config import CompactionPolicy, interval_seconds, size_text
from ..core.error_text import error_message
from ..core.errors import RunStopped
from ..core.nodes import CompiledNode
from ..engines.base import FileLayout
from .context import BuildContext


@dataclass
class Compacted:
    """What this process compacted of one table: when last, how long it took, how often."""

    at: float  # time.monotonic() at its end
    seconds: float
    count: int = 1  # compactions done (a failed one restarts the rate limit, uncounted)
    files_removed: int = 0


# table path -> its compactions in this process (a build's nodes, a watch's cycles)
COMPACTED: dict[str, Compacted] = {}
_LOCK = threading.Lock()


def threshold_passed(policy: CompactionPolicy, layout: FileLayout) -> str:
    """Which threshold the table's files pass, said for the build's output; "" for none."""
    if layout.small_files < 2:
        return ""  # one small file (or none) has nothing to be merged with
    if layout.small_files >= policy.min_small_files:
        return f"{layout.small_files} small files (at least {policy.min_small_files})"
    if policy.min_small_bytes and layout.small_bytes >= policy.min_small_bytes:
        return f"{size_text(layout.small_bytes)} in small files"
    if policy.min_mean_file_bytes and layout.mean_file_bytes < policy.min_mean_file_bytes:
        return f"mean file {size_text(layout.mean_file_bytes)}"
    return ""


def held_back(policy: CompactionPolicy, lag_seconds: float | None, last: Compacted | None,
              now: float) -> str:
    """Why a compaction the thresholds ask for waits (the rate limit, the lag); "" when not."""
    if last is None:
        return ""
    if now - last.at < policy.min_interval:
        return "compacted less than min_interval ago"
    if lag_seconds and last.seconds > lag_seconds / 2:
        return (f"its last compaction took {last.seconds:.1f} s, over half its target lag: "
                "it would make the refresh miss its lag")
    return ""


def compact_if_due(ctx: BuildContext, node: CompiledNode) -> str:
    """Compact the node's table when its policy says so; a note saying what was done."""
    policy = node.config.compaction
    path = ctx.project.table_path(node.file)
    if policy is None or not ctx.engine.table_exists(path):
        return ""
    lag = node.config.target_lag
    with _LOCK:
        last = COMPACTED.get(path)
    if held_back(policy, interval_seconds(lag) if lag else None, last, time.monotonic()):
        return ""  # before the file listing: on object storage, a read of the log
    why = threshold_passed(policy, ctx.engine.file_layout(path, policy.small_file_bytes))
    if not why:
        return ""
    began = time.monotonic()
    try:
        with ctx.phases.timing("compaction"):
            done = ctx.engine.optimize(path, node.config.zorder_by, node.config.cluster_by)
    except RunStopped:
        raise
    except Exception as exc:
        # The write it follows is committed: a compaction that fails (another flow's
        # compaction of the same files, a store that refused it) leaves the table as written.
        _attempted(path, began, None)
        return (f"not compacted ({error_message(exc)}): the table is as written; a write "
                "after min_interval tries again")
    _attempted(path, began, done["files_removed"])
    return f"compacted {done['files_removed']} files into {done['files_added']} ({why})"


def _attempted(path: str, began: float, files_removed: int | None) -> None:
    """Record a compaction of the table (None: one that failed, not counted as done): the
    rate limit starts from either."""
    ended = time.monotonic()
    with _LOCK:
        before = COMPACTED.get(path) or Compacted(ended, 0.0, count=0)
        COMPACTED[path] = Compacted(ended, ended - began,
                                    before.count + (files_removed is not None),
                                    before.files_removed + (files_removed or 0))

