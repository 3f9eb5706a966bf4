"""Public seams (issue 28): a module's underscore names are its own. No product file may
import another module's `_name`, nor read `obj._attr` of an object that is not its own,
beyond what tests/seams_baseline.json records of today's code; the baseline only shrinks.
A new use fails here; the fix is a public name that says what it is (or, inside one class,
a method).

How it counts (static, over every .py file of PACKAGES; lazy imports inside functions and
`if TYPE_CHECKING:` imports count too):

  imports  one per (file, `module._name`): a `from <project module> import _name` (absolute
           imports of a project package; `__dunder__` names are not private). A file that
           imports the same name twice counts once.
  reads    one per AST node `x._attr` (`__dunder__` attributes excepted, reads and writes
           alike) whose `x` is not the name `self` or `cls` or a `super()` call. Everything
           else counts: an instance a factory classmethod just built (`t = cls(...);
           t._x`), `ClassName._helper`, the standard library's and other packages'
           privates (`os._exit`, PySpark's `sc._jvm`).

The issue's ceilings: at most MAX_IMPORTS such imports and MAX_READS such reads in total,
over the product (PACKAGES; tests/ and bench/ are not counted). On main before issue 28's
renames this count gave 191 imports and 72 reads (92 reads in 28 files and 329 imports in
41 when the issue was filed).

    python -m tests.test_seams            # print the counts, per file
    python -m tests.test_seams --tighten  # drop baseline entries the code no longer has
"""

from __future__ import annotations

import ast
import collections
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASELINE = pathlib.Path(__file__).resolve().parent / "seams_baseline.json"
PACKAGES = ("engine", "planner", "session", "wire", "shell", "kudusql", "tpch", "native")
MAX_IMPORTS = 40     # issue 28's ceilings, over the whole product
MAX_READS = 20


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _reads(tree: ast.AST) -> int:
    """The `x._attr` reads of a module whose `x` is not `self`, `cls` or `super()`."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            v = node.value
            if isinstance(v, ast.Name) and v.id in ("self", "cls"):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            count += 1
    return count


def file_seams(path: pathlib.Path, packages=PACKAGES) -> tuple[set[str], int]:
    """(the `module._name`s this file imports from the project, its reads of `x._attr`
    where x is not self / cls / super())."""
    tree = ast.parse(path.read_text(), filename=str(path))
    imports = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] in packages:
            imports |= {f"{node.module}.{a.name}" for a in node.names if _private(a.name)}
    return imports, _reads(tree)


def scan(root: pathlib.Path = ROOT) -> dict:
    imports: dict[str, list[str]] = {}
    reads: dict[str, int] = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            rel = str(f.relative_to(root))
            i, r = file_seams(f)
            if i:
                imports[rel] = sorted(i)
            if r:
                reads[rel] = r
    return {"imports": imports, "reads": reads}


def violations(now: dict, base: dict) -> list[str]:
    out = []
    for f, names in sorted(now["imports"].items()):
        new = sorted(set(names) - set(base["imports"].get(f, [])))
        out += [f"{f} imports {n} (another module's private name)" for n in new]
    for f, n in sorted(now["reads"].items()):
        if n > base["reads"].get(f, 0):
            out.append(f"{f} reads another object's _private member {n} times "
                       f"(baseline {base['reads'].get(f, 0)})")
    return out


def test_no_new_private_seams():
    bad = violations(scan(), json.loads(BASELINE.read_text()))
    assert not bad, ("give these a public name that says what it is (issue 28):\n" +
                     "\n".join(bad))


def totals(now: dict) -> tuple[int, int]:
    """(imports, reads) over the product, counted as the module docstring says."""
    return sum(map(len, now["imports"].values())), sum(now["reads"].values())


def test_within_the_issue_ceilings():
    imports, reads = totals(scan())
    assert imports <= MAX_IMPORTS, \
        f"{imports} imports of another module's _names (max {MAX_IMPORTS})"
    assert reads <= MAX_READS, f"{reads} reads of another object's _members (max {MAX_READS})"


def test_the_baseline_is_within_the_ceilings():
    imports, reads = totals(json.loads(BASELINE.read_text()))
    assert imports <= MAX_IMPORTS and reads <= MAX_READS


def test_the_seam_check_bites(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from engine.key_encoding import _int_matrix\n"
                 "def g(t):\n    from planner.rules import _rewrite_nodes\n"
                 "    return t._write_lock, self._ok, super()._fine\n")
    imports, reads = file_seams(f)
    assert imports == {"engine.key_encoding._int_matrix", "planner.rules._rewrite_nodes"}
    assert reads == 1
    now = {"imports": {"x.py": sorted(imports)}, "reads": {"x.py": reads}}
    assert len(violations(now, {"imports": {}, "reads": {}})) == 3
    assert violations(now, now) == []


if __name__ == "__main__":
    if sys.argv[1:] == ["--tighten"]:
        base, now = json.loads(BASELINE.read_text()), scan()
        tight = {"imports": {f: sorted(set(v) & set(now["imports"].get(f, [])))
                             for f, v in base["imports"].items() if now["imports"].get(f)},
                 "reads": {f: min(v, now["reads"][f]) for f, v in base["reads"].items()
                           if now["reads"].get(f)}}
        tight["imports"] = {f: v for f, v in tight["imports"].items() if v}
        BASELINE.write_text(json.dumps(tight, indent=1, sort_keys=True) + "\n")
        print(f"baseline: {sum(map(len, tight['imports'].values()))} imports, "
              f"{sum(tight['reads'].values())} reads")
    else:
        now = scan()
        for kind in ("imports", "reads"):
            for f, v in sorted(now[kind].items()):
                print(f"{kind:8} {f}: {v if isinstance(v, int) else len(v)}")
        print("total: %d imports, %d reads" % totals(now))
