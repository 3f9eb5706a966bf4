"""GROUP BY keys that other GROUP BY keys determine (functional dependencies), so that the
hash aggregation hashes and compares fewer, narrower keys.

TPC-H Q10 groups by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment:
c_custkey is customer's primary key, so one value of it has one value of every other
customer column, and of n_name too (the inner join's `c_nationkey = n_nationkey`, nation's
primary key). Grouping by c_custkey alone gives the same groups; the other keys' values
are taken once per group (Acero's `hash_one`: any value of the group, and they are all
equal). Q03 (l_orderkey = o_orderkey determines o_orderdate, o_shippriority) and Q18
(o_orderkey determines the order's columns and, by o_custkey = c_custkey, c_name and
c_custkey) shrink the same way.

`split_groups(node, catalog)` -> (kept groups, dependent groups). A key K is dependent when
it is in the closure of the other kept keys under two rules:
- a scan's columns all follow from its table's full primary key (the scan's own columns,
  the keys `<prefix>.<column>`): a Kudu primary key is unique. Not for a table_changes()
  scan (a key's changes are several rows) nor a virtual (system) table;
- `a = b` of two columns in an inner join's condition or a filter below the aggregation
  makes each follow from the other (each row that reaches the aggregation satisfied it,
  and a NULL never satisfies `=`).
Only Filter, inner MultiJoin and the left (preserved) side of left / semi / anti joins are
walked: their output rows are input rows that passed conditions, so the dependencies of
the scans below hold for them. A left join's ON condition is not used (its NULL-extended
rows do not satisfy it), nor is anything below a Project, an Aggregate or a set operation.
Keys are tried for dropping text ones first (the widest to hash), then in GROUP BY order.
"""

from __future__ import annotations

from sqlglot import exp

from engine.types import DataType
from planner import logical as L

_TEXT = (DataType.STRING, DataType.VARCHAR, DataType.BINARY)


def _column_key(e: exp.Expression) -> str | None:
    return e.name if isinstance(e, exp.Column) else None


def _facts(node: L.Node, catalog, scans: list, edges: list) -> None:
    """Collect the scans (prefix, key columns, all columns, column types) and the column
    equalities whose dependencies hold for `node`'s output rows."""
    if isinstance(node, L.Scan):
        if node.changes is not None:
            return
        try:
            table = catalog.table(node.table)
            if getattr(table, "virtual", False):
                return
            schema = table.schema
            key = [c.name for c in schema.key_columns]
            columns = {c.name: c.type for c in schema.columns}
        except Exception:       # noqa: BLE001 - no catalog table or schema: none known
            return
        scans.append((node.prefix, key, columns))
        return
    if isinstance(node, L.Filter):
        conds = [node.condition]
        inputs = [node.input]
    elif isinstance(node, L.MultiJoin):
        conds = list(node.conditions)
        inputs = list(node.inputs)
    elif isinstance(node, L.Join) and node.kind in ("left", "semi", "anti"):
        conds = []
        inputs = [node.left]
    else:
        return
    for c in conds:
        for part in L.conjuncts(c):
            if isinstance(part, exp.EQ):
                a, b = _column_key(part.this), _column_key(part.expression)
                if a is not None and b is not None:
                    edges.append((a, b))
    for i in inputs:
        _facts(i, catalog, scans, edges)


def _closure(start: set[str], scans: list, edges: list) -> set[str]:
    have = set(start)
    while True:
        before = len(have)
        for prefix, key, columns in scans:
            if key and all(f"{prefix}.{k}" in have for k in key):
                have.update(f"{prefix}.{c}" for c in columns)
        for a, b in edges:
            if a in have:
                have.add(b)
            if b in have:
                have.add(a)
        if len(have) == before:
            return have


def split_groups(node: L.Aggregate, catalog) -> tuple[list, list]:
    """(the groups to hash, the groups their values determine); see the module docstring.
    Without GROUP BY keys, with GROUPING SETS, or when nothing follows: (groups, [])."""
    groups = list(node.groups)
    if len(groups) < 2 or node.sets is not None:
        return groups, []
    scans: list = []
    edges: list = []
    _facts(node.input, catalog, scans, edges)
    if not scans:
        return groups, []
    types = {f"{prefix}.{c}": t for prefix, _, cols in scans for c, t in cols.items()}
    keys = [_column_key(e) for _, e in groups]
    order = sorted(range(len(groups)),
                   key=lambda i: (types.get(keys[i]) not in _TEXT, i))
    kept = set(range(len(groups)))
    for i in order:
        if keys[i] is None or keys[i] not in types:
            continue
        others = {keys[j] for j in kept if j != i and keys[j] is not None}
        if keys[i] in _closure(others, scans, edges):
            kept.discard(i)
    if len(kept) == len(groups):
        return groups, []
    return [g for i, g in enumerate(groups) if i in kept], \
        [g for i, g in enumerate(groups) if i not in kept]
