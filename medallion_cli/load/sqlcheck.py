"""Checks on compiled SQL with sqlglot's Spark dialect: it parses, it is one query, and every
table that is a model or seed is reached through ref() (so the DAG knows about it)."""

from __future__ import annotations

import functools
from collections.abc import Collection

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..core.errors import ProjectError
from ..core.nodes import CompiledNode


@functools.lru_cache(maxsize=4096)
def statements(sql: str) -> tuple[exp.Expr, ...]:
    """The SQL's statements, parsed once per text: a load checks each model's, and the
    target lags look at them again (dag/lags.py). Read them; never change them."""
    return tuple(s for s in sqlglot.parse(sql, read="spark") if s is not None)


def check_model_sql(node: CompiledNode, node_names: Collection[str]) -> None:
    try:
        found = statements(node.sql or "")
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        raise ProjectError(f"SQL does not parse: {first.get('description', exc)}",
                           path=node.file.rel_path, line=first.get("line"),
                           hint=f"see the compiled SQL: medallion compile -s {node.name}") from exc
    except TokenError as exc:
        raise ProjectError(f"SQL does not parse: {exc}", path=node.file.rel_path) from exc
    if len(found) != 1 or not isinstance(found[0], exp.Query):
        raise ProjectError("a model must be exactly one SELECT query "
                           f"(found {len(found)} statement(s))", path=node.file.rel_path,
                           hint="remove trailing statements; the runner writes the table itself")
    query = found[0]
    cte_names = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        name = table.name
        if name in node_names and name not in (*node.refs, node.name) and name not in cte_names \
                and not table.db:
            raise ProjectError(
                f"table '{name}' is a model or seed but is not referenced with ref()",
                path=node.file.rel_path, line=table.this.meta.get("line"),
                hint=f"write {{{{ ref('{name}') }}}} so it is built first and tracked in the DAG")


def streaming_obstacle(query: exp.Expr) -> str:
    """What in a SELECT keeps it from running row by row on new rows only, as a stream
    appending or merging them ("" when nothing does): a result over all rows at once (an
    aggregate, a window, distinct, order by/limit, a set operation but union all)."""
    found = {
        "an aggregate": query.find(exp.Group) or next(
            (f for f in query.find_all(exp.AggFunc) if not isinstance(f.parent, exp.Window)),
            None),
        "a window function": query.find(exp.Window),
        "distinct": query.find(exp.Distinct),
        "order by": query.find(exp.Order),
        "limit": query.find(exp.Limit),
        "a set operation other than union all": next(
            (s for s in query.find_all(exp.SetOperation)
             if not isinstance(s, exp.Union) or s.args.get("distinct")), None),
    }
    shown = [what for what, node in found.items() if node is not None]
    return f"it computes over all rows at once ({', '.join(shown)})" if shown else ""
