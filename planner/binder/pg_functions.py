"""PostgreSQL functions in the binder: set-returning functions in FROM (constant arguments ->
a VALUES list) and in the SELECT list (a join with row numbers up to the longest series),
functions and reg* casts a catalog wrapper provides (`catalog.function(name)`, bound as
HostCalls), and the rewrites of PostgreSQL spellings before qualify (`pg_rewrites`).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import SqlglotError

from planner import logical as L
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import (
    ArrayType,
    cast,
    Const,
    HostCall,
    HostFunction,
    array_to_list,
    constant_scalar,
    constant_value,
    fold_constants,
    function_name,
    list_to_array,
    pg_name,
)
from planner.expr.located import copy_meta
from planner.logical import keycol
from planner.binder.common import (
    Scope,
    rebuild,
    type_name,
    need_runner,
    output_name,
    position,
)


# -- PostgreSQL compatibility helpers (see Binder.subplan and friends) -----------------------
_TS = pa.timestamp("us")

_SET_RETURNING = {"unnest", "generate_series", "generate_subscripts", "pg_partition_ancestors",
                  "_pg_expandarray"}

# sqlglot nodes for functions a catalog wrapper may provide
_CATALOG_FUNCTION_NODES: dict[type, str] = {
    exp.CurrentUser: "current_user", exp.SessionUser: "session_user",
    exp.CurrentSchema: "current_schema", exp.CurrentSchemas: "current_schemas",
    exp.CurrentDatabase: "current_database", exp.CurrentRole: "current_role",
    exp.CurrentVersion: "version",
}

_REG_TYPES = {"regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure"}


def _function_name(fn: exp.Expression) -> str:
    if isinstance(fn, (exp.Unnest, exp.Explode)):
        return "unnest"
    if isinstance(fn, exp.GenerateSeries):
        return "generate_series"
    return function_name(fn)


def is_srf(e: exp.Expression) -> bool:
    if isinstance(e, (exp.Explode, exp.GenerateSeries, exp.Unnest)):
        return True
    return isinstance(e, exp.Anonymous) and e.name.lower() in _SET_RETURNING


def _srf_args(call: exp.Expression) -> list[exp.Expression]:
    if isinstance(call, exp.GenerateSeries):
        return [call.args["start"], call.args["end"]] + (
            [call.args["step"]] if call.args.get("step") is not None else [])
    if isinstance(call, exp.Explode):
        return [call.this] + list(call.expressions)
    return list(call.expressions)


def _constant(e: exp.Expression) -> pa.Scalar | None:
    """The typed value of a constant (bound) expression, else None."""
    return constant_scalar(e)


def _epoch_us(e: exp.Expression) -> exp.Expression:
    """Microseconds since the epoch of a date / timestamp expression (exact: EXTRACT(EPOCH)
    is a decimal with six places)."""
    return exp.Mul(this=exp.Extract(this=exp.Var(this="EPOCH"), expression=e.copy()),
                   expression=exp.Literal.number(1_000_000))


def _srf_length(call: exp.Expression, step_us: int | None = None) -> exp.Expression:
    """The number of rows a set-returning call yields for one input row. `step_us`: the
    step, in microseconds, of a generate_series over dates / timestamps (its step an
    interval without months)."""
    name = _function_name(call)
    args = _srf_args(call)
    if name == "generate_series" and step_us is not None:
        span = exp.Sub(this=_epoch_us(args[1]), expression=_epoch_us(args[0]))
        return exp.Greatest(this=exp.Literal.number(0), expressions=[exp.Add(
            this=exp.Floor(this=exp.Div(this=exp.Paren(this=span),
                                        expression=exp.Literal.number(step_us))),
            expression=exp.Literal.number(1))])
    if name == "generate_series":
        step = args[2] if len(args) > 2 else exp.Literal.number(1)
        return exp.Greatest(this=exp.Literal.number(0), expressions=[exp.Add(
            this=exp.Div(this=exp.Sub(this=args[1].copy(), expression=args[0].copy()),
                         expression=step.copy()),
            expression=exp.Literal.number(1))])
    arr = args[0] if name in ("unnest", "generate_subscripts", "_pg_expandarray") else call
    return exp.Coalesce(this=exp.Anonymous(this="cardinality", expressions=[arr.copy()]),
                        expressions=[exp.Literal.number(0)])


def _srf_value(call: exp.Expression, row: exp.Column, field: str | None = None,
               step_us: int | None = None) -> exp.Expression:
    """The value of a set-returning call at row number `row` (1-based; NULL past its end);
    `field` picks a field of a record result; `step_us` as for _srf_length."""
    name = _function_name(call)
    args = _srf_args(call)
    within = exp.LTE(this=row.copy(), expression=_srf_length(call, step_us))
    if name == "_pg_expandarray":      # information_schema's (x, n) records (JDBC)
        x = exp.Bracket(this=exp.Paren(this=args[0].copy()), expressions=[row.copy()])
        n = row.copy()
        if field is not None:
            value = {"x": x, "n": n}.get(field.lower())
            if value is None:
                raise SqlError(f'column "{field}" not found in data type record', "42703")
        else:
            value = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("x"),
                                                           expression=x),
                                            exp.PropertyEQ(this=exp.to_identifier("n"),
                                                           expression=n)])
    elif name == "generate_series":
        step = args[2] if len(args) > 2 else exp.Literal.number(1)
        value = exp.Add(this=args[0].copy(), expression=exp.Mul(
            this=exp.Paren(this=exp.Sub(this=row.copy(), expression=exp.Literal.number(1))),
            expression=step.copy()))
    elif name == "generate_subscripts":
        value = row.copy()
    else:
        arr = args[0] if name == "unnest" else call
        value = exp.Bracket(this=exp.Paren(this=arr.copy()), expressions=[row.copy()])
    return exp.Case(ifs=[exp.If(this=within, true=value)])


def _nested_srfs(e: exp.Expression) -> list[exp.Expression]:
    """The set-returning calls inside expression `e` (not `e` itself), outside subqueries
    and outside other set-returning calls' arguments."""
    out = []
    def walk(node):
        for child in node.iter_expressions():
            if isinstance(child, (exp.Subquery, exp.Select)):
                continue
            if is_srf(child):
                out.append(child)
            else:
                walk(child)
    walk(e)
    return out


def _values_node(keys: list[str], arrays: list[pa.Array]) -> L.Node:
    """A VALUES list of constant columns (a zero-row list is one NULL row filtered out)."""
    n = len(arrays[0]) if arrays else 0
    if n == 0:
        row = [Const(this=pa.scalar(None, a.type)) for a in arrays]
        return L.Filter(L.Values(keys, [row]), Const(this=pa.scalar(False)))
    rows = [[Const(this=a[i]) for a in arrays] for i in range(n)]
    return L.Values(keys, rows)


def _reg_type(dt: exp.Expression | None) -> str | None:
    name = type_name(dt)
    return name if name in _REG_TYPES else None


def _array_reg_type(dt: exp.Expression | None) -> str | None:
    """`regtype` for the type `regtype[]` (any reg* type), else None."""
    if isinstance(dt, exp.DataType) and dt.this == exp.DataType.Type.ARRAY and \
            len(dt.expressions) == 1:
        return _reg_type(dt.expressions[0])
    return None


def _elementwise(name: str, fns: list[HostFunction]) -> HostFunction:
    """A function applying `fns` in turn to every element of a list value (NULL lists stay
    NULL); the reg* casts of arrays."""
    def call(values, n):
        (v,) = values
        if isinstance(v.type, ArrayType):
            v = array_to_list(v)
        scalar = isinstance(v, pa.Scalar)
        arr = pa.array([v.as_py()], v.type) if scalar else (
            v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v)
        if pa.types.is_null(arr.type):
            out = list_to_array(pa.nulls(len(arr), pa.list_(pa.string())))
            return out[0] if scalar else out
        flat = pc.list_flatten(arr)
        for f in fns:
            m = len(flat)
            flat = f.fn([flat], m)
            if isinstance(flat, pa.Scalar):           # a constant result: one per element
                flat = pa.array([flat.as_py()] * m, flat.type)
        lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        out = list_to_array(pa.ListArray.from_arrays(pa.array(offsets), flat,
                                                     mask=arr.is_null()))
        return out[0] if scalar else out
    return HostFunction(name, call)


def _is_text_type(dt: exp.Expression | None) -> bool:
    return type_name(dt) in ("text", "varchar", "name", "char", "bpchar", "nvarchar",
                              "nchar")


def _builtin_function(fn: exp.Expression) -> exp.Expression:
    """`f(...)` read as sqlglot reads it without a schema (after `pg_catalog.f(...)` left it
    an anonymous call): array_to_string -> exp.ArrayToString, ..."""
    if not isinstance(fn, exp.Anonymous):
        return fn
    from planner.dialect import KuduSQL
    build = KuduSQL.parser_class.FUNCTIONS.get(fn.name.upper())
    if build is None:
        return fn
    args = list(fn.expressions)
    try:
        try:
            new = build(args)
        except TypeError:
            new = build(args, KuduSQL())
    except (TypeError, ValueError, IndexError, KeyError, SqlglotError):
        return fn                    # a builder that rejects these arguments: keep the call
    copy_meta(fn, new)
    return new


def pg_rewrites(ast: exp.Expression) -> None:
    """PostgreSQL spellings the binder reads as their plain forms (in place):
    `pg_catalog.f(...)` -> `f(...)`, `x COLLATE c` -> `x`, a dollar-quoted string
    `$$...$$` -> the string literal it is, `x BETWEEN SYMMETRIC a AND b` -> `x BETWEEN a AND b
    OR x BETWEEN b AND a`, and functions in FROM get the
    column names PostgreSQL gives them (`unnest(a)` -> column `unnest`; `f(...) AS x` ->
    column `x`) so that qualify can resolve them."""
    for d in list(ast.find_all(exp.Dot)):
        if isinstance(d.this, exp.Identifier) and d.this.name.lower() in (
                "pg_catalog", "information_schema") and isinstance(d.expression, exp.Func):
            d.replace(_builtin_function(d.expression))
    for c in list(ast.find_all(exp.Collate)):
        c.replace(c.this)
    for b in list(ast.find_all(exp.Between)):
        if b.args.get("symmetric"):     # x BETWEEN SYMMETRIC a AND b: either order of bounds
            x, lo, hi = b.this, b.args["low"], b.args["high"]
            either = exp.Paren(this=exp.or_(
                exp.Between(this=x.copy(), low=lo.copy(), high=hi.copy()),
                exp.Between(this=x.copy(), low=hi.copy(), high=lo.copy())))
            copy_meta(b, either)
            b.replace(either)
    for r in list(ast.find_all(exp.RawString)):
        lit = exp.Literal.string(r.this)
        copy_meta(r, lit)
        r.replace(lit)
    for t in list(ast.find_all(exp.Table, exp.Unnest)):
        fn = t if isinstance(t, exp.Unnest) else t.this
        if not isinstance(fn, exp.Func) or (isinstance(fn, exp.Anonymous) and
                                            fn.name.lower() == "table_changes"):
            continue
        if isinstance(t, exp.Unnest) and not isinstance(t.parent, (exp.From, exp.Join)):
            continue
        if isinstance(t, exp.Table) and t.args.get("db") is not None:
            t.set("db", None)
        alias = t.args.get("alias")
        name = _function_name(fn)
        if alias is None:
            alias = exp.TableAlias(this=exp.to_identifier(name))
            t.set("alias", alias)
        if not alias.columns:
            width = len(fn.expressions) if isinstance(fn, exp.Unnest) else 1
            cols = [alias.name] if width == 1 else [f"column{i + 1}" for i in range(width)]
            if t.args.get("ordinality") or (isinstance(fn, exp.Unnest) and fn.args.get("offset")):
                cols.append("ordinality")
            alias.set("columns", [exp.to_identifier(c) for c in cols])


class PgFunctionBinding:
    """Set-returning functions and the functions and reg* casts a catalog provides.
    Mixed into planner.binder.Binder."""

    def table_function(self, src: exp.Table, fn: exp.Anonymous, scope: Scope) -> L.Node:
        args = fn.expressions
        if len(args) != 3:
            raise SqlError("table_changes(table, from, to) takes three arguments", "42883",
                           position(self.sql, src))
        name = self.constant(self.expr(args[0], Scope()))
        if not isinstance(name, str) or not self.catalog.has_table(name):
            raise SqlError(f'relation "{name}" does not exist', "42P01",
                           position(self.sql, args[0]))
        table = self.catalog.table(name)
        alias = src.alias or "table_changes"
        prefix = f"{alias}#{next(self._n)}"
        cols = [c.name for c in table.schema.columns] + ["is_deleted"]
        scope.add(alias, {c: f"{prefix}.{c}" for c in cols}, src, self.sql)
        return L.Scan(name, alias, prefix, cols[:-1],
                      changes=(self.expr(args[1], Scope()), self.expr(args[2], Scope())))

    def function_source(self, src: exp.Expression, scope: Scope) -> L.Node:
        """A function in FROM (`generate_series(1, 3) AS s(n)`, `unnest(array) [WITH
        ORDINALITY]`, a set-returning catalog function): its arguments must be constants
        (inside a SubPlan, outer references are); the rows become a VALUES list."""
        fn = src if isinstance(src, exp.Unnest) else src.this
        alias_node = src.args.get("alias")
        alias = alias_node.name if alias_node is not None and alias_node.name else \
            _function_name(fn)
        columns = [c.name for c in alias_node.columns] if alias_node is not None else []
        ordinality = bool(src.args.get("ordinality") or
                          (isinstance(fn, exp.Unnest) and fn.args.get("offset")))
        series = None if isinstance(fn, exp.Unnest) else self._series(fn)
        if series is not None:        # made at run time, a morsel at a time (no row cap)
            start, stop, step, typ = series
            k = next(self._n)
            width = 2 if ordinality else 1
            keys = [f"$fn{k}.{i}" for i in range(width)]
            names = columns + [f"column{i + 1}" for i in range(len(columns), width)]
            if width == 1 and not columns:
                names = [alias]
            return self._register_derived(L.Series(keys, start, stop, step, typ), alias,
                                          names[:width], keys, scope, src)
        rows_of = [self._function_rows(exp.Explode(this=arg)) for arg in fn.expressions] \
            if isinstance(fn, exp.Unnest) else [self._function_rows(fn)]
        n = max((len(r) for r in rows_of), default=0)
        arrays = [pa.concat_arrays([r, pa.nulls(n - len(r), r.type)]) if len(r) < n else r
                  for r in rows_of]
        if ordinality:
            arrays.append(pa.array(range(1, n + 1), pa.int64()))
        names = columns + [f"column{i + 1}" for i in range(len(columns), len(arrays))]
        if len(arrays) == 1 and not columns:
            names = [alias]
        k = next(self._n)
        keys = [f"$fn{k}.{i}" for i in range(len(arrays))]
        node = _values_node(keys, arrays)
        return self._register_derived(node, alias, names[:len(arrays)], keys, scope, src)

    def _series_args(self, call: exp.Expression) -> list[pa.Scalar]:
        out = []
        for e in _srf_args(call):
            s = _constant(self.expr(e, Scope()))
            if s is None:
                raise FeatureNotSupported(
                    "functions in FROM need constant arguments (LATERAL is not supported)",
                    position=position(self.sql, e))
            out.append(s)
        return out

    def _series(self, call: exp.Expression) -> tuple[int, int, int, pa.DataType] | None:
        """generate_series over integers, or over timestamps by a step without months:
        (start, stop, step, type) of the L.Series that makes its rows at run time (None:
        another function, or a series stepped by months, made by _function_rows)."""
        if _function_name(call) != "generate_series":
            return None
        args = self._series_args(call)
        if len(args) < 2:
            return None
        start, stop = args[0].as_py(), args[1].as_py()
        step = args[2].as_py() if len(args) > 2 else 1
        if start is None or stop is None or step is None:
            return 0, -1, 1, pa.int64()
        where = position(self.sql, call)
        if isinstance(start, (dt.date, dt.datetime)):
            if len(args) != 3 or not pa.types.is_interval(args[2].type):
                return None                     # _timestamp_series reports it
            if step.months:
                return None
            us = step.days * 86_400_000_000 + step.nanoseconds // 1000
            if us == 0:
                raise SqlError("step size cannot equal zero", "22023", where)
            lo, hi = (cast(a, _TS, call).value for a in args[:2])
            return lo, hi, us, _TS
        if not all(isinstance(v, int) for v in (start, stop, step)):
            return None
        if step == 0:
            raise SqlError("step size cannot equal zero", "22023", where)
        t = pa.int32() if all(a.type == pa.int32() for a in args) else pa.int64()
        return start, stop, step, t

    def _function_rows(self, call: exp.Expression) -> pa.Array:
        """The rows of one function call in FROM, as an Arrow array (its arguments must be
        constants)."""
        def const(e: exp.Expression) -> pa.Scalar:
            s = _constant(self.expr(e, Scope()))
            if s is None:
                raise FeatureNotSupported(
                    "functions in FROM need constant arguments (LATERAL is not supported)",
                    position=position(self.sql, e))
            return s
        name = _function_name(call)
        args = [const(a) for a in _srf_args(call)]
        if name == "generate_series":
            start, stop = args[0].as_py(), args[1].as_py()
            step = args[2].as_py() if len(args) > 2 else 1
            if start is None or stop is None or step is None:
                return pa.array([], pa.int64())
            if isinstance(start, (dt.date, dt.datetime)):
                return self._timestamp_series(args, call)
            if not all(isinstance(v, int) for v in (start, stop, step)):
                raise FeatureNotSupported("generate_series over non-integers is not supported",
                                          position=position(self.sql, call))
            if step == 0:
                raise SqlError("step size cannot equal zero", "22023",
                               position(self.sql, call))
            t = pa.int32() if all(a.type == pa.int32() for a in args) else pa.int64()
            return pa.array(range(start, stop + (1 if step > 0 else -1), step), t)
        if name in ("unnest", "generate_subscripts") or is_srf(call):
            value = args[0] if name in ("unnest", "generate_subscripts") else \
                const(call)
            if value.type == pa.null():
                return pa.array([], pa.string())
            if not isinstance(value.type, ArrayType):
                raise SqlError(f"function {name}({value.type}) does not exist", "42883",
                               position(self.sql, call))
            value = array_to_list(value)
            elems = value.values if value.is_valid else pa.array([], value.type.value_type)
            if name == "generate_subscripts":
                return pa.array(range(1, len(elems) + 1), pa.int32())
            return elems
        v = const(call)
        return pa.array([v.as_py()], v.type)

    def _timestamp_series(self, args: list[pa.Scalar], call: exp.Expression) -> pa.Array:
        """generate_series(start, stop, step interval) over dates / timestamps: start, then
        each previous value plus step (as PostgreSQL steps: Jan 31 + 1 month is Feb 29, then
        Mar 29) while not past stop. A date start gives timestamps, as in PostgreSQL. A
        Python step per row, for steps with months only (a step without months is an
        L.Series): such a series has at most one row per month of the timestamp range
        (~120,000), so the loop is bounded."""
        where = position(self.sql, call)
        if len(args) != 3 or not pa.types.is_interval(args[2].type):
            raise SqlError("function generate_series(" + ", ".join(
                pg_name(a.type) for a in args) + ") does not exist", "42883", where)
        start, stop = (cast(a, _TS, call).as_py() for a in args[:2])
        months, days, us = (lambda m: (m.months, m.days, m.nanoseconds // 1000))(
            args[2].as_py())
        span = (months * 30 + days) * 86_400_000_000 + us    # as PostgreSQL compares it
        if span == 0:
            raise SqlError("step size cannot equal zero", "22023", where)
        forward = span > 0
        out, cur = [], start
        while (cur <= stop) if forward else (cur >= stop):
            out.append(cur)
            y, m = divmod(cur.month - 1 + months, 12)
            try:
                day = min(cur.day, calendar.monthrange(cur.year + y, m + 1)[1])
                cur = cur.replace(year=cur.year + y, month=m + 1, day=day) + dt.timedelta(
                    days=days, microseconds=us)
            except (ValueError, OverflowError):    # past Python's year 9999
                break
        return pa.array(out, _TS)

    def set_returning_items(self, sel: exp.Select, node: L.Node, scope: Scope
                            ) -> tuple[exp.Select, L.Node]:
        """Set-returning functions in the SELECT list (unnest, generate_series,
        generate_subscripts, ...), also inside an item's expression
        (`generate_series(1, 3)::text`), run in lockstep as PostgreSQL 10+ does: the rows are
        joined with row numbers 1..n, n the longest result of any of them in that row."""
        sel = sel.copy()
        srfs = []
        for i, it in enumerate(sel.expressions):
            e, field = it.unalias(), None
            if isinstance(e, exp.Dot) and isinstance(e.this, exp.Paren) and \
                    is_srf(e.this.this):             # (_pg_expandarray(a)).n
                e, field = e.this.this, e.name
            if is_srf(e):
                srfs.append((i, e, field, True))
            else:
                srfs.extend((i, c, None, False) for c in _nested_srfs(e))
        if not srfs:
            return sel, node
        k = next(self._n)
        alias, key = f"$srf{k}", f"$srf{k}.i"
        scope.add(alias, {"i": key}, sel, self.sql)
        timed = [self._timed_series(call, scope) for _, call, _f, _t in srfs]
        lengths = [self.expr(_srf_length(call, us), scope) for call, us in timed]
        longest = lengths[0] if len(lengths) == 1 else exp.Greatest(
            this=lengths[0], expressions=lengths[1:])
        n = self._max_value(longest, node)
        series = L.Series([key], 1, n, 1, pa.int64())
        cond = exp.LTE(this=keycol(key), expression=longest)
        node = L.MultiJoin([node, series], [cond])
        renamed: dict[str, str] = {}
        row = exp.column("i", table=alias)
        for (i, call, field, top), (made, us) in zip(srfs, timed):
            item = sel.expressions[i]
            value = _srf_value(made, row, field, us)
            if not top:                      # inside the item: the item keeps its name
                named = isinstance(item, exp.Alias) and not re.fullmatch(r"_col_\d+",
                                                                         item.alias)
                name = output_name(item)
                call.replace(value)
                if not named:
                    if isinstance(item, exp.Alias):
                        renamed[item.alias] = name
                    item = sel.expressions[i]
                    item.replace(exp.alias_(item.unalias(), name))
                continue
            name = output_name(item) if isinstance(item, exp.Alias) and not re.fullmatch(
                r"_col_\d+", item.alias) else field or _function_name(call)
            if isinstance(item, exp.Alias):
                renamed[item.alias] = name
            item.replace(exp.alias_(value, name))
        order = sel.args.get("order")
        for col in list(order.find_all(exp.Column)) if order is not None else []:
            if not col.table and col.name in renamed:   # ORDER BY <qualify's _col_n alias>
                col.replace(exp.column(renamed[col.name]))
        return sel, node

    def _timed_series(self, call: exp.Expression, scope: Scope
                      ) -> tuple[exp.Expression, int | None]:
        """A generate_series over dates / timestamps in the SELECT list: (call, its step in
        microseconds) for a constant step without months; a step of months with constant
        arguments becomes unnest(ARRAY[...]) of the series PostgreSQL's stepping gives
        (Jan 31, Feb 29, Mar 29: see _timestamp_series), a NULL step an empty one;
        anything else (call, None)."""
        args = _srf_args(call)
        if _function_name(call) != "generate_series" or len(args) != 3:
            return call, None
        step = _constant(self.expr(args[2], scope))
        if step is None or not pa.types.is_interval(step.type):
            return call, None
        where = position(self.sql, call)
        v = step.as_py()
        if v is not None and not v.months:
            us = v.days * 86_400_000_000 + v.nanoseconds // 1000
            if us == 0:
                raise SqlError("step size cannot equal zero", "22023", where)
            return call, us
        consts = [_constant(self.expr(a, scope)) for a in args]
        if any(c is None for c in consts) and v is not None:
            raise FeatureNotSupported(
                "generate_series over timestamps by a step of months needs constant "
                "arguments in the SELECT list (call it in FROM)", position=where)
        if v is None or consts[0].as_py() is None or consts[1].as_py() is None:
            values = pa.array([], _TS)        # strict: a NULL argument gives no rows
        else:
            values = self._timestamp_series(consts, call)
        ts = exp.DataType.build("timestamp")
        array = exp.Array(expressions=[exp.Cast(this=exp.Literal.string(str(t)), to=ts)
                                       for t in values.to_pylist()])
        return exp.Anonymous(this="unnest", expressions=[
            exp.Cast(this=array, to=exp.DataType.build("timestamp[]"))]), None

    def _max_value(self, e: exp.Expression, node: L.Node) -> int:
        """max(e) over the rows of `node`, computed now (the row count of a series)."""
        ok, v, _ = constant_value(fold_constants(e))
        if not ok:
            k = f"$max{next(self._n)}"
            agg = L.Aggregate(node, [], [L.AggCall(k, "max", e)])
            run = need_runner(self.runner, self.sql, e)
            v = run(L.Output(agg, [k], [k]), rules=False).column(0)[0].as_py()
        return max(int(v or 0), 0)

    def host_call(self, node: exp.Expression, conv) -> exp.Expression | None:
        """A call of a function the catalog provides (or a reg* cast), bound as HostCall."""
        lookup = getattr(self.catalog, "function", None)
        if lookup is None:
            return None
        if isinstance(node, exp.Cast):
            reg = _reg_type(node.args.get("to"))
            inner = node.this
            if reg is None and _is_text_type(node.args.get("to")) and \
                    isinstance(inner, exp.Cast) and _reg_type(inner.args.get("to")):
                # x::regclass::text is the name, not the number
                reg = _reg_type(inner.args.get("to"))
                fin, fout = lookup(reg), lookup(reg + "out")
                if fin is None or fout is None:
                    return None
                value = HostCall(this=reg, expressions=[rebuild(inner.this, conv)], fn=fin)
                return HostCall(this=reg + "out", expressions=[value], fn=fout)
            elem = _array_reg_type(node.args.get("to"))
            if reg is None and elem is not None:
                # x::regtype[]: each element's name, as PostgreSQL prints such an array
                fin, fout = lookup(elem), lookup(elem + "out")
                if fin is None or fout is None:
                    return None
                return HostCall(this=elem + "[]", expressions=[rebuild(inner, conv)],
                                fn=_elementwise(elem + "[]", [fin, fout]))
            if reg is None:
                return None
            fn = lookup(reg)
            return HostCall(this=reg, expressions=[rebuild(inner, conv)], fn=fn) \
                if fn is not None else None
        name = _CATALOG_FUNCTION_NODES.get(type(node))
        args: list[exp.Expression] = []
        if name is None and isinstance(node, exp.Anonymous):
            name, args = node.name.lower(), list(node.expressions)
        elif name is not None and node.this is not None:
            args = [node.this]
        if name is None:
            return None
        fn = lookup(name)
        if fn is None:
            return None
        call = HostCall(this=name, expressions=[rebuild(a, conv) for a in args], fn=fn)
        copy_meta(node, call)
        return call

