"""How a model's rows change the columns of the table they go into (on_schema_change):
- `fail` (the default): rows with a column the table lacks are refused before anything is
  written;
- `append_new_columns`: new columns (top level, or fields inside a struct) are added with the
  rows' commit; a column the rows no longer have stays, null in the new rows;
- `sync_all_columns`: as append_new_columns, and the table follows the rows in place: a column
  they no longer have is dropped, and a column whose type Delta can widen (int to bigint,
  float to double, a decimal's precision up) is widened. Another change of type is refused, in
  one line naming --full-refresh.
`renamed_columns: {old: new}` renames a column in place under any policy (SQL alone cannot tell
a rename from a drop and an add). Renames and drops use Delta's column mapping and widening its
type widening: commits of metadata alone, before the rows' commit (a failed write leaves the
table with its new columns and old rows; the next build writes the rows).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...core.errors import CapabilityError, WriteError
from ...core.nodes import CompiledNode
from ...engines.sql import ColumnChanges
from ..context import DELETE_COLUMN, BuildContext

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

# Delta's type widening (Delta 4): each type and the wider ones its values convert to losslessly
WIDER = {"tinyint": ("smallint", "int", "bigint", "double"),
         "smallint": ("int", "bigint", "double"), "int": ("bigint", "double"),
         "float": ("double",), "date": ("timestamp_ntz",)}
# the integer digits a decimal needs to hold each integral type
INTEGER_DIGITS = {"tinyint": 10, "smallint": 10, "int": 10, "bigint": 20}


def _decimal(kind: str) -> tuple[int, int] | None:
    found = re.fullmatch(r"decimal\((\d+),(\d+)\)", kind)
    return (int(found.group(1)), int(found.group(2))) if found else None


def widens(narrow: str, wide: str) -> bool:
    """Whether Delta's type widening changes a column of type `narrow` to `wide` in place."""
    if wide in WIDER.get(narrow, ()):
        return True
    to, since = _decimal(wide), _decimal(narrow)
    if to is None:
        return False
    if since is None and narrow in INTEGER_DIGITS:
        since = (INTEGER_DIGITS[narrow], 0)
    return since is not None and to[1] >= since[1] and to[0] - to[1] >= since[0] - since[1]


def column_changes(node: CompiledNode, rows: Mapping[str, str], table: Mapping[str, str]
                   ) -> tuple[list[str], ColumnChanges]:
    """(the columns the rows add, or whose struct fields they change, and what changes in
    place) for rows with these columns and types (as Spark names them; "": not known, not
    compared) going into a table with these; the policy's refusals raised here, before
    anything is written."""
    cfg = node.config
    renamed = tuple((old, new) for old, new in cfg.renamed_columns.items()
                    if old in table and new not in table and new in rows)
    names = dict(renamed)
    after = {names.get(column, column): kind for column, kind in table.items()}
    added = [c for c in rows if c not in after and c != DELETE_COLUMN]
    # a struct whose fields differ (Delta adds the new ones with the rows' commit)
    grown = [f"fields in {c}" for c, kind in rows.items() if kind and after.get(c, kind) != kind
             and "struct<" in kind + after[c]]
    if (added or grown) and cfg.on_schema_change == "fail":
        said = [f"new columns {', '.join(added)}"] if added else []
        raise WriteError(
            f"the model now returns {' and '.join(said + grown)} that its table lacks",
            path=node.file.rel_path,
            hint="set on_schema_change='append_new_columns' to add them (rows written before "
                 f"hold nulls), or rebuild it: medallion build --full-refresh -s {node.name}+")
    added += grown
    if cfg.on_schema_change != "sync_all_columns":
        return added, ColumnChanges(renamed=renamed)
    widened, refused = [], []
    for column, kind in rows.items():
        stored = after.get(column)
        if stored is None or stored == kind or "<" in stored + kind or kind in ("void", ""):
            continue  # (structs take new fields with the rows' commit; "": not known)
        if widens(stored, kind):
            widened.append((column, kind))
        elif not widens(kind, stored):  # (narrower rows fit the table as it is)
            refused.append(f"{column} from {stored} to {kind}")
    if refused:
        raise WriteError(
            f"the model now changes the type of {', '.join(refused)}, which Delta cannot do in "
            "place (it widens int to bigint, float to double, a decimal's precision up)",
            path=node.file.rel_path,
            hint=f"rebuild it: medallion build --full-refresh -s {node.name}+")
    return added, ColumnChanges(renamed=renamed, widened=tuple(widened), dropped=tuple(
        c for c in after if c not in rows))


def evolve_table(ctx: BuildContext, node: CompiledNode, rows: StructType, path: str) -> bool:
    """The table's columns changed in place for these rows, as the model's config says;
    returns whether the rows' commit adds columns (merge_schema)."""
    table = ctx.engine.table_columns(path)
    assert table is not None  # (rows are appended or merged into a table that exists)
    added, changes = column_changes(
        node, {f.name: f.dataType.simpleString() for f in rows.fields}, table)
    if changes:
        why = ctx.engine.capabilities.evolves_in_place
        if why is not None:
            raise CapabilityError(
                f"its rows need its table changed in place ({changes.said()}), and {why}",
                path=node.file.rel_path,
                hint="build it with a delta-spark target, or rebuild it: medallion build "
                     f"--full-refresh -s {node.name}+")
        ctx.engine.evolve_columns(path, changes)
    return bool(added)
