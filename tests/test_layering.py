"""Imports point downward only (ARCHITECTURE.md): engine never imports planner, wire, shell
or sqlglot; planner never imports wire or shell. Checked statically over the source so a
lazy import inside a function is caught too."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "engine": {"planner", "wire", "shell", "sqlglot", "kudusql", "tpch"},
    "planner": {"wire", "shell"},
}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layers_import_downward_only(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"package {package} has no source files"
    violations = []
    for f in files:
        bad = _imports(f) & FORBIDDEN[package]
        if bad:
            violations.append(f"{f.relative_to(ROOT)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)


def test_checker_detects_a_violation(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from planner import rules\n    import sqlglot.expressions\n")
    assert {"planner", "sqlglot"} <= _imports(f)
