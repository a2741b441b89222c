"""Liquid clustering of a node's table (`cluster_by`): refused before anything runs on an
engine that cannot keep it; set after the build when the table's clustering columns differ
(changing them rewrites nothing: `medallion optimize` clusters the rows by them). The checks
serve `medallion optimize` too; the layout columns are checked on a build's rows before they are
written (checks.py)."""

from __future__ import annotations

from collections.abc import Container

from ..core.errors import CapabilityError, ProjectError
from ..core.nodes import CompiledNode
from ..engines.base import Engine
from .context import BuildContext


def check_clustering(engine: Engine, cluster_by: tuple[str, ...], origin: str) -> None:
    if cluster_by and engine.capabilities.clustering:
        raise CapabilityError(engine.capabilities.clustering, path=origin,
                              hint="use a delta-spark target, or zorder_by (OPTIMIZE ZORDER "
                                   "BY, on both engines) instead of cluster_by")


def check_layout_columns(have: Container[str], what: str, origin: str, after: str = "",
                         **layouts: tuple[str, ...]) -> None:
    """Each layout key (zorder_by, cluster_by) names only columns in `have` (of `what`: a
    table, or the rows a build is about to write)."""
    for key, columns in layouts.items():
        missing = [c for c in columns if c not in have]
        if missing:
            raise ProjectError(f"{key} names {', '.join(missing)}, which {what} does not "
                               f"have{after}", path=origin,
                               hint="name columns the model returns")


def cluster_table(ctx: BuildContext, node: CompiledNode) -> str:
    """Give the built table its clustering columns; a note when they changed."""
    path = ctx.project.table_path(node.file)
    columns = node.config.cluster_by
    if not columns or not ctx.engine.table_exists(path):
        return ""
    # The rows were checked before writing; a column CDC options keep out of the table was not
    check_layout_columns(ctx.engine.table_columns(path) or {}, f"table '{node.name}'",
                         node.file.rel_path, " (its rows are written)", cluster_by=columns)
    return f"clustered by {', '.join(columns)}" if ctx.engine.cluster(path, columns) else ""
