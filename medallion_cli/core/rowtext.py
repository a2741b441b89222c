"""Rows as plain text for the terminal: nulls as null, numbers as they are (a pandas frame
would print an integer column with a null as floats, and the null as NaN or NaT)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def _cell(value: object, width: int) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def rows_text(table: pa.Table, max_width: int = 40) -> str:
    """A pyarrow table as aligned columns under a header; numbers right-aligned."""
    import pyarrow.types as types

    if table.num_rows == 0:
        return "(no rows)"
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        cells = [_cell(v, max_width) for v in column.to_pylist()]
        width = max(len(name), *(len(c) for c in cells))
        numeric = types.is_integer(column.type) or types.is_floating(column.type) or \
            types.is_decimal(column.type)
        pad = str.rjust if numeric else str.ljust
        columns.append([pad(name, width)] + [pad(c, width) for c in cells])
    return "\n".join(" ".join(line).rstrip() for line in zip(*columns, strict=True))
