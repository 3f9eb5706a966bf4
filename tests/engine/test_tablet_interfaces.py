"""The collaborators of `Tablet`, `DiskRowSet` and `Table` go through public interfaces.

`Tablet` is one class; its write pipeline (tablet_write.py `TabletWriter`) and its
maintenance ops (tablet_mm_ops.py `FlushMRSOp`, `CompactRowSetsOp`, ...) are objects of
their own, as are a DiskRowSet's delta compactions (delta_compaction.py), a
PartitionSchema's pruner (engine/catalog/partition_pruner.py) and a Table's small writes
and scans (engine/catalog/table_small_writes.py, table_scanner.py). These tests hold the
seams between them public:

- neither Tablet, DiskRowSet nor PartitionSchema inherits anything (no mixins over shared
  private state);
- a collaborator module reads no `x._name` of any object but itself (`self` / `cls`);
- what a collaborator uses of its host is public, exists on a real host, and is listed in
  the module docstring's "What ... uses of its tablet / the rowset" sentence, so a new use
  of the host shows in the review as a change of that stated interface.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import pytest

from engine.catalog.partition import HashBucketSchema, PartitionSchema
from engine.catalog.table import Table
from engine.schema import ColumnSchema, Schema
from engine.tablet.diskrowset import DiskRowSet
from engine.tablet.tablet import Tablet
from engine.types import DataType

# module -> (the names a host is bound to, the `self.<attr>`s holding it, host)
COLLABORATORS = {
    "engine.tablet.tablet_write": ((), ("_tablet",), "Tablet"),
    "engine.tablet.tablet_mm_ops": (("t", "tablet"), ("tablet",), "Tablet"),
    "engine.tablet.delta_compaction": (("drs",), ("drs",), "DiskRowSet"),
    "engine.catalog.partition_pruner": ((), ("ps",), "PartitionSchema"),
}
# collaborators of Table: no private reads, and what they use of the table is public
TABLE_COLLABORATORS = {
    "engine.catalog.table_small_writes": (("table",), ("table",)),
    "engine.catalog.table_scanner": (("table",), ("table",)),
    "engine.catalog.write_pipeline": (("table",), ("table",)),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _tree(mod: str) -> ast.Module:
    return ast.parse(inspect.getsource(importlib.import_module(mod)))


def _foreign_private_reads(tree: ast.AST) -> list[str]:
    """`x._name` whose x is not the bare name self / cls, with its line."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and _private(n.attr) and not (
                isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
            out.append(f"line {n.lineno}: {ast.unparse(n)}")
    return out


def _host_uses(tree: ast.AST, names, self_attrs) -> set[str]:
    """The attributes read of the host: `<name>.x` and `self.<attr>.x`."""
    used = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.Attribute):
            continue
        v = n.value
        if isinstance(v, ast.Name) and v.id in names:
            used.add(n.attr)
        elif (isinstance(v, ast.Attribute) and v.attr in self_attrs
              and isinstance(v.value, ast.Name) and v.value.id == "self"):
            used.add(n.attr)
    return used


def _stated_interface(mod: str) -> set[str]:
    doc = inspect.getdoc(importlib.import_module(mod))
    m = re.search(r"What\s+(?:it|an\s+op|they)\s+uses?\s+of\s+(?:its|the)\s+"
                  r"(?:tablet|rowset|partition\s+schema)[^:]*:(.*?)(?:\.\s|\.$|\n\n)",
                  doc, re.S)
    assert m, f"{mod}: its docstring states no interface to its host"
    return set(re.findall(r"`(\w+)", m.group(1)))


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    schema = Schema([ColumnSchema("k", DataType.INT64), ColumnSchema("v", DataType.STRING)],
                    key=["k"])
    t = Tablet.create(str(tmp_path_factory.mktemp("t") / "t"), schema)
    t.insert({"k": list(range(10)), "v": [str(i) for i in range(10)]})
    t.flush_mrs()
    ps = PartitionSchema.create(schema, [HashBucketSchema(("k",), 4)], ("k",))
    yield {"Tablet": t, "DiskRowSet": t.components.drss[0], "PartitionSchema": ps}
    t.close()


def test_tablet_diskrowset_and_partition_schema_are_one_class_each():
    assert Tablet.__bases__ == (object,), Tablet.__bases__
    assert DiskRowSet.__bases__ == (object,), DiskRowSet.__bases__
    assert PartitionSchema.__bases__ == (object,), PartitionSchema.__bases__


@pytest.mark.parametrize("mod", [*COLLABORATORS, *TABLE_COLLABORATORS])
def test_a_collaborator_reads_no_private_member_of_another_object(mod):
    reads = _foreign_private_reads(_tree(mod))
    assert not reads, f"{mod} reads private members of other objects: {reads}"


@pytest.mark.parametrize("mod", list(COLLABORATORS))
def test_what_a_collaborator_uses_of_its_host_is_its_stated_public_interface(hosts, mod):
    names, attrs, host = COLLABORATORS[mod]
    used = _host_uses(_tree(mod), names, attrs)
    assert used, f"{mod}: found no use of its {host} (the test's binding names are stale)"
    stated = _stated_interface(mod)
    assert not used - stated, (f"{mod} uses {sorted(used - stated)} of {host} beyond the "
                               f"interface its docstring states")
    obj = hosts[host]
    bad = sorted(n for n in stated if _private(n) or not hasattr(obj, n))
    assert not bad, f"{mod} states {bad} as {host}'s interface: private or missing there"


@pytest.mark.parametrize("mod", list(TABLE_COLLABORATORS))
def test_what_a_table_collaborator_uses_of_the_table_is_public(mod):
    names, attrs = TABLE_COLLABORATORS[mod]
    used = _host_uses(_tree(mod), names, attrs)
    bad = sorted(n for n in used if _private(n) or not hasattr(Table, n))
    assert not bad, f"{mod} uses {bad} of Table: private, or not a member of the class"
