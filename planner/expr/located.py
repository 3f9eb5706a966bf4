"""Where a node is in the statement, for errors and names: `node_position` (PostgreSQL's
1-based P field), `error_at` (a SqlError at a node), `function_name` (a call's name as
PostgreSQL spells it), `user_sql` (an expression as the user wrote its columns),
`copy_meta` (a rewritten node keeps the positions of the node it replaces).
Imports nothing else of planner.expr.
"""

from __future__ import annotations

import re

from sqlglot import exp

from planner.errors import SqlError


def node_position(node: exp.Expr | None) -> int | None:
    """1-based character offset of the first located token under `node` (None if unknown)."""
    if node is None:
        return None
    starts = [s for n in node.walk() if (s := n.meta_get("start")) is not None]
    return min(starts) + 1 if starts else None


def copy_meta(src: exp.Expr, dst: exp.Expr) -> None:
    """Give `dst` the parser's marks on `src` (positions, quoting) when it has any; sqlglot
    keeps them in `_meta`, allocated by the first read of `.meta`, so `src` gains none."""
    if src._meta:
        dst.meta.update(src.meta)


_FUNC_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\(|$)")


_FUNC_NAMES: dict[type, str] = {}


def function_name(node: exp.Func) -> str:
    """A function call's name as PostgreSQL spells it, lower case, for messages and output
    column names: sqlglot's class names are not SQL (TimeToStr is to_char, JSONArrayAgg is
    json_agg, CurrentVersion is version), so the name is read off the node rendered in
    PostgreSQL's dialect, once per node class, where it renders as a call `name(...)` or a
    bare keyword (CURRENT_USER); operators that sqlglot models as functions (AND, ~, ->,
    COLLATE) keep the class name."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    name = _FUNC_NAMES.get(type(node))
    if name is None:
        try:
            m = _FUNC_NAME.match(node.sql(dialect="postgres"))
        except Exception:  # noqa: BLE001 - a node the generator cannot render: its class name
            m = None
        name = _FUNC_NAMES[type(node)] = m.group(1).lower() if m else node.sql_name().lower()
    return name


_INTERNAL_COLUMN = re.compile(r'"([^"#]+)#\d+\.([^"]+)"')


def user_sql(node: exp.Expr) -> str:
    """`node` as SQL for a message, its column references as the user wrote them (`t.v`,
    not the binder's internal `"t#1.v"`: planner/binder gives every FROM item a numbered
    prefix)."""
    return _INTERNAL_COLUMN.sub(r"\1.\2", node.sql())


def error_at(message: str, sqlstate: str, node: exp.Expr | None) -> SqlError:
    return SqlError(message, sqlstate, node_position(node))
