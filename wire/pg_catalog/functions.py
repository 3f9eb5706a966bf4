"""The catalog functions: `planner.expr.HostFunction`s bound by name (`PgCatalog.function`).

format_type, pg_get_expr, pg_get_indexdef, pg_get_constraintdef, pg_get_userbyid,
pg_table_is_visible, obj_description, version(), current_user, current_setting /
set_config, to_regtype, the reg* input and output functions, pg_partition_ancestors, ...
Each is a Python function of one row's arguments, called once per distinct argument tuple.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from planner.errors import SqlError, UndefinedObject
from planner.expr import ArrayType, HostFunction, array_to_list
from wire.settings import canonical
from wire.pg_catalog.oids import (
    BOOTSTRAP_SUPERUSER,
    NAMESPACES,
    PG_CATALOG,
    PUBLIC,
    TYPE_BY_NAME,
    TYPES,
    format_type,
    quote_ident,
    split_qualified_name,
)
from wire.pg_catalog.registry import (
    SessionCatalog,
    CatalogSnapshot,
    to_arrow_array,
    constraint_definition,
    index_definition,
    to_arrow_scalar,
)

Value = pa.Scalar | pa.Array | pa.ChunkedArray


# -- functions -------------------------------------------------------------------------------
def _py(v: pa.Scalar) -> Any:
    """A scalar argument as a Python value (SQL arrays as lists)."""
    return array_to_list(v).as_py() if isinstance(v.type, ArrayType) else v.as_py()


def _rows(values: list[Value], n: int) -> Iterable[tuple]:
    """The argument tuples of a call, one per row (constants repeated)."""
    cols = []
    for v in values:
        if isinstance(v, pa.Scalar):
            cols.append(None)
        else:
            cols.append(array_to_list(v).to_pylist() if isinstance(v.type, ArrayType)
                        else v.to_pylist())
    consts = [_py(v) if isinstance(v, pa.Scalar) else None for v in values]
    for r in range(n):
        yield tuple(c[r] if c is not None else k for c, k in zip(cols, consts))


def _per_value(fn: Callable[..., Any], out_type: pa.DataType
               ) -> Callable[[list[Value], int], Value]:
    """A HostFunction body from a Python function of one row's arguments. Calls are made
    once per distinct argument tuple (catalog lookups: few distinct OIDs and names)."""
    def call(values: list[Value], n: int) -> Value:
        if all(isinstance(v, pa.Scalar) for v in values):
            return to_arrow_scalar(fn(*[_py(v) for v in values]), out_type)
        memo: dict[tuple, Any] = {}
        out = []
        for args in _rows(values, n):     # per row, memoised: see the docstring
            if args not in memo:
                memo[args] = fn(*args)
            out.append(memo[args])
        return to_arrow_array(out, out_type)
    return call


def _strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out (PostgreSQL's STRICT functions)."""
    def wrapped(*args):
        return None if any(a is None for a in args) else fn(*args)
    return wrapped


def _oid_arg(v: Any) -> int:
    return int(v) if not isinstance(v, int) else v


def host_functions(cat: SessionCatalog) -> dict[str, HostFunction]:
    """The catalog functions (pg_get_indexdef, format_type, ...) bound to `cat`, by name."""
    text, boolean, oid, i32 = pa.string(), pa.bool_(), pa.int64(), pa.int32()
    fns: dict[str, HostFunction] = {}

    def to_oid(v: Any) -> Any:
        """An OID argument given as text ('16399', or a relation name as regclass)."""
        if isinstance(v, str):
            return int(v) if v.strip().isdigit() else cat.regclass(v)
        return v

    def define(name: str, fn: Callable[..., Any], out: pa.DataType, *, strict: bool = True,
               volatile: bool = False, nargs: tuple[int, ...] | None = None,
               oids: tuple[int, ...] = ()) -> None:
        inner = _strict(fn) if strict else fn

        def coerced(*args):
            return inner(*[to_oid(a) if i in oids else a for i, a in enumerate(args)])
        body = _per_value(coerced if oids else inner, out)

        def call(values: list[Value], n: int) -> Value:
            if nargs is not None and len(values) not in nargs:
                raise SqlError(f"function {name} with {len(values)} arguments does not exist",
                               "42883")
            return body(values, n)
        fns[name] = HostFunction(name, call, volatile=volatile)

    def snap() -> CatalogSnapshot:
        return cat.snapshot()

    def const(name: str, value: Callable[[], Any], out: pa.DataType) -> None:
        fns[name] = HostFunction(name, lambda values, n: pa.scalar(value(), out))

    # session
    for name in ("current_user", "session_user", "user", "current_role"):
        const(name, lambda: cat.user, text)
    for name in ("current_database", "current_catalog"):
        const(name, lambda: cat.database, text)
    const("current_schema", lambda: "public", text)
    const("version", lambda: cat.version, text)
    const("pg_backend_pid", lambda: cat.pid, i32)
    const("pg_is_in_recovery", lambda: False, boolean)
    define("current_schemas", lambda implicit: (["pg_catalog"] if implicit else []) +
           ["public"], ArrayType(text), nargs=(1,))

    def current_setting(name, missing_ok=False):
        """As SHOW prints it (PostgreSQL: '5s', not pg_settings' 5000 ms)."""
        v = cat.settings.get(name)
        if v is None:
            if not missing_ok:
                raise UndefinedObject(f'unrecognized configuration parameter "{name}"')
            return None
        show = getattr(cat.settings, "show", None)     # wire.settings.Settings
        return v if show is None else show(canonical(name))
    define("current_setting", current_setting, text, volatile=True, nargs=(1, 2))

    def set_config(name, value, is_local):
        cat.settings.set(name, value)
        return current_setting(name)
    define("set_config", set_config, text, strict=False, volatile=True, nargs=(3,))

    # types
    define("format_type", lambda typid, typmod=None: format_type(typid, typmod), text,
           strict=False, nargs=(2,), oids=(0,))

    def regtype_in(name):
        if isinstance(name, int):
            return name
        text_ = name.strip()
        if re.fullmatch(r"\d+", text_):
            return int(text_)
        t = _type_oid(text_)
        if t is None:
            raise UndefinedObject(f'type "{text_}" does not exist')
        return t
    define("regtype", regtype_in, oid, nargs=(1,))
    define("to_regtype", lambda name: _type_oid(name), oid, nargs=(1,))
    define("regtypeout", lambda typid: "-" if typid == 0 else format_type(typid, None)
           if typid in TYPES else str(typid), text, nargs=(1,))

    # relations
    define("regclass", lambda v: v if isinstance(v, int) else cat.regclass(v), oid, nargs=(1,))

    def to_regclass(name):
        try:
            return cat.regclass(name)
        except SqlError:
            return None
    define("to_regclass", to_regclass, oid, nargs=(1,))
    define("regclassout", lambda relid: "-" if relid == 0 else cat.relation_name(relid), text,
           nargs=(1,), oids=(0,))

    def regnamespace_in(v):
        if isinstance(v, int) or re.fullmatch(r"\s*\d+\s*", v):
            return int(v)
        names = {n: o for o, n in NAMESPACES.items()}
        name = split_qualified_name(v)[-1]
        if name not in names:
            raise UndefinedObject(f'schema "{v}" does not exist')
        return names[name]
    define("regnamespace", regnamespace_in, oid, nargs=(1,))
    define("regnamespaceout", lambda o: NAMESPACES.get(o, str(o)), text, nargs=(1,))

    def regrole_in(v):
        if isinstance(v, int) or re.fullmatch(r"\s*\d+\s*", v):
            return int(v)
        if split_qualified_name(v)[-1] != cat.user.lower() and v != cat.user:
            raise UndefinedObject(f'role "{v}" does not exist')
        return BOOTSTRAP_SUPERUSER
    define("regrole", regrole_in, oid, nargs=(1,))
    define("regroleout", lambda o: cat.user if o == BOOTSTRAP_SUPERUSER else str(o), text,
           nargs=(1,))
    define("regproc", lambda v: v if isinstance(v, int) else 0, oid, nargs=(1,))
    define("regprocout", lambda o: "-" if o == 0 else str(o), text, nargs=(1,))

    def table_is_visible(relid):
        r = snap().relation(relid)
        return None if r is None else r.namespace in (PG_CATALOG, PUBLIC)
    define("pg_table_is_visible", table_is_visible, boolean, nargs=(1,), oids=(0,))
    define("pg_type_is_visible", lambda typid: True if typid in TYPES else None, boolean,
           nargs=(1,), oids=(0,))
    for name in ("pg_function_is_visible", "pg_opclass_is_visible",
                 "pg_collation_is_visible", "pg_conversion_is_visible"):
        define(name, lambda o: True, boolean, nargs=(1,))

    define("pg_get_userbyid", lambda o: cat.user if o == BOOTSTRAP_SUPERUSER else
           f"unknown (OID={o})", text, nargs=(1,), oids=(0,))
    define("pg_encoding_to_char", lambda e: {6: "UTF8", 0: "SQL_ASCII"}.get(e, ""), text,
           nargs=(1,))
    define("pg_char_to_encoding", lambda e: 6 if e.upper().replace("-", "") == "UTF8" else -1,
           i32, nargs=(1,))
    # pg_attrdef.adbin (and other pg_node_tree columns) already hold SQL text
    define("pg_get_expr", lambda expr, relid, pretty=False: expr, text, nargs=(2, 3))

    def indexdef(index_oid, column=0, pretty=False):
        t = snap().index_by_oid.get(index_oid)
        return None if t is None else index_definition(t, column or 0, bool(pretty))
    define("pg_get_indexdef", indexdef, text, nargs=(1, 3), oids=(0,))

    def constraintdef(con_oid, pretty=False):
        t = snap().constraint_by_oid.get(con_oid)
        return None if t is None else constraint_definition(t)
    define("pg_get_constraintdef", constraintdef, text, nargs=(1, 2), oids=(0,))

    def obj_description(objoid, catalog_name=None):
        s = snap()
        t = s.by_oid.get(objoid)
        if t is not None and catalog_name in (None, "pg_class"):
            return t.meta.comment
        if objoid == PUBLIC and catalog_name in (None, "pg_namespace"):
            return "standard public schema"
        return None
    define("obj_description", obj_description, text, nargs=(1, 2), oids=(0,))
    define("col_description", lambda relid, attnum: None, text, nargs=(2,))
    define("shobj_description", lambda o, c: None, text, nargs=(2,))

    for name in ("has_table_privilege", "has_schema_privilege", "has_database_privilege",
                 "has_column_privilege", "has_function_privilege", "has_sequence_privilege",
                 "has_any_column_privilege", "has_type_privilege", "has_tablespace_privilege",
                 "has_foreign_data_wrapper_privilege", "has_server_privilege",
                 "has_language_privilege", "pg_has_role"):
        define(name, lambda *args: True, boolean, strict=False)
    for name in ("pg_get_serial_sequence", "pg_get_triggerdef", "pg_get_partkeydef",
                 "pg_get_statisticsobjdef_columns", "pg_get_function_result",
                 "pg_get_function_arguments", "pg_get_function_identity_arguments",
                 "pg_get_ruledef"):
        define(name, lambda *args: None, text, strict=False)

    def viewdef(view, pretty=False):
        """pg_get_viewdef(oid or name [, pretty]): a user view's query; NULL otherwise."""
        v = snap().view_by_oid.get(view)
        return v.definition if v is not None else None
    define("pg_get_viewdef", viewdef, text, nargs=(1, 2), oids=(0,))
    define("pg_relation_is_publishable", lambda relid: False, boolean, nargs=(1,), oids=(0,))
    for name in ("pg_relation_size", "pg_total_relation_size", "pg_table_size",
                 "pg_indexes_size", "pg_database_size"):
        define(name, lambda *args: 0, pa.int64(), strict=False)
    define("pg_size_pretty", lambda n: f"{n} bytes", text, nargs=(1,))
    define("quote_ident", quote_ident, text, nargs=(1,))
    define("pg_sleep", lambda seconds: time.sleep(float(seconds)), pa.null(), volatile=True,
           nargs=(1,))
    for name in ("pg_advisory_unlock_all", "pg_advisory_lock", "pg_advisory_unlock",
                 "pg_try_advisory_lock"):
        define(name, lambda *args: True if args else None,
               pa.bool_() if name != "pg_advisory_unlock_all" else pa.null(), strict=False,
               volatile=True)
    # set-returning: arrays the binder unnests
    define("pg_partition_ancestors", lambda relid: [relid], ArrayType(oid), nargs=(1,),
           oids=(0,))
    return fns


def _type_oid(name: str) -> int | None:
    """A type name as to_regtype reads it -> OID (None if unknown)."""
    n = " ".join(name.strip().lower().split())
    array = n.endswith("[]")
    if array:
        n = n[:-2].strip()
    n = n.removeprefix("pg_catalog.")
    n = re.sub(r"\s*\(.*\)", "", n)      # character varying(20) -> character varying
    oid = TYPE_BY_NAME.get(n) or TYPE_BY_NAME.get(n.strip('"'))
    if oid is None:
        return None
    return TYPES[oid].array or None if array else oid
