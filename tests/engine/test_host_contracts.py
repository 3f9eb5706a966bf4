"""The halves of a class that live in their own files (`Tablet` = TabletWriter +
TabletMaintenance, `DiskRowSet` + DeltaCompactions) use their host's private members; each
file's docstring lists them as its host contract. These tests keep the list true: every
`self.x` a half uses that it does not define itself is in its list, and every name in the
list exists on a real host. A new private member a half starts using must be added to the
contract (and so to the review), not picked up silently."""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import pytest

from engine.schema import ColumnSchema, Schema
from engine.tablet.tablet import Tablet
from engine.types import DataType

HALVES = [  # (module, class, host)
    ("engine.tablet.tablet_write", "TabletWriter", "Tablet"),
    ("engine.tablet.tablet_mm_ops", "TabletMaintenance", "Tablet"),
    ("engine.tablet.delta_compaction", "DeltaCompactions", "DiskRowSet"),
]


def _contract(module) -> set[str]:
    doc = inspect.getdoc(module)
    m = re.search(r"(?:host contract|what it uses of its host)(.*?)(?:\n\n|$)", doc, re.S)
    assert m, f"{module.__name__}: no host contract in the docstring"
    return set(re.findall(r"`(\w+)`", m.group(1))) - {"Tablet", "DiskRowSet"}


def _uses(module, cls: str) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    own = {n.name for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    used = {n.attr for n in ast.walk(klass) if isinstance(n, ast.Attribute) and
            isinstance(n.value, ast.Name) and n.value.id == "self"}
    return used - own


@pytest.mark.parametrize("mod,cls,host", HALVES)
def test_a_half_uses_only_its_listed_host_members(mod, cls, host):
    module = importlib.import_module(mod)
    unlisted = _uses(module, cls) - _contract(module)
    assert not unlisted, f"{cls} uses {sorted(unlisted)} of {host} without listing them"


@pytest.fixture
def tablet(tmp_path):
    schema = Schema([ColumnSchema("k", DataType.INT64), ColumnSchema("v", DataType.STRING)],
                    key=["k"])
    t = Tablet.create(str(tmp_path / "t"), schema)
    t.insert({"k": list(range(10)), "v": [str(i) for i in range(10)]})
    t.flush_mrs()
    yield t
    t.close()


@pytest.mark.parametrize("mod,cls,host", HALVES)
def test_the_listed_members_exist_on_the_host(tablet, mod, cls, host):
    obj = tablet if host == "Tablet" else tablet._components.drss[0]
    missing = [n for n in _contract(importlib.import_module(mod)) if not hasattr(obj, n)]
    assert not missing, f"{host} has no {missing}, listed in {mod}'s host contract"
