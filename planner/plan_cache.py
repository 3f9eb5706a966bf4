"""Plans of parameterised queries, kept per session so that a statement executed again
with new parameter values (prepared statements, the wire protocol's extended query, DB-API
calls in a loop) skips parsing, qualification and binding.

Contract:
- The cache holds *bound* plans (before the optimizer rules): parameters are `Const`s that
  the binder marked with `meta["param"] = i`. `lookup` returns a private copy with the new
  values substituted; the caller then runs the rules (which fold and push the values into
  scans) and executes it.
- A plan is cached only when every parameter appears in its expressions (a parameter the
  binder consumed, like LIMIT $1, would be stale) and it reads only catalog tables. It is
  valid while each table it reads still has the same catalog metadata object (any DDL on
  the table replaces that object), each view expanded into it is still the catalog's
  `ViewMetadata` object (CREATE OR REPLACE VIEW and DROP VIEW replace it), and for the
  same Python types of the parameters. A catalog that numbers its changes
  (`catalog_version`: the embedded engine Catalog bumps it at every DDL) lets an entry that
  was checked at the current version skip the checks.
- A plan that reads one row by its full primary key is also compiled into a
  planner.point_read.PointRead: `point_result` runs it without copying the plan or running
  the rules. It returns None when it cannot stand in for the plan; the caller then uses
  `lookup` as usual.
"""

from __future__ import annotations

import collections
import copy

from planner import logical as L
from planner.binder.views import catalog_views
from planner.expr import param_index, param_scalar, substitute_params
from planner.point_read import PointRead, compile_point_read
from planner.logical import all_nodes as _all_nodes
from planner.logical import map_expressions, rewrite_nodes


class PlanCache:
    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self._entries: collections.OrderedDict = collections.OrderedDict()
        # (catalog, the catalog whose catalog_version it shows: its `catalog_source`),
        # for the catalog last asked about
        self._source: tuple = (None, None)

    @staticmethod
    def _key(text: str, params) -> tuple:
        # an int beyond BIGINT binds as NUMERIC (expr.param_scalar): a plan of its own
        types = tuple(map(type, params))
        if int in types:
            for p in params:    # a plain loop: no generator frame on the hot path
                if type(p) is int and not -2 ** 63 <= p < 2 ** 63:
                    return text, tuple("numeric-int" if type(q) is int and
                                       not -2 ** 63 <= q < 2 ** 63 else type(q)
                                       for q in params)
        return text, types

    def _valid(self, catalog, key: tuple):
        entry = self._entries.get(key)
        if entry is None:
            return None
        # the catalog's `catalog_version` (None when it has none), read on the catalog
        # the wrappers delegate to, found once per catalog object
        src = self._source
        if src[0] is not catalog:
            src = self._source = (catalog, getattr(catalog, "catalog_source", catalog))
        version = getattr(src[1], "catalog_version", None)
        if version is None or entry[4] != version:
            for name, meta in entry[1]:
                if not catalog.has_table(name) or \
                        getattr(catalog.table(name), "metadata", None) is not meta:
                    del self._entries[key]
                    return None
            if entry[3]:
                views = catalog_views(catalog)
                if any(views.get(name) is not view for name, view in entry[3]):
                    del self._entries[key]
                    return None
            # checked at this version: nothing the checks read changes before the next
            entry[4] = version
        self._entries.move_to_end(key)
        return entry

    def point_read(self, catalog, text: str, params) -> PointRead | None:
        """The compiled point read for this statement and parameter types, if any."""
        entry = self._valid(catalog, self._key(text, params))
        return entry[2] if entry is not None else None

    def point_result(self, catalog, text: str, params, in_memory_only: bool = False,
                     snapshot: int | None = None):
        """The result (pa.Table) of the statement's compiled point read, or None: no point
        read for it, parameters that need the ordinary plan, or with `in_memory_only` a
        table whose tablets are not all open (see PointRead.ready). `snapshot`: read at
        this timestamp (UPDATE / DELETE's matching read, planner/dml.py)."""
        fast = self.point_read(catalog, text, params)
        if fast is None:
            return None
        table = fast.facade(catalog)
        return fast.run(catalog, params, table, now=in_memory_only, snapshot=snapshot)

    def lookup(self, catalog, text: str, params) -> L.Output | None:
        entry = self._valid(catalog, self._key(text, params))
        if entry is None:
            return None
        out = copy.deepcopy(entry[0])
        values = [param_scalar(p) for p in params]

        return rewrite_nodes(out, lambda node: map_expressions(
            node, lambda e: substitute_params(e, values, copy=False)))

    def store(self, catalog, text: str, params, template: L.Output) -> None:
        seen: set[int] = set()
        metas = []
        for node in _all_nodes(template.plan):
            for e in node.expressions():
                seen |= {i for n in e.walk() if (i := param_index(n)) is not None}
            if isinstance(node, L.Scan):
                meta = getattr(catalog.table(node.table), "metadata", None)
                if meta is None or node.changes:
                    return                      # system views, diff scans: not cached
                metas.append((node.table, meta))
            if isinstance(node, L.Values):
                return                          # VALUES rows are not in expressions() walk
        if seen != set(range(len(params))):
            return
        template = copy.deepcopy(template)     # the rules re-point the SubqueryRefs of the caller's plan
        fast = compile_point_read(catalog, template) if len(metas) == 1 else None
        # [plan, (table, metadata) read, point read, views expanded, catalog version
        # checked at (None: check at the next use)]
        self._entries[self._key(text, params)] = [template, metas, fast, template.views, None]
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
