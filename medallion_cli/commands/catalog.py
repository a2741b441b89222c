"""`medallion catalog prune`: the catalog entries a build in this warehouse registered whose
model or seed is gone from the project (removed, renamed, given another schema or alias), listed,
and dropped only when asked. A table's entry is external: dropping it leaves its files, which
stay readable by path.
"""

from __future__ import annotations

from ..engines import catalog_of
from ..engines.catalog import Entry
from ..load.relations import catalog_name
from .invocation import Invocation, engine_of, load


def catalog_prune(inv: Invocation, drop: bool) -> list[Entry]:
    """The warehouse's entries that name no node of the project (every node, whatever the
    selection), each dropped when `drop`."""
    loaded = load(inv)
    project = loaded.project
    catalog = catalog_of(engine_of(project, inv), project.target)
    # Hive keeps names in lower case; a flow's table is registered under the model it flows into
    names = {tuple(part.lower() for part in catalog_name(node))
             for node in loaded.graph.nodes.values() if not node.config.flow_into}
    left = [entry for entry in catalog.entries()
            if entry.of_warehouse(project.target.warehouse)
            and (entry.schema.lower(), entry.table.lower()) not in names]
    if drop:
        for entry in left:
            catalog.drop(entry.schema, entry.table, entry.view)
    return left
