"""GROUP BY keys that other keys determine (planner/executor/group_keys.py) are taken from
each group's first row instead of being hashed: which keys are dropped (a table's full
primary key, inner-join equalities; not a partial composite key, not a left join's ON,
not above a UNION), and answers that match DuckDB's, NULLs, text and floats
included, through inner, left and semi joins and with HAVING / GROUPING()."""

from __future__ import annotations

import random

import pytest

import kudusql
from planner.executor import aggregates
from tests.planner.duck_match import same_answers

duckdb = pytest.importorskip("duckdb")


def _lit(x) -> str:
    if x is None:
        return "NULL"
    if isinstance(x, str):
        return "'" + x.replace("'", "''") + "'"
    return repr(x)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("dependent_keys")))
    duck = duckdb.connect()
    cur = con.cursor()
    r = random.Random(29)
    tables = {
        # c: one row per key; o: orders of customers; p: a composite key (a, b)
        "c": ("ck INT NOT NULL, name VARCHAR, bal DOUBLE, nk INT, PRIMARY KEY (ck)",
              "ck INT, name VARCHAR, bal DOUBLE, nk INT",
              [(i, None if i % 7 == 0 else f"cust {i % 40}", r.choice([0.0, -0.0, 1.5, None]),
                i % 5) for i in range(300)]),
        "n": ("nk INT NOT NULL, nname VARCHAR, PRIMARY KEY (nk)", "nk INT, nname VARCHAR",
              [(i, f"nation {i}") for i in range(4)]),     # nk 4 has no nation
        "o": ("ok INT NOT NULL, ck INT, odate DATE, prio VARCHAR, PRIMARY KEY (ok)",
              "ok INT, ck INT, odate DATE, prio VARCHAR",
              [(i, r.randrange(0, 320), f"1995-0{1 + i % 9}-1{i % 10}", r.choice(["1-U", "2-H"]))
               for i in range(1500)]),
        "l": ("ok INT NOT NULL, ln INT NOT NULL, qty INT, PRIMARY KEY (ok, ln)",
              "ok INT, ln INT, qty INT",
              [(i // 4, i % 4, r.randrange(1, 50)) for i in range(5000)]),
    }
    for name, (ours, theirs, rows) in tables.items():
        cur.execute(f"CREATE TABLE {name} ({ours}) PARTITION BY HASH ({ours.split()[0]}) "
                    "PARTITIONS 2")
        duck.execute(f"CREATE TABLE {name} ({theirs})")
        for i in range(0, len(rows), 500):
            values = ", ".join("(" + ", ".join(_lit(x) for x in row) + ")"
                               for row in rows[i:i + 500])
            cur.execute(f"INSERT INTO {name} VALUES {values}")
            duck.execute(f"INSERT INTO {name} VALUES {values}")
    yield con, duck
    con.close()
    duck.close()


# (query, how many GROUP BY keys are hashed; None: none follows, all hashed)
CASES = [
    # c.ck determines c's columns, and by c.nk = n.nk nation's name (TPC-H Q10's shape)
    ("SELECT c.ck, c.name, c.bal, n.nname, sum(l.qty), count(*) FROM c, o, l, n "
     "WHERE c.ck = o.ck AND o.ok = l.ok AND c.nk = n.nk GROUP BY c.ck, c.name, c.bal, n.nname", 1),
    # l.ok = o.ok determines the order's columns (Q03's shape); the text keys go first
    ("SELECT l.ok, o.odate, o.prio, sum(l.qty) FROM o JOIN l ON l.ok = o.ok "
     "WHERE o.odate < DATE '1995-05-01' GROUP BY l.ok, o.odate, o.prio", 1),
    # through o.ck = c.ck: the order's key determines the customer (Q18's shape)
    ("SELECT c.name, c.ck, o.ok, o.odate, sum(l.qty) FROM c, o, l "
     "WHERE c.ck = o.ck AND o.ok = l.ok AND o.ok IN (SELECT ok FROM l WHERE qty > 45) "
     "GROUP BY c.name, c.ck, o.ok, o.odate HAVING sum(l.qty) > 20", 1),
    # a composite key determines only when whole: (ok, ln) -> qty, ok alone does not
    ("SELECT l.ok, l.ln, l.qty, count(*) FROM l JOIN o ON l.ok = o.ok "
     "GROUP BY l.ok, l.ln, l.qty", 2),
    ("SELECT l.ok, l.qty, count(*) FROM l JOIN o ON l.ok = o.ok GROUP BY l.ok, l.qty", None),
    # a left join's ON is no dependency (its NULL-extended rows), its left side's key is
    ("SELECT c.ck, c.name, n.nk, n.nname, count(*) FROM c LEFT JOIN n ON c.nk = n.nk "
     "GROUP BY c.ck, c.name, n.nk, n.nname", 3),
    ("SELECT c.nk, n.nname, count(*) FROM c LEFT JOIN n ON c.nk = n.nk "
     "GROUP BY c.nk, n.nname", None),
    # a GROUPING() call without sets, and an expression key beside the dependent ones
    ("SELECT o.ok, o.prio, o.ck % 3, grouping(o.prio), sum(l.qty) FROM o JOIN l ON o.ok = l.ok "
     "GROUP BY o.ok, o.prio, o.ck % 3", 2),
]


def _hashed(con, sql: str) -> int | None:
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + sql)
    for (line,) in cur.fetchall():
        if "GROUP BY keys; taken from each group's first row" in line:
            return int(line.split("hashed ")[1].split(" of ")[0])
    return None


@pytest.mark.parametrize("sql,hashed", CASES)
def test_dependent_keys_answer_as_duckdb(dbs, sql, hashed):
    if "grouping(" in sql:      # DuckDB refuses GROUPING() without grouping sets
        cur = dbs[0].cursor()
        cur.execute(sql)
        assert all(row[3] == 0 for row in cur.fetchall())
    else:
        same_answers(*dbs, sql)
    assert _hashed(dbs[0], sql) == hashed


def test_every_key_hashed_with_the_split_off_gives_the_same_rows(dbs, monkeypatch):
    con = dbs[0]
    sql = CASES[0][0]
    cur = con.cursor()
    cur.execute(sql)
    split = sorted(map(repr, cur.fetchall()))
    monkeypatch.setattr(aggregates, "split_groups", lambda node, catalog: (node.groups, []))
    cur.execute(sql)
    assert sorted(map(repr, cur.fetchall())) == split
    assert _hashed(con, sql) is None


def test_a_key_is_not_unique_above_a_union(dbs):
    sql = ("SELECT x.ck, x.name, count(*) FROM (SELECT ck, name FROM c UNION ALL "
           "SELECT ck, 'other' FROM c) x GROUP BY x.ck, x.name")
    same_answers(*dbs, sql)
    assert _hashed(dbs[0], sql) is None
