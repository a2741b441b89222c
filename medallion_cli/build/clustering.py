"""Liquid clustering of a node's table (`cluster_by`): refused before anything runs on an
engine that cannot keep it; set after the build when the table's clustering columns differ
(changing them rewrites nothing: `medallion optimize` clusters the rows by them)."""

from __future__ import annotations

from ..errors import MedallionError
from ..rendering import CompiledNode
from .context import BuildContext


def check_clustering(ctx: BuildContext, node: CompiledNode) -> None:
    if node.config.cluster_by and ctx.engine.clustering_problem:
        raise MedallionError(ctx.engine.clustering_problem, path=node.file.rel_path,
                             hint="use a delta-spark target, or zorder_by (OPTIMIZE ZORDER BY, "
                                  "on both engines) instead of cluster_by")


def cluster_table(ctx: BuildContext, node: CompiledNode) -> str:
    """Give the built table its clustering columns; a note when they changed."""
    path = ctx.project.table_path(node.file)
    columns = node.config.cluster_by
    if not columns or not ctx.engine.table_exists(path):
        return ""
    missing = [c for c in columns if c not in (ctx.engine.table_columns(path) or {})]
    if missing:
        raise MedallionError(f"cluster_by names {', '.join(missing)}, which the table does not "
                             "have (its rows are written)", path=node.file.rel_path,
                             hint="name columns the model returns")
    return (f"clustered by {', '.join(columns)}" if ctx.engine.cluster(path, columns) else "")
