"""Views in the catalog: `ViewMetadata` and the dependency rules both catalogs apply.

A view is metadata only - a name, the text of its query, its output columns (names and
Arrow types, fixed when it is created, as PostgreSQL fixes them) and the relations its query
reads (`depends_on`: table and view names). The engine never parses or runs the query: the
SQL layer binds it at CREATE VIEW (to find its columns and dependencies) and expands it in
place of the view's name in every statement that reads the view (planner/binder).

Both the embedded catalog (engine/catalog/catalog.py: catalog.json's "views") and the
cluster's master (engine/master/sys_catalog.py: put_view / drop_views entries of the
replicated log) keep views by name and apply the same rules, PostgreSQL's:

    CREATE VIEW v          42P07 if a table or a view is called v (OR REPLACE: a view may be
                           replaced, a table never); 42P01 if a relation it reads is gone
    DROP TABLE t / VIEW v  2BP01 while a view reads it, unless CASCADE, which drops those
                           views (and the views reading them) in the same catalog change
    ALTER TABLE t RENAME   the views that read t follow it, as PostgreSQL's (bound by OID)
                           do: the SQL layer rewrites each one's query to read the new name
                           (planner/views.py `follow_table_rename`) and hands the new views
                           over with the rename, committed in the same catalog change; a
                           view that reads t and is not among them (the SQL layer could not
                           rewrite it soundly, or it was created meanwhile) makes the rename
                           2BP01 (`check_rename`)

`dependents(views, names)` gives the views to drop along, readers before what they read.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Iterable, Mapping

import pyarrow as pa

from engine import errors


class DependentObjectsStillExist(errors.EngineError):
    """DROP / RENAME of a relation a view reads (PostgreSQL's 2BP01, with its DETAIL and
    HINT)."""

    sqlstate = "2BP01"

    def __init__(self, message: str, detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.detail = detail
        self.hint = hint


class InfiniteRecursion(errors.EngineError):
    """A view that would read itself (CREATE OR REPLACE making a cycle)."""

    sqlstate = "42P17"


class RelationExists(errors.AlreadyPresent):
    sqlstate = "42P07"


@dataclasses.dataclass(frozen=True)
class ViewMetadata:
    """One view, immutable (CREATE OR REPLACE VIEW publishes a new object)."""

    name: str
    query: str                      # the SELECT as written after AS
    schema: pa.Schema               # output columns: names and Arrow types
    depends_on: tuple[str, ...]     # the tables and views the query reads
    id: str = ""

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def to_dict(self) -> dict:
        return {"name": self.name, "query": self.query, "id": self.id,
                "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode(),
                "depends_on": list(self.depends_on)}

    @staticmethod
    def from_dict(d: dict) -> "ViewMetadata":
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(d["schema"])))
        return ViewMetadata(d["name"], d["query"], schema, tuple(d.get("depends_on", ())),
                            d.get("id", ""))


def dependents(views: Mapping[str, ViewMetadata], names: Iterable[str]) -> list[str]:
    """Every view that reads one of `names`, directly or through other views; a view comes
    before the views it reads (the order to drop them in)."""
    found: list[str] = []
    seen = set(names)
    frontier = list(names)
    while frontier:
        name = frontier.pop()
        for v in sorted(views.values(), key=lambda v: v.name):
            if name in v.depends_on and v.name not in seen:
                seen.add(v.name)
                found.append(v.name)
                frontier.append(v.name)
    # readers first: a view is dropped before anything it reads
    order: list[str] = []

    def visit(n: str) -> None:
        if n in order:
            return
        for r in found:
            if n in views[r].depends_on:
                visit(r)
        order.append(n)
    for n in found:
        visit(n)
    return order


def check_drop(views: Mapping[str, ViewMetadata], kind: str, names: list[str],
               cascade: bool) -> list[str]:
    """The views a DROP of `names` (tables or views, `kind` "table" / "view") drops along:
    none without CASCADE (2BP01 if any view depends on them), the dependents with it."""
    deps = [d for d in dependents(views, names) if d not in names]
    if deps and not cascade:
        name = next(n for n in names if dependents(views, [n]))
        direct = [v for v in deps if name in views[v].depends_on] or deps
        raise DependentObjectsStillExist(
            f"cannot drop {kind} {name} because other objects depend on it",
            detail="\n".join(f"view {v} depends on {kind} {name}" for v in direct),
            hint="Use DROP ... CASCADE to drop the dependent objects too.")
    return deps


def check_rename(views: Mapping[str, ViewMetadata], name: str, new_name: str,
                 followed: Iterable[ViewMetadata] = ()) -> dict[str, ViewMetadata] | None:
    """ALTER TABLE name RENAME TO new_name with the views that read it rewritten to follow
    (`followed`, module docstring): the catalog's views after the rename (None: none
    change). 2BP01 when a view reading the table is not followed, or a followed view still
    reads the old name or is not one that reads it."""
    followed = {v.name: v for v in followed}
    direct = sorted(v.name for v in views.values() if name in v.depends_on)
    left = [v for v in direct if v not in followed
            or name in followed[v].depends_on or new_name not in followed[v].depends_on]
    if left or set(followed) - set(direct):
        left = left or sorted(set(followed) - set(direct))
        raise DependentObjectsStillExist(
            f"cannot rename table {name} because other objects depend on it",
            detail="\n".join(f"view {v} depends on table {name}" for v in left),
            hint="Drop the views (or DROP ... CASCADE), rename, and create them again.")
    if not followed:
        return None
    return {**views, **{n: dataclasses.replace(v, id=views[n].id)
                        for n, v in followed.items()}}


def check_create(views: Mapping[str, ViewMetadata], is_table, view: ViewMetadata,
                 replace: bool) -> None:
    """CREATE [OR REPLACE] VIEW's checks against the catalog as it is (`is_table(name)`)."""
    if is_table(view.name):
        raise RelationExists(f'relation "{view.name}" already exists')
    if view.name in views and not replace:
        raise RelationExists(f'relation "{view.name}" already exists')
    for d in view.depends_on:
        if d == view.name or d in dependents(views, [view.name]):
            raise InfiniteRecursion(f'infinite recursion detected in rules for relation '
                                    f'"{view.name}"')
        if not is_table(d) and d not in views:
            raise errors.NotFound(f'relation "{d}" does not exist')
