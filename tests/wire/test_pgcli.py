"""pgcli against the real server, through pgcli's own code: its executor (PGExecute, psycopg
3) connects, every completion refresher pgcli runs at startup loads schemas, tables,
columns, functions, types and databases with pgcli's real catalog queries, and the
completer built from them then completes table and column names; pgspecial's \\dt and \\d
run through the same executor, and so does a plain query and an error."""

from __future__ import annotations

import pytest

pytest.importorskip("pgcli")

from pgcli.completion_refresher import CompletionRefresher  # noqa: E402
from pgcli.pgcompleter import PGCompleter  # noqa: E402
from pgcli.pgexecute import PGExecute  # noqa: E402
from pgspecial.main import PGSpecial  # noqa: E402
from prompt_toolkit.document import Document  # noqa: E402


@pytest.fixture(scope="module")
def pgexec(server):
    s = server.db.session()
    s.execute("CREATE TABLE orders (order_id BIGINT PRIMARY KEY, customer STRING, "
              "amount DECIMAL(10,2)) PARTITION BY HASH (order_id) PARTITIONS 2")
    s.execute("INSERT INTO orders VALUES (1, 'ann', 9.50), (2, 'bob', 20.00)")
    ex = PGExecute(database="kudusql", user="kudusql", password=None, host="127.0.0.1",
                   port=server.port, dsn=None)
    yield ex
    ex.conn.close()


def _complete(completer, text, pos=None):
    doc = Document(text=text, cursor_position=len(text) if pos is None else pos)
    return {c.text for c in completer.get_completions(doc, None)}


def test_completion_refresh_then_completions(pgexec):
    completer = PGCompleter(smart_completion=True, pgspecial=PGSpecial())
    for refresh in CompletionRefresher.refreshers.values():
        refresh(completer, pgexec)                  # each runs pgcli's catalog queries
    assert list(completer.dbmetadata["tables"]["public"]["orders"]) == [
        "order_id", "customer", "amount"]
    assert "kudusql" in completer.databases
    assert "orders" in _complete(completer, "SELECT * FROM ord")
    assert "customer" in _complete(completer, "SELECT cu FROM orders", 9)
    assert "amount" in _complete(completer, "SELECT * FROM orders WHERE am")
    assert "UPPER" in _complete(completer, "SELECT upp")


def test_special_commands_and_queries(pgexec):
    special = PGSpecial()
    out = list(pgexec.run("\\dt", pgspecial=special))
    title, rows, headers, status, *_ = out[0]
    assert "orders" in [r[1] for r in rows], rows
    out = list(pgexec.run("\\d orders", pgspecial=special))
    cols = [r[0] for r in out[0][1]]
    assert cols == ["order_id", "customer", "amount"], cols
    out = list(pgexec.run("SELECT customer, amount FROM orders ORDER BY order_id"))
    assert [tuple(r) for r in out[0][1]] == [("ann", pytest.approx(9.5)),
                                            ("bob", pytest.approx(20.0))]
    with pytest.raises(Exception) as e:
        list(pgexec.run("SELECT nosuch FROM orders", on_error_resume=False))
    assert getattr(e.value, "sqlstate", None) == "42703"
