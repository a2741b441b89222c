"""The one table of build strategies: what builds a node, chosen here and nowhere else, from
its kind, its materialization and its strategy.

Each strategy is a driver (`build`: batch.py's, by_groups/driver.py's, streaming/driver.py's)
and, for models that add rows to a table they keep, how those rows join it (`into`:
writing/writes.py's append_rows or merge_rows_into). A new strategy is its own module with a
`build(ctx, node, into) -> Outcome` (and, if it writes its own way, an `into`), and one line in
STRATEGIES.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from ..core.errors import MedallionError
from ..core.nodes import CompiledNode
from .batch import build_incremental, build_seed, build_table, build_view
from .by_groups.driver import build_by_groups
from .context import BuildContext, Outcome
from .ranges import build_range
from .streaming.driver import build_streaming
from .writing.writes import Into, append_rows, merge_rows_into

IntoT = TypeVar("IntoT", Into, None)  # a driver takes the `into` its strategy pairs it with


@dataclass(frozen=True)
class Strategy(Generic[IntoT]):
    name: str  # named in the error for a pair no row has
    build: Callable[[BuildContext, CompiledNode, IntoT], Outcome]
    into: IntoT  # None: the driver writes the table anew, or not at all (a view)

    def run(self, ctx: BuildContext, node: CompiledNode) -> Outcome:
        return self.build(ctx, node, self.into)


# (materialization, strategy) -> the strategy; a seed is ("seed", ""), a table kept per group
# ("table", "by_groups").
STRATEGIES: dict[tuple[str, str], Strategy[Into] | Strategy[None]] = {
    ("seed", ""): Strategy("seed", build_seed, None),
    ("view", ""): Strategy("view", build_view, None),
    ("table", ""): Strategy("table", build_table, None),
    ("table", "by_groups"): Strategy("table kept per group", build_by_groups, None),
    ("incremental", "append"): Strategy("incremental append", build_incremental, append_rows),
    ("incremental", "merge"): Strategy("incremental merge", build_incremental, merge_rows_into),
    ("streaming", "append"): Strategy("streaming append", build_streaming, append_rows),
    ("streaming", "merge"): Strategy("streaming merge", build_streaming, merge_rows_into),
}


def strategy_key(node: CompiledNode) -> tuple[str, str]:
    cfg = node.config
    if node.file.kind == "seed":
        return "seed", ""
    if cfg.materialized in ("incremental", "streaming"):
        return cfg.materialized, cfg.strategy
    return cfg.materialized, "by_groups" if cfg.incremental_by else ""


def strategy_for(node: CompiledNode) -> Strategy[Into] | Strategy[None]:
    key = strategy_key(node)
    if key not in STRATEGIES:  # the config's checks refuse these first (load/model_config.py)
        raise MedallionError(f"no build strategy for materialized='{key[0]}' with "
                             f"strategy='{key[1]}'", path=node.file.rel_path,
                             hint="strategies: " + ", ".join(s.name for s in STRATEGIES.values()))
    return STRATEGIES[key]


def build(ctx: BuildContext, node: CompiledNode) -> Outcome:
    """Build the node as its strategy does, or (build --start/--end) backfill a range of its
    table (ranges.py)."""
    if ctx.event_range is not None:
        return build_range(ctx, node)
    return strategy_for(node).run(ctx, node)
