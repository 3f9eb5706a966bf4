"""The front door (issue 14): every statement kind the server accepts is parsed once, by the
KuduSQL dialect, into a node; the session dispatches on the node's type. Here: each kind's
node, that its text prints back, the positions of errors inside a command, and the
session's dispatch (its own commands, a front end's handlers, 0A000 for a command that
needs a server)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from planner import commands as C
from planner.ddl import parse
from planner.dialect import KuduDeallocate, KuduExecute, KuduPrepare, KuduShow, KuduSQL
from planner.errors import SqlError
from planner.result import StatementResult
from session import Database, Statement

KINDS = [
    ("BEGIN", C.KuduTransaction, {"verb": "BEGIN"}),
    ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE", C.KuduTransaction, {"verb": "BEGIN"}),
    ("COMMIT", C.KuduTransaction, {"verb": "COMMIT"}),
    ("END", C.KuduTransaction, {"verb": "COMMIT"}),
    ("ROLLBACK", C.KuduTransaction, {"verb": "ROLLBACK"}),
    ("ABORT WORK", C.KuduTransaction, {"verb": "ROLLBACK"}),
    ("SAVEPOINT s1", C.KuduTransaction, {"verb": "SAVEPOINT", "name": "s1"}),
    ("RELEASE SAVEPOINT s1", C.KuduTransaction, {"verb": "RELEASE", "name": "s1"}),
    ("ROLLBACK TO SAVEPOINT s1", C.KuduTransaction, {"verb": "ROLLBACK TO", "name": "s1"}),
    ("SET search_path TO \"$user\", public", C.KuduSet,
     {"name": "search_path", "value": "$user, public"}),
    ("SET TIME ZONE 'UTC'", C.KuduSet, {"name": "TimeZone", "value": "UTC"}),
    ("SET query_mem_limit = DEFAULT", C.KuduSet, {"name": "query_mem_limit", "value": None}),
    ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", C.KuduSet,
     {"name": "default_transaction_read_only", "value": "on", "noop": None}),
    ("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE", C.KuduSet,
     {"noop": True}),
    ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE", C.KuduSet,
     {"name": "transaction_read_only", "value": "off", "noop": False,
      "verb": "SET TRANSACTION"}),
    ("SET TRANSACTION READ ONLY", C.KuduSet, {"name": "transaction_read_only", "value": "on"}),
    ("START TRANSACTION READ ONLY, ISOLATION LEVEL SERIALIZABLE", C.KuduTransaction,
     {"verb": "BEGIN", "read_only": True, "word": "START"}),
    ("BEGIN ISOLATION LEVEL READ COMMITTED", C.KuduTransaction, {"read_only": None}),
    ("BEGIN TRANSACTION READ WRITE", C.KuduTransaction, {"read_only": False}),
    ("RESET ALL", C.KuduReset, {"name": None}),
    ("RESET statement_timeout", C.KuduReset, {"name": "statement_timeout"}),
    ("SHOW ALL", C.KuduShowSetting, {"name": None}),
    ("SHOW TRANSACTION ISOLATION LEVEL", C.KuduShowSetting,
     {"name": "transaction_isolation"}),
    ("SHOW TABLES", KuduShow, {"kind": "TABLES"}),
    ("SHOW TABLETS t", KuduShow, {"kind": "TABLETS"}),
    ("CREATE USER u WITH PASSWORD 'pw' SUPERUSER", C.KuduRole,
     {"verb": "CREATE ROLE", "names": ("u",),
      "options": (("password", "pw"), ("superuser", True))}),
    ("ALTER ROLE u NOLOGIN", C.KuduRole, {"verb": "ALTER ROLE", "options": (("login", False),)}),
    ("DROP USER IF EXISTS a, \"B\"", C.KuduRole,
     {"verb": "DROP ROLE", "names": ("a", "B"), "if_exists": True}),
    ("DECLARE c BINARY CURSOR WITH HOLD FOR SELECT 1", C.KuduDeclare,
     {"name": "c", "binary": True, "hold": True, "query_offset": 38}),
    ("FETCH BACKWARD 2 FROM c", C.KuduFetch, {"kind": "backward", "count": 2, "move": False}),
    ("MOVE LAST IN c", C.KuduFetch, {"kind": "absolute", "count": -1, "move": True}),
    ("CLOSE ALL", C.KuduClose, {"name": None}),
    ("DISCARD ALL", C.KuduDiscard, {"what": "ALL"}),
    ("UNLISTEN *", C.KuduListen, {"verb": "UNLISTEN"}),
    ("LISTEN ch", C.KuduListen, {"verb": "LISTEN", "channel": "ch"}),
    ("COPY t (a, b) FROM STDIN WITH (FORMAT csv)", C.KuduCopy, {}),
    ("COPY (SELECT 1) TO STDOUT", C.KuduCopy, {"query_text": "SELECT 1"}),
    ("EXPLAIN ANALYZE SELECT 1", C.KuduExplain, {"analyze": True, "offset": 15}),
    ("UPSERT INTO t VALUES (1, 'a')", C.KuduUpsert, {}),
    ("PREPARE p (int) AS UPSERT INTO t VALUES ($1, 'a')", KuduPrepare, {}),
    ("EXECUTE p (1)", KuduExecute, {}),
    ("DEALLOCATE ALL", KuduDeallocate, {}),
]


@pytest.mark.parametrize("sql, node_type, args", KINDS, ids=[k[0][:30] for k in KINDS])
def test_each_statement_kind_is_one_node(sql, node_type, args):
    (node,) = parse(sql)
    assert type(node) is node_type
    for k, v in args.items():
        assert node.args.get(k) == v, k
    if isinstance(node, C.KuduCommand):
        assert node.sql(dialect=KuduSQL) == sql        # the generator prints it back


def test_statements_inside_commands_are_parsed_with_them():
    (d,) = parse("DECLARE c CURSOR FOR SELECT k FROM t WHERE k > 1")
    assert d.args["query"].sql() == "SELECT k FROM t WHERE k > 1"
    (cp,) = parse("COPY t (a) TO STDOUT")
    assert cp.args["query"].sql() == 'SELECT "a" FROM t'
    (e,) = parse("EXPLAIN (ANALYZE) UPSERT INTO t VALUES (1)")
    assert isinstance(e.this, C.KuduUpsert)


@pytest.mark.parametrize("sql, position", [
    ("EXPLAIN SELEC 1", 9),                       # EXPLAIN's statement
    ("DECLARE c CURSOR FOR SELEC 1", 22),         # DECLARE's query
    ("COPY (SELEC 1) TO STDOUT", 7),              # COPY's query
    ("SET x", 6),                                 # the command's own grammar
    ("FETCH 1 FROM c d", 16),
    ("  /* c */ CLOSE a b", 19),                  # after leading blanks and a comment
    ("UPSERT t VALUES (1)", 8),                   # UPSERT needs INTO, as INSERT does
])
def test_errors_inside_commands_point_into_the_statement(sql, position):
    with pytest.raises(SqlError) as ei:
        parse(sql)
    assert ei.value.sqlstate == "42601" and ei.value.position == position


def test_command_grammars_leave_the_statements_inside_to_the_dialect():
    """A command's grammar reads its own words; the query inside (DECLARE's, COPY's) may
    use any operator, and a `)` in a string does not end COPY's (query)."""
    (d,) = parse("DECLARE c CURSOR FOR SELECT 'a' || 'b' ~ 'x'")
    assert isinstance(d.args["query"], exp.Select)
    (cp,) = parse("COPY (SELECT $$)$$ || 'b' @> 'c') TO STDOUT")
    assert cp.args["spec"].query == "SELECT $$)$$ || 'b' @> 'c'"
    with pytest.raises(SqlError) as ei:           # where the grammar reads it: an error
        parse("CLOSE a ~")
    assert (ei.value.sqlstate, ei.value.position) == ("42601", 9)


@pytest.mark.parametrize("sql, analyze, verbose, statement", [
    ("EXPLAIN SELECT 1", False, False, "SELECT 1"),
    ("EXPLAIN ANALYSE VERBOSE SELECT 1", True, True, "SELECT 1"),
    ("EXPLAIN VERBOSE SELECT 1", False, True, "SELECT 1"),
    ("EXPLAIN /* c */ ANALYZE -- d\n SELECT 1", True, False, "SELECT 1"),
    ("EXPLAIN (ANALYZE false) SELECT 1", False, False, "SELECT 1"),
    ("EXPLAIN (ANALYZE off, VERBOSE) SELECT 1", False, True, "SELECT 1"),
    ("EXPLAIN (analyze 1, costs false, buffers, timing on, summary 'true', format text) "
     "SELECT 1", True, False, "SELECT 1"),
    ("EXPLAIN (SELECT 1)", False, False, "(SELECT 1)"),      # a query, not options
    ("explain (Analyze) select 'a' || 'b'", True, False, "SELECT 'a' || 'b'"),
])
def test_explain_options_are_read_by_its_grammar(sql, analyze, verbose, statement):
    (e,) = parse(sql)
    assert (e.args["analyze"], e.args["verbose"]) == (analyze, verbose)
    assert e.this.sql(dialect=KuduSQL, comments=False) == statement
    assert e.args["inner"].strip() == sql[e.args["offset"]:].strip()


@pytest.mark.parametrize("sql, sqlstate, message, position", [
    ("EXPLAIN (COSTS, FOO) SELECT 1", "42601", 'unrecognized EXPLAIN option "foo"', 17),
    ("EXPLAIN (ANALYZE maybe) SELECT 1", "42601", "analyze requires a Boolean value", 18),
    ("EXPLAIN (FORMAT JSON) SELECT 1", "0A000",
     "EXPLAIN (FORMAT JSON) is not supported: kudusql writes plans as text (FORMAT TEXT)", 17),
    ("EXPLAIN (FORMAT csv) SELECT 1", "22023",
     'unrecognized value for EXPLAIN option "format": "csv"', 17),
    ("EXPLAIN (FORMAT) SELECT 1", "42601", "format requires a parameter", 10),
    ("EXPLAIN (TIMING) SELECT 1", "22023", "EXPLAIN option TIMING requires ANALYZE", None),
    ("EXPLAIN () SELECT 1", "42601", 'syntax error at or near ")"', 10),
    ("EXPLAIN (ANALYZE SELECT 1", "42601", "analyze requires a Boolean value", 18),
    ("EXPLAIN VERBOSE ANALYZE SELECT 1", "42601", 'syntax error at or near "ANALYZE"', 17),
    ("EXPLAIN ANALYZE", "42601", "syntax error at end of input", 16),
    ("EXPLAIN (ANALYZE) SELEC 1", "42601", 'syntax error at or near "SELEC"', 19),
])
def test_explain_option_errors_are_postgresqls(sql, sqlstate, message, position):
    with pytest.raises(SqlError) as ei:
        parse(sql)
    assert (ei.value.sqlstate, ei.value.message, ei.value.position) == \
        (sqlstate, message, position)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    with Database.open(str(tmp_path_factory.mktemp("front")), maintenance=False) as d:
        d.session().execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING) "
                            "PARTITION BY HASH (k) PARTITIONS 2")
        yield d


def test_upsert_is_a_statement_not_a_text_swap(db):
    s = db.session()
    s.execute("UPSERT INTO t VALUES (1, 'a')")
    s.execute("PREPARE up (int, text) AS UPSERT INTO t VALUES ($1, $2)")
    s.execute("EXECUTE up (1, 'b')")
    s.execute("EXECUTE up (2, 'c')")
    assert s.execute("SELECT k, v FROM t ORDER BY k")[0].table.to_pylist() == [
        {"k": 1, "v": "b"}, {"k": 2, "v": "c"}]
    plan = s.execute("EXPLAIN SELECT v FROM t WHERE k = 1")[0].table.column(0).to_pylist()
    assert plan
    with pytest.raises(SqlError) as ei:          # no word boundary swap: UPSERTS is no verb
        s.execute("UPSERTS INTO t VALUES (3, 'x')")
    assert ei.value.sqlstate == "42601" and ei.value.position == 1
    s.execute("DELETE FROM t WHERE k IN (1, 2)")


def test_commands_that_need_a_server_are_0A000_in_an_embedded_session(db):
    s = db.session()
    for sql, word in (("SHOW search_path", "SHOW"), ("DECLARE c CURSOR FOR SELECT 1", "DECLARE"),
                      ("COPY t TO STDOUT", "COPY"), ("CREATE USER u", "CREATE"),
                      ("SAVEPOINT a", "SAVEPOINT"), ("LISTEN ch", "LISTEN")):
        with pytest.raises(SqlError) as ei:
            s.execute(sql)
        assert (ei.value.sqlstate, ei.value.message) == ("0A000", f"{word} is not supported")
    assert [r.command for r in s.execute("BEGIN; UNLISTEN *; SET x = 1; COMMIT")] == [
        "BEGIN", "UNLISTEN", "SET", "COMMIT"]
    (r,) = s.execute("ROLLBACK")
    assert r.notices                             # never claims to undo


def test_a_front_end_handler_runs_before_the_session(db):
    s = db.session()
    seen = []

    def handler(stmt, params):
        seen.append((type(stmt.node), stmt.text, stmt.offset))
        return StatementResult("SHOW")

    s.handlers[C.KuduShowSetting] = handler
    assert [r.command for r in s.execute("SELECT 1;  SHOW work_mem")] == ["SELECT", "SHOW"]
    assert seen == [(C.KuduShowSetting, "SHOW work_mem", 11)]


def test_a_statement_is_parsed_once_and_the_planner_gets_a_copy():
    st = Statement("SELECT 1 AS a")
    node = st.node
    assert st.node is node and Statement("SELECT 1 AS a").node is node   # cached by text
    first, second = st.ast(), st.ast()
    assert first is not node and second is not first and first == node
    first.set("expressions", [])                 # what the planner does to its copy ...
    assert st.ast() == node and node.expressions  # ... never reaches the shared node
