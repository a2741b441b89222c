"""A merge model's MERGE clauses as written (`when_matched`, `when_not_matched_by_source`),
checked and made what NodeConfig holds, and their SQL made what both engines' MERGE read.

Both engines evaluate a clause's condition and values inside their MERGE: Spark's SQL on
delta-spark, delta-rs's DataFusion on the embedded engine. So a clause may use only what both
read alike (PORTABLE): columns of `s` (the batch's row) and `t` (the stored row), literals,
comparisons, and/or/not, is [not] null, in, between, like, ilike, arithmetic, coalesce,
lower, upper and abs. Anything else is refused at load, with the way out: compute it in the model's SELECT.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import sqlglot
from sqlglot import exp

from ..core.config import MergeClause, NodeConfig
from ..core.errors import ProjectError

CLAUSE_KEYS = ("condition", "then", "set")
# Each node kind a clause may use, as SQL both engines read, from its parts' SQL
BINARY: dict[type[exp.Expr], str] = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
          exp.NullSafeEQ: "IS NOT DISTINCT FROM", exp.And: "AND", exp.Or: "OR", exp.Add: "+",
          exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Like: "LIKE", exp.ILike: "ILIKE"}
FUNCTIONS: dict[type[exp.Expr], str] = {exp.Coalesce: "COALESCE", exp.Lower: "LOWER", exp.Upper: "UPPER", exp.Abs: "ABS"}
PORTABLE_TEXT = ("columns of s and t, literals, comparisons, and/or/not, is [not] null, in, "
                 "between, like, ilike, + - * /, coalesce, lower, upper, abs")
# A column's name as SQL on one side of the MERGE, by its side's alias ("s" or "t")
Sides = Callable[[str, str], str]


def clauses(raw: Any, key: str, origin: str) -> tuple[MergeClause, ...]:
    """when_matched / when_not_matched_by_source: a list of {condition, then, set}, in order."""
    if raw is None:
        return ()
    example = (f"e.g. {key}: [{{condition: \"s.status = 'cancelled'\", then: delete}}, "
               "{then: update}]")
    if not isinstance(raw, (list, tuple)) or not raw or not all(isinstance(c, dict) for c in raw):
        raise ProjectError(f"config '{key}' must be a list of clauses", path=origin, hint=example)
    sides = ("t",) if key == "when_not_matched_by_source" else ("s", "t")
    made = []
    for number, clause in enumerate(raw, 1):
        where = f"{key} clause {number}"
        unknown = set(clause) - set(CLAUSE_KEYS)
        then = clause.get("then")
        if unknown or then not in ("update", "delete"):
            raise ProjectError(f"{where} needs then: update or delete" + (
                f"; unknown: {', '.join(sorted(map(str, unknown)))}" if unknown else ""),
                path=origin, hint=example)
        assign = clause.get("set") or {}
        if not isinstance(assign, dict) or (assign and then != "update") or (
                sides == ("t",) and then == "update" and not assign):
            raise ProjectError(f"{where}: set maps columns to SQL values, and only an update "
                               "has one" + (", which needs it here: the batch has no row"
                                            if sides == ("t",) else ""),
                               path=origin, hint="e.g. {then: update, set: {active: 'false'}}")
        condition = clause.get("condition")
        if condition is not None and not (isinstance(condition, str) and condition.strip()):
            raise ProjectError(f"{where}: condition must be SQL", path=origin, hint=example)
        if condition is None and number < len(raw):
            raise ProjectError(f"{where} has no condition but is not the last: the clauses "
                               "after it could never apply", path=origin,
                               hint="give it a condition, or move it last")
        for sql in [condition or "true", *map(str, assign.values())]:
            checked(sql, sides, where, origin)
        made.append(MergeClause(then, condition, tuple((str(c), str(v))
                                                       for c, v in assign.items())))
    return tuple(made)


def checked(sql: str, sides: tuple[str, ...], where: str, origin: str) -> exp.Expr:
    """The clause's SQL parsed, refused unless both engines read it alike (PORTABLE_TEXT) and
    each column names its side."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise ProjectError(f"{where}: {sql!r} is not SQL ({str(exc).splitlines()[0]})",
                           path=origin) from exc
    for node in tree.walk():
        if isinstance(node, exp.Column) and node.table not in sides:
            raise ProjectError(
                f"{where}: column '{node.sql('spark')}' must name its row, as "
                + " or ".join(f"{side}.{node.name}" for side in sides), path=origin,
                hint="s is the batch's row, t the stored one" if len(sides) > 1 else
                "a stored row the batch lacks has only t, the stored row")
        if not isinstance(node, (exp.Column, exp.Identifier, exp.Literal, exp.Boolean,
                                 exp.Null, exp.Paren, exp.Not, exp.Is, exp.In, exp.Between,
                                 exp.Neg, *BINARY, *FUNCTIONS)):
            what = ("a subquery" if isinstance(node, exp.Query) else
                    _written_call(sql) if isinstance(node, exp.Func) else node.key)
            raise ProjectError(f"{where}: {sql!r} uses {what}, which both engines' MERGE do "
                               f"not read alike; a clause may use {PORTABLE_TEXT}",
                               path=origin, hint="compute it in the model's SELECT as a "
                               "column, and compare that column (except_columns keeps it "
                               "out of the table)")
    return tree


def named_columns(config: NodeConfig) -> Iterator[tuple[str, str]]:
    """Each column a merge model's clauses name, as written (`s.amount`, `note`), with the key
    that names it."""
    for key in ("merge_update_columns", "merge_exclude_columns"):
        yield from ((key, name) for name in getattr(config, key))
    for key in ("when_matched", "when_not_matched_by_source"):
        for clause in getattr(config, key):
            yield from ((key, name) for name, _ in clause.assign)
            for sql in [clause.condition or "true", *(value for _, value in clause.assign)]:
                yield from ((key, column.sql("spark"))
                            for column in sqlglot.parse_one(sql, read="spark").find_all(
                                exp.Column))


def _written_call(sql: str) -> str:
    """The first function a clause calls that is not portable, as written (sqlglot's own
    name may be another: date_sub is a ts_or_ds_add to it)."""
    portable_calls = {name.lower() for name in FUNCTIONS.values()} | {"in"}
    calls = re.findall(r"([A-Za-z_][A-Za-z0-9_.]*)\s*\(", sql)
    return next((f"{c}()" for c in calls if c.lower() not in portable_calls), "a function")


def portable(sql: str, side: Sides) -> str:
    """A checked clause's SQL as both engines read it, each column named by `side`."""
    return _text(sqlglot.parse_one(sql, read="spark"), side)


def _text(node: exp.Expr, side: Sides) -> str:
    if isinstance(node, exp.Column):
        return side(node.table, node.name)
    if isinstance(node, exp.Literal):
        text = str(node.this)
        return "'" + text.replace("'", "''") + "'" if node.is_string else text
    if isinstance(node, exp.Boolean):
        return "TRUE" if node.this else "FALSE"
    if isinstance(node, exp.Null):
        return "NULL"
    if isinstance(node, exp.Paren):
        return _text(node.this, side)
    if isinstance(node, exp.Neg):
        return f"(-{_text(node.this, side)})"
    if isinstance(node, exp.Not):
        return f"(NOT {_text(node.this, side)})"
    if isinstance(node, exp.Is):
        return f"({_text(node.this, side)} IS {_text(node.expression, side)})"
    if isinstance(node, exp.In):
        values = ", ".join(_text(v, side) for v in node.expressions)
        return f"({_text(node.this, side)} IN ({values}))"
    if isinstance(node, exp.Between):
        return (f"({_text(node.this, side)} BETWEEN {_text(node.args['low'], side)} AND "
                f"{_text(node.args['high'], side)})")
    if type(node) in FUNCTIONS:
        parts = [node.this, *node.expressions]
        return f"{FUNCTIONS[type(node)]}({', '.join(_text(p, side) for p in parts)})"
    return f"({_text(node.this, side)} {BINARY[type(node)]} {_text(node.expression, side)})"
