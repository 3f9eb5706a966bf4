"""Imports point downward only (ARCHITECTURE.md): engine never imports planner, wire, shell
or sqlglot; planner never imports wire or shell. The packages form layers (issue 14,
docs/architecture.md): engine <- planner <- session <- the front ends (the DB-API driver in
kudusql/, wire, shell, kudusql/spark, tpch, the `kudusql` command in kudusql/cli.py), and
every import between two of them follows an edge of LAYERS, which is itself free of cycles.
And no two files of a package import each other, directly or around a circle: a file cycle
means neither file can be read, tested or replaced without the other. Checked statically over the source, so a lazy import
inside a function is caught too; imports under `if TYPE_CHECKING:` are left out (they never
run, and annotations may point anywhere)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "engine": {"planner", "wire", "shell", "sqlglot", "kudusql", "tpch"},
    "planner": {"wire", "shell"},
    "session": {"wire", "shell", "kudusql", "tpch"},
    # the wire reads no SQL: the session's front door parses every statement (issue 14)
    "wire": {"sqlglot"},
    # the compiled core sits below every layer (native/__init__.py)
    "native": {"engine", "planner", "session", "wire", "shell", "kudusql", "tpch", "sqlglot"},
}

# The components the package rule speaks of: a path prefix (the longest match wins) -> its
# component. kudusql/ holds three: the DB-API driver (below tpch), the Spark data source and
# the `kudusql` command (above everything).
COMPONENTS = {
    "engine": "engine", "planner": "planner", "session": "session", "wire": "wire",
    "shell": "shell", "tpch": "tpch", "bench": "bench", "native": "native",
    "kudusql": "driver", "kudusql/spark": "spark",
    "kudusql/cli.py": "cli", "kudusql/__main__.py": "cli", "kudusql/tpch_cli.py": "cli",
    "kudusql/cluster.py": "cli",
}

# component -> the components it may import (directly; a lower layer's own edges are its)
LAYERS = {
    "native": set(),
    "engine": {"native"},
    "planner": {"engine", "native"},
    "session": {"planner", "engine", "native"},
    "driver": {"session", "planner", "engine", "native"},
    "wire": {"session", "planner", "engine", "native"},
    "shell": {"session", "planner", "engine", "native"},
    "spark": {"driver", "wire", "session", "planner", "engine", "native"},
    "tpch": {"session", "planner", "engine", "native"},
    "cli": {"tpch", "shell", "wire", "spark", "driver", "session", "planner", "engine",
            "native"},
    # spark: bench/stream_bench.py measures the Structured Streaming sink
    "bench": {"cli", "tpch", "wire", "spark", "driver", "session", "planner", "engine",
              "native"},
}

# Packages whose files must not import each other in a circle, each with the cycles it has
# today (issue 14 removes them). A known cycle is allowed (and may disappear); any other
# cycle, or a known one that grows, fails. Add a package here to hold it to the rule.
CYCLE_FREE = {
    "engine": [],
    "planner": [],
    "wire": [],
    "session": [],
    "kudusql": [],
    "shell": [],
    "tpch": [],
    "native": [],
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


# -- file import cycles ------------------------------------------------------------------
def _module_file(root: pathlib.Path, dotted: str) -> pathlib.Path | None:
    p = root.joinpath(*dotted.split("."))
    for cand in (p.with_suffix(".py"), p / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _runtime_imports(tree: ast.AST):
    """Import nodes that run (those under `if TYPE_CHECKING:` do not)."""
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from (x for s in child.orelse for x in walk_one(s))
                continue
            yield from walk_one(child)

    def walk_one(node):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from walk(node)
    yield from walk(tree)


def _file_edges(root: pathlib.Path, path: pathlib.Path) -> set[pathlib.Path]:
    """Files of `root` this file imports (a submodule named in `from pkg import mod` counts
    as that module's file; a parent package's __init__ is not implied)."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    pkg = parts[:-1]  # the package a relative import starts from
    out = set()
    for node in _runtime_imports(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
            for t in targets:
                f = _module_file(root, t)
                if f is not None:
                    out.add(f)
            continue
        if node.level:
            base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module
        for a in node.names:
            f = _module_file(root, f"{mod}.{a.name}") if mod else None
            f = f or (_module_file(root, mod) if mod else None)
            if f is not None:
                out.add(f)
    out.discard(path)
    return out


def file_cycles(root: pathlib.Path, package: str) -> list[set[str]]:
    """The import cycles among the files of `package` (strongly connected components of
    more than one file), as sets of paths relative to `root`."""
    files = sorted((root / package).rglob("*.py"))
    graph = {f: {g for g in _file_edges(root, f) if g.is_relative_to(root / package)}
             for f in files}
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list[set[str]] = []
    counter = [0]

    def strong(v):  # Tarjan's algorithm (the graphs are small: recursion is fine)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w is v:
                    break
            if len(comp) > 1:
                out.append({str(c.relative_to(root)) for c in comp})

    for f in files:
        if f not in index:
            strong(f)
    return out


@pytest.mark.parametrize("package", sorted(CYCLE_FREE))
def test_no_file_import_cycles_inside_a_package(package):
    known = CYCLE_FREE[package]
    new = [c for c in file_cycles(ROOT, package) if not any(c <= k for k in known)]
    assert not new, "file import cycles:\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in new)


def test_cycle_checker_detects_a_cycle(tmp_path):
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from p.sub.a import A\n")
    (pkg / "sub" / "a.py").write_text("from typing import TYPE_CHECKING\n"
                                      "from p import c\n"
                                      "if TYPE_CHECKING:\n    from p.d import D\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import a\n")  # lazy, relative
    (pkg / "c.py").write_text("import p.b\n")
    (pkg / "d.py").write_text("from p.sub.a import A\n")  # a -> d only for type checking
    assert file_cycles(tmp_path, "p") == [{"p/sub/a.py", "p/b.py", "p/c.py"}]


# -- package (component) edges --------------------------------------------------------------
def component(rel: str) -> str | None:
    """The component of a file (a path relative to the repository root)."""
    best = None
    for prefix in COMPONENTS:
        if (rel == prefix or rel.startswith(prefix + "/")) and \
                (best is None or len(prefix) > len(best)):
            best = prefix
    return COMPONENTS[best] if best is not None else None


def component_edges(root: pathlib.Path) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) component pairs -> the file imports that make them (runtime
    imports only, lazy ones included)."""
    out: dict[tuple[str, str], list[str]] = {}
    for prefix in sorted({p.split("/")[0] for p in COMPONENTS}):
        for f in sorted((root / prefix).rglob("*.py")):
            a = component(str(f.relative_to(root)))
            for g in _file_edges(root, f):
                b = component(str(g.relative_to(root)))
                if a is not None and b is not None and a != b:
                    out.setdefault((a, b), []).append(
                        f"{f.relative_to(root)} -> {g.relative_to(root)}")
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path of nodes, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_layers_have_no_cycle():
    assert _cycle(LAYERS) is None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_front_ends_stand_above_the_session():
    below = {"engine", "planner", "session"}
    for fe in ("driver", "wire", "shell", "spark", "tpch", "cli"):
        assert fe not in set().union(*(LAYERS[c] for c in below))
        assert "session" in LAYERS[fe] or fe == "cli"


def test_package_imports_follow_the_layers():
    edges = component_edges(ROOT)
    bad = [f"{a} -> {b}: " + "; ".join(why[:3]) for (a, b), why in sorted(edges.items())
           if b not in LAYERS[a]]
    assert not bad, "imports against the layers:\n" + "\n".join(bad)
    assert _cycle({a: {b for (x, b) in edges if x == a} for a in LAYERS}) is None


def test_package_checker_detects_an_upward_import(tmp_path):
    for d in ("session", "wire", "kudusql"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "wire" / "conn.py").write_text("from session import x\n")
    (tmp_path / "session" / "x.py").write_text("def f():\n    from wire import conn\n")
    (tmp_path / "kudusql" / "cli.py").write_text("import wire.conn\n")
    edges = component_edges(tmp_path)
    assert set(edges) == {("wire", "session"), ("session", "wire"), ("cli", "wire")}
    assert "wire" not in LAYERS["session"]
