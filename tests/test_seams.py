"""Public seams (issue 28): a module's underscore names are its own. No product file may
import another module's `_name`, nor read `obj._attr` of an object that is not its own
(`self`, `cls`, `super()`), beyond what tests/seams_baseline.json records of today's code:
the known uses (329 imports in 41 files, 92 reads in 28 when this check came) are being
given public names, and the baseline only shrinks. A new use fails here; the fix is a
public name that says what it is (or, inside one class, a method).

    python -m tests.test_seams --tighten   # drop baseline entries the code no longer has

Static, over the source (lazy imports inside functions count too)."""

from __future__ import annotations

import ast
import collections
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASELINE = pathlib.Path(__file__).resolve().parent / "seams_baseline.json"
PACKAGES = ("engine", "planner", "session", "wire", "shell", "kudusql", "tpch", "native")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def file_seams(path: pathlib.Path, packages=PACKAGES) -> tuple[set[str], int]:
    """(the `module._name`s this file imports from the project, its reads of `x._attr`
    where x is not self / cls / super())."""
    imports, reads = set(), 0
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] in packages:
            imports |= {f"{node.module}.{a.name}" for a in node.names if _private(a.name)}
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            v = node.value
            if isinstance(v, ast.Name) and v.id in ("self", "cls"):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            reads += 1
    return imports, reads


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
        print(__doc__)
