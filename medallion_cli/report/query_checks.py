"""The static checks' rules over a model's SELECT once sqlglot has qualified its columns and
typed them (static_checks.py): what Spark's analyzer refuses that a schema alone shows, each
found the way Spark finds it:
- a column neither in `group by` nor aggregated (MISSING_AGGREGATION, MISSING_GROUP_BY);
- `union`, `intersect` or `except` of queries of different widths (NUM_COLUMNS_MISMATCH);
- a function Spark does not have (UNRESOLVED_ROUTINE), against spark_functions.txt;
- a comparison of types Spark cannot compare (DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES);
- an enforced contract's columns the SELECT does not give (names, and types where sure);
- a column a merge model's clauses name (when_matched, merge_update_columns, ...) that the
  SELECT does not give.
Each rule gives up where the SQL goes beyond what sqlglot knows (a function it does not know,
a type it cannot infer): a check that guesses would cry wolf.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Iterator

from sqlglot import exp

from ..core.errors import closest
from ..core.nodes import CompiledNode
from ..load.merge_clauses import named_columns

# (message, the name to find in the model's file, line, column in the rendered SQL)
Found = tuple[str, str, "int | None", "int | None"]
T = exp.DataType.Type
# Type families Spark compares within (a string with any primitive, cast implicitly), found
# by comparing each pair of types in Spark 4.1; maps compare with nothing.
FAMILIES = {
    **{t: "numeric" for t in exp.DataType.NUMERIC_TYPES},
    **{t: "string" for t in exp.DataType.TEXT_TYPES},
    **{t: "datetime" for t in exp.DataType.TEMPORAL_TYPES},
    T.BOOLEAN: "boolean", T.BINARY: "binary", T.VARBINARY: "binary", T.ARRAY: "array",
    T.STRUCT: "struct", T.MAP: "map", T.INTERVAL: "interval",
}
CAST_FROM_STRING = {"numeric", "datetime", "boolean", "binary"}
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
GROUPINGS = (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple, exp.Paren)


def query_findings(node: CompiledNode, tree: exp.Expr, in_scope: set[str]) -> list[Found]:
    """Every rule's findings on the qualified, typed tree of the node's SELECT (in_scope: the
    inputs' column names, for suggestions)."""
    return [*_unqualified(tree, in_scope), *_ungrouped(tree), *_union_widths(tree),
            *_unknown_functions(tree), *_incomparable(tree), *_contract(node, tree),
            *_merge_columns(node, tree)]


def mark_written(tree: exp.Expr) -> None:
    """Note which columns the model left unqualified, to show them as written once qualify
    has named their relations."""
    for column in tree.find_all(exp.Column):
        if not column.table:
            column.meta["unqualified"] = True


def _at(node: exp.Expr) -> tuple[int | None, int | None]:
    meta = (node.this.meta if isinstance(node, exp.Column) and isinstance(node.this, exp.Expr)
            else node.meta)
    return meta.get("line"), meta.get("col")


def _shown(node: exp.Expr) -> str:
    """The expression as the model wrote it: without the relations qualify added."""
    shown = node.copy()
    for column in [shown, *shown.find_all(exp.Column)]:
        if isinstance(column, exp.Column) and column.meta.get("unqualified"):
            column.set("table", None)
    return shown.sql("spark", identify=False)


def _unqualified(tree: exp.Expr, in_scope: set[str]) -> Iterator[Found]:
    """Columns qualify left without a relation (it does not resolve `having`): neither an
    input's column nor an alias of the SELECT, or the alias of a window function in `having`
    (Spark's UNRESOLVED_COLUMN); a window function in `having` (qualify puts the window
    an alias names there), which Spark computes after it."""
    for column in tree.find_all(exp.Column):
        select = column.parent_select
        if column.table or column.find_ancestor(exp.Lambda) or not isinstance(select,
                                                                              exp.Select):
            continue
        if column.name in select.named_selects:
            continue
        suggestion = closest(column.name, in_scope)
        yield (f"unknown column '{column.name}'" + (f"; {suggestion}" if suggestion else ""),
               column.name, *_at(column))
    for having in tree.find_all(exp.Having):
        window = having.find(exp.Window)
        if window is not None:
            select = having.parent_select
            alias = next((s.alias_or_name for s in select.expressions
                          if s.unalias() == window), None) if select else None
            yield (f"'{alias or _shown(window)}' is a window function's result, which Spark "
                   f"computes after having: filter on it in an outer query", "having", None,
                   None)


def _outside_aggregates(projection: exp.Expr, grouped: set[str]) -> Iterator[exp.Column]:
    """The columns of a projection no aggregate, window or grouped expression covers; none
    when it calls a function sqlglot does not know (it may be one of Spark's aggregates)."""
    if any(True for _ in projection.find_all(exp.Anonymous)):
        return
    stack = [projection]
    while stack:
        part = stack.pop()
        if _shown(part) in grouped or isinstance(
                part, (exp.AggFunc, exp.Window, exp.Subquery, exp.Lambda)):
            continue
        if isinstance(part, exp.Column):
            yield part
        stack.extend(part.iter_expressions())


def _grouped(group: exp.Group) -> set[str]:
    keys: set[str] = set()
    stack = list(group.expressions)
    while stack:
        key = stack.pop()
        if isinstance(key, GROUPINGS):
            stack.extend(key.expressions or [key.this])
        else:
            keys.add(_shown(key))
    return keys


def _ungrouped(tree: exp.Expr) -> Iterator[Found]:
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        if group is not None and (group.args.get("all") or not group.expressions):
            continue
        aggregated = any(isinstance(a.parent_select, exp.Select) and a.parent_select is select
                         and not a.find_ancestor(exp.Window)
                         for p in select.expressions for a in p.find_all(exp.AggFunc))
        if group is None and not aggregated:
            continue
        grouped = _grouped(group) if group is not None else set()
        for projection in select.expressions:
            for column in _outside_aggregates(projection, grouped):
                shown = _shown(column)
                yield ((f"column '{shown}' is neither in the group by nor aggregated; add it "
                        f"to the group by, or aggregate it (e.g. any_value({shown}))")
                       if group is not None else
                       (f"column '{shown}' is selected beside an aggregate with no group by; "
                        f"add group by {shown}, or aggregate it"),
                       column.name, *_at(column))
                break


def _union_widths(tree: exp.Expr) -> Iterator[Found]:
    for union in tree.find_all(exp.SetOperation):
        if union.args.get("by_name"):
            continue
        left, right = (union.left.named_selects, union.right.named_selects)
        if "*" in left or "*" in right or len(left) == len(right):
            continue
        kind = union.key
        yield (f"the two sides of this {kind} have {len(left)} and {len(right)} columns; "
               f"Spark's {kind} needs the same number on each side",
               kind, *_at(union.right))


@cache
def spark_functions() -> frozenset[str]:
    """Spark's own functions (`show system functions` on the installed Spark; a test checks the
    file against it)."""
    text = files(__package__).joinpath("spark_functions.txt").read_text()
    return frozenset(text.split())


def _unknown_functions(tree: exp.Expr) -> Iterator[Found]:
    known = spark_functions()
    for call in tree.find_all(exp.Anonymous):
        name = call.name.lower()
        # catalog.db.fn is the catalog's; /*+ REPARTITION(4) */ is a hint, not a call
        if name in known or isinstance(call.parent, exp.Dot) or call.find_ancestor(exp.Hint):
            continue
        suggestion = closest(name, known)
        yield (f"unknown function '{call.name}'" + (f"; {suggestion}" if suggestion else
                                                    "; Spark has no function of that name"),
               call.name, *_at(call))


def _type_name(node: exp.Expr) -> str:
    return node.type.sql("spark").lower() if node.type is not None else ""


def _family(node: exp.Expr) -> str | None:
    kind = node.type
    return FAMILIES.get(kind.this) if isinstance(kind, exp.DataType) else None


def _incomparable(tree: exp.Expr) -> Iterator[Found]:
    for comparison in tree.find_all(*COMPARISONS):
        left, right = comparison.left, comparison.right
        families = (_family(left), _family(right))
        if None in families or families[0] == families[1] != "map" or (
                "string" in families and not {*families} - {"string"} - CAST_FROM_STRING):
            continue
        types = [_type_name(side) for side in (left, right)]
        place = left if isinstance(left, exp.Column) else right
        yield (f"'{_shown(left)}' ({types[0]}) and '{_shown(right)}' ({types[1]}) cannot be "
               f"compared in Spark; convert one side to the other's type",
               place.name if isinstance(place, exp.Column) else _shown(left), *_at(place))


def _contract(node: CompiledNode, tree: exp.Expr) -> Iterator[Found]:
    """An enforced contract's columns against the SELECT's: names always; a type only where
    the SELECT takes it as it is or casts it (sqlglot's inferred types can be wider than
    Spark's)."""
    declared = {c.get("name"): c.get("data_type") or c.get("type") for c in node.file.columns}
    if not node.config.contract or not isinstance(tree, exp.Query) or not all(
            declared.values()) or "*" in tree.named_selects:
        return
    where = node.file.properties or node.file.rel_path
    given = {s.alias_or_name: s for s in tree.selects}
    for name, wanted in declared.items():
        if name not in given:
            suggestion = closest(str(name), given)
            yield (f"the contract in {where} declares column '{name}', which the SELECT does "
                   f"not give" + (f"; {suggestion}" if suggestion else ""), "select", None, None)
            continue
        selected = given[name].unalias()
        if not isinstance(selected, (exp.Column, exp.Cast)) or _family(selected) is None:
            continue
        want = exp.DataType.build(str(wanted), dialect="spark").sql("spark").lower()
        have = _type_name(selected)
        if want.replace(" ", "") != have.replace(" ", ""):
            value = selected.this if isinstance(selected, exp.Cast) else selected
            yield (f"column '{name}' is {have}, the contract in {where} says {want}; cast it: "
                   f"cast({_shown(value)} as {want})", str(name), *_at(selected))
    for name in given:
        if name not in declared:
            yield (f"column '{name}' is not in the contract in {where}; declare it there or "
                   f"leave it out of the SELECT", name, *_at(given[name]))


def _merge_columns(node: CompiledNode, tree: exp.Expr) -> Iterator[Found]:
    """The columns a merge model's clauses name against the SELECT's: the batch's rows and the
    table's are those."""
    given = tree.named_selects if isinstance(tree, exp.Query) else []
    if not given or "*" in given:
        return
    for key, written in named_columns(node.config):
        name = written.rpartition(".")[2]
        if name not in given:
            suggestion = closest(name, given)
            yield (f"{key} names column '{written}', which the SELECT does not give"
                   + (f"; {suggestion}" if suggestion else ""), written, None, None)
