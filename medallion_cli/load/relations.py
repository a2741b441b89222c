"""Relations by their real names: what compiled SQL names so it can be pasted into spark-sql.

A build reads its inputs through temp views pinned to one version of each table (rendering.py's
`relation`); the SQL written to target/compiled names the tables themselves instead:
`<schema>.<alias>` where the target registers tables in a metastore (dbt's naming: by default
the layer and the model's name), else `delta.\\`<path>\\``. Views have no table: with a
metastore they are registered as catalog views; without one they keep their temp name.
Sources read by Spark SQL as they are (Delta and Parquet folders) are named by format and path;
file and Kafka sources need their reader options, which no SQL name carries.
"""

from __future__ import annotations

from ..core.nodes import CompiledNode
from ..core.project import Project
from .rendering import Renderer

PATH_NAMED_FORMATS = ("delta", "parquet")


def catalog_name(node: CompiledNode) -> tuple[str, str]:
    """(schema, table) of the node in the catalog."""
    return node.config.schema or node.file.layer, node.config.alias or node.name


def quoted(schema: str, table: str) -> str:
    return f"`{schema}`.`{table}`"


def real_relations(project: Project, nodes: dict[str, CompiledNode]) -> dict[str, str]:
    """relation key -> the name Spark SQL outside a build knows it by."""
    names = {}
    for name, node in nodes.items():
        if project.target.metastore:  # a flow's table is the one it flows into
            names[name] = quoted(*catalog_name(nodes.get(node.config.flow_into or "", node)))
        elif node.config.materialized != "view":
            names[name] = f"delta.`{project.table_path(node.file)}`"
    for source in project.sources.values():
        if source.format in PATH_NAMED_FORMATS:
            names[source.relation] = f"{source.format}.`{source.path}`"
    return names


def spark_sql(project: Project, nodes: dict[str, CompiledNode],
              chosen: list[CompiledNode]) -> dict[str, str]:
    """name -> the chosen models' SQL naming real relations (secrets masked); `nodes`: every
    node of the project, whose config decides its name."""
    # is_incremental() as the build's own rendering found it
    incremental = {project.table_path(n.file) for n in nodes.values() if n.is_incremental}
    renderer = Renderer(project, table_exists=incremental.__contains__,
                        relations=real_relations(project, nodes))
    return {node.name: renderer.render(node.file).shown_sql or "" for node in chosen
            if node.sql is not None}
