"""EXPLAIN golden files, one per optimizer rule (planner.rules.RULES): for each query of a
rule's file, the plan with every rule on and the plan with that rule switched off. A change
to what a rule does to a plan shows as a diff in tests/planner/golden/<rule>.txt; review
it, then regenerate the files with

    KUDUSQL_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/planner/test_rule_golden.py

Each file must also show its rule at work: at least one of its queries plans differently
with the rule off (so a rule that silently stopped firing fails here, not just in a diff).
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest

import kudusql
from planner.rules import RULE_NAMES, disabled_rules

GOLDEN = pathlib.Path(__file__).parent / "golden"
REGENERATE = os.environ.get("KUDUSQL_REGEN_GOLDEN") == "1"

QUERIES = {
    "fold_constants": [
        "SELECT name FROM emp WHERE salary > 10 * 5 + 1",
        "SELECT id FROM emp WHERE hired >= date '1998-12-01' - interval '90' day",
        "SELECT name, upper('x' || 'y') AS tag FROM emp WHERE dept = 1 + 1",
    ],
    "fold_pushed_predicates": [
        "SELECT * FROM (SELECT id, 2 AS two FROM emp) g WHERE g.two > 1",
        "SELECT * FROM (SELECT id, 'a' AS k FROM emp) g WHERE g.k = 'a' AND g.id = 1",
    ],
    "factor_or": [
        "SELECT e.name FROM emp e, dept d WHERE (e.dept = d.id AND d.dname = 'eng') "
        "OR (e.dept = d.id AND e.salary > 50)",
        "SELECT name FROM emp WHERE (dept = 1 AND salary > 10) OR (dept = 1 AND name = 'x')",
    ],
    "pushdown_predicates": [
        "SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept = d.id "
        "WHERE d.dname = 'eng' AND e.salary > 70",
        "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.id "
        "WHERE e.salary > 70",
        "SELECT * FROM (SELECT dept, count(*) AS n FROM emp GROUP BY dept) g WHERE g.dept = 2",
        "SELECT e.name FROM emp e JOIN dept d ON e.dept = d.id "
        "WHERE (d.dname = 'eng' AND e.salary > 1) OR (d.dname = 'ops' AND e.salary < 5)",
    ],
    "scan_predicates": [
        "SELECT name FROM emp WHERE id = 3",
        "SELECT name FROM emp WHERE id BETWEEN 2 AND 4 AND name LIKE 'c%'",
        "SELECT dname FROM dept WHERE id >= 10",
        "SELECT id FROM emp WHERE dept IS NULL OR dept IN (1, 2)",
        "SELECT id FROM emp WHERE salary IS NULL AND hired < date '2000-01-01'",
    ],
    "prune_columns": [
        "SELECT name FROM emp",
        "SELECT count(*) FROM emp",
        "SELECT d.dname FROM emp e JOIN dept d ON e.dept = d.id WHERE e.salary > 1",
    ],
}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    c = kudusql.connect(str(tmp_path_factory.mktemp("golden") / "db"))
    cur = c.cursor()
    cur.execute("CREATE TABLE emp (id INT PRIMARY KEY, name STRING, dept INT, "
                "salary DECIMAL(10,2), hired DATE) PARTITION BY HASH (id) PARTITIONS 3")
    cur.execute("CREATE TABLE dept (id INT PRIMARY KEY, dname STRING) PARTITION BY RANGE (id) "
                "(PARTITION VALUES < 10, PARTITION 10 <= VALUES < 100)")
    cur.execute("INSERT INTO dept VALUES (1, 'eng'), (2, 'ops'), (50, 'far')")
    cur.execute("INSERT INTO emp VALUES (1, 'ann', 1, 100.50, '1998-10-01'), "
                "(2, 'bob', 2, 80.25, NULL), (3, 'cat', NULL, NULL, '2001-02-03')")
    yield c
    c.close()


def _explain(db, sql: str, off: set[str]) -> list[str]:
    with disabled_rules(off):
        cur = db.cursor()
        cur.execute("EXPLAIN " + sql)
        lines = [r[0] for r in cur.fetchall()]
    # plan-only nodes print an object id: not part of the plan's shape
    return [re.sub(r"\b(subquery|subplan \w+) [0-9a-f]+", r"\1 <id>", x) for x in lines]


def _render(db, rule: str) -> tuple[str, int]:
    out, differing = [], 0
    for sql in QUERIES[rule]:
        on, off = _explain(db, sql, set()), _explain(db, sql, {rule})
        differing += on != off
        out += [f"-- query: {sql}", "-- all rules", *on, f"-- without {rule}", *off, ""]
    return "\n".join(out), differing


def test_every_rule_has_a_golden_file():
    assert set(QUERIES) == set(RULE_NAMES)


def test_rule_names_are_unique():
    """A name switches off exactly one entry of RULES (issue 28: `fold_constants` once
    named two)."""
    from planner.rules import RULES
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)), names
    assert tuple(names) == RULE_NAMES


@pytest.mark.parametrize("rule", sorted(QUERIES))
def test_explain_with_and_without_rule_matches_golden(db, rule):
    text, differing = _render(db, rule)
    path = GOLDEN / f"{rule}.txt"
    if REGENERATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run with KUDUSQL_REGEN_GOLDEN=1"
    assert text == path.read_text(), (
        f"EXPLAIN for rule {rule} changed; if intended, regenerate with "
        f"KUDUSQL_REGEN_GOLDEN=1 and review the diff of {path}")
    assert differing, f"no query in {path.name} plans differently without {rule}"


def test_rules_return_a_new_plan_and_leave_the_bound_one_as_it_was(tmp_path):
    """Plan nodes are frozen: optimize builds a new plan; the bound plan (what the plan
    cache keeps) reads the same before and after."""
    import dataclasses

    import sqlglot

    from engine.catalog import Catalog
    from planner import logical as L
    from planner.binder import Binder
    from planner.dialect import KuduSQL
    from planner.rules import optimize
    from planner.query import subquery_runner

    path = str(tmp_path / "db")
    c = kudusql.connect(path)
    c.cursor().execute("CREATE TABLE emp (id INT PRIMARY KEY, name STRING, dept INT) "
                       "PARTITION BY HASH (id) PARTITIONS 2")
    c.cursor().execute("CREATE TABLE dept (id INT PRIMARY KEY, dname STRING) "
                       "PARTITION BY HASH (id) PARTITIONS 2")
    c.close()
    catalog = Catalog.open(path)
    try:
        sql = ("SELECT e.name FROM emp e JOIN dept d ON e.dept = d.id "
               "WHERE d.dname = 'eng' AND e.id = 1 + 1 AND e.name IN (SELECT dname FROM dept) "
               "AND ((e.dept > 0 AND d.id > 1) OR (e.dept > 0 AND d.id < 9))")
        bound = Binder(catalog, sql, [], subquery_runner(catalog)).bind_query(
            sqlglot.parse_one(sql, read=KuduSQL))

        def text(out):
            return [line for n in L.walk(out.plan) for line in [n.label(), *L.describe(n)]]
        before = text(bound)
        for rule in RULE_NAMES:        # each rule alone, so no earlier rule copies for it
            alone = optimize(bound, catalog, disabled=frozenset(RULE_NAMES) - {rule})
            assert text(bound) == before, f"{rule} edited the plan it was given"
            assert text(alone) != before, f"{rule} did nothing here: the check is void"
        with pytest.raises(dataclasses.FrozenInstanceError):
            alone.plan.input = None

        # a scalar subquery: its plan hangs off a SubqueryRef expression that the optimized
        # plan shares with the bound one; re-pointing it in place edited the bound plan (the
        # plan cache's: fold_constants left `d.id > 2` in it)
        sql = ("SELECT e.name FROM emp e WHERE e.id = 1 + 1 AND e.dept = (SELECT max(d.id) "
               "FROM dept d WHERE d.id > 1 + 1 AND d.dname = 'eng' AND ((d.id > 0 AND "
               "d.dname > 'a') OR (d.id > 0 AND d.dname < 'z')))")
        bound = Binder(catalog, sql, [], subquery_runner(catalog)).bind_query(
            sqlglot.parse_one(sql, read=KuduSQL))

        def text_all(out):          # every node, the subqueries' too, and what refs them
            return [repr(n) for n in L.all_nodes(out.plan)] + \
                [line for n in L.all_nodes(out.plan) for line in [n.label(), *L.describe(n)]]
        assert any(L.subquery_refs(n) for n in L.walk(bound.plan)), "no SubqueryRef: void"
        before = text_all(bound)
        for rule in RULE_NAMES:
            alone = optimize(bound, catalog, disabled=frozenset(RULE_NAMES) - {rule})
            assert text_all(bound) == before, f"{rule} edited the bound plan's subquery"
            assert text_all(alone) != before, f"{rule} did nothing here: the check is void"
        optimize(bound, catalog)                        # all rules, one after the other
        assert text_all(bound) == before
    finally:
        catalog.close()
