"""shell.backend: the embedded and the remote backend give the shell the same results,
errors (with positions) and cancellation. The remote tests run the real wire server
(`wire.server.ServerThread`) in this process and connect with psycopg 3."""

from __future__ import annotations

import importlib.util
import threading
import time

import pyarrow as pa
import pytest

from shell.backend import BackendError, EmbeddedBackend, is_dsn, open_backend

HAVE_SERVER = importlib.util.find_spec("wire.server") is not None and \
    importlib.util.find_spec("psycopg") is not None


@pytest.fixture
def server(data_dir):
    """The wire server over `data_dir`, on a free port."""
    if not HAVE_SERVER:
        pytest.skip("no wire server (wire.server) or no psycopg")
    from kudusql.session import Database
    from wire.server import ServerConfig, ServerThread
    db = Database.open(data_dir, maintenance=False)
    srv = ServerThread(db, ServerConfig(port=0)).start()
    yield f"postgresql://kudusql@127.0.0.1:{srv.port}/kudusql"
    srv.stop()
    db.close()


@pytest.fixture
def remote(server):
    from shell.backend import RemoteBackend
    b = RemoteBackend(server)
    yield b
    b.close()


@pytest.fixture(params=["embedded", "remote"])
def any_backend(request, data_dir):
    if request.param == "embedded":
        b = EmbeddedBackend(data_dir, maintenance=False)
        yield b
        b.close()
    else:
        yield request.getfixturevalue("remote")


def test_open_backend_picks_by_target(tmp_path):
    assert is_dsn("postgresql://u@h:5433/db") and is_dsn("postgres://h/db")
    assert is_dsn("host=localhost port=5433") and not is_dsn(str(tmp_path))
    b = open_backend(str(tmp_path / "new"), maintenance=False)
    assert isinstance(b, EmbeddedBackend) and b.name == "new"
    b.close()


def test_rows_come_back_as_arrow(any_backend):
    (r,) = any_backend.execute("SELECT host, ts, value, note FROM metrics ORDER BY host")
    assert r.status == "SELECT 3" and r.command == "SELECT"
    assert r.table.schema.types == [pa.string(), pa.timestamp("us"), pa.float64(), pa.string()]
    assert r.table.column("host").to_pylist() == ["a", "b", "c"]
    assert r.table.column("note").to_pylist() == [None, "x", "line one\nline two"]


def test_statements_without_rows_give_their_tag(any_backend):
    (r,) = any_backend.execute("INSERT INTO metrics VALUES ('z', '2025-05-05', 1, NULL)")
    assert r.status == "INSERT 0 1" and r.table is None and r.command == "INSERT"
    (r,) = any_backend.execute("DELETE FROM metrics WHERE host = 'z'")
    assert r.status == "DELETE 1"


def test_several_statements_give_several_results(any_backend):
    rs = any_backend.execute("SELECT 1 AS a; SELECT 'x' AS b, 2 AS c")
    assert [r.columns for r in rs] == [["a"], ["b", "c"]]


def test_errors_carry_sqlstate_and_position(any_backend):
    sql = "SELECT host,\n  nope FROM metrics"
    with pytest.raises(BackendError) as e:
        any_backend.execute(sql)
    assert e.value.sqlstate == "42703" and "nope" in e.value.message
    assert e.value.position == sql.index("nope") + 1


def test_notices(any_backend):
    (r,) = any_backend.execute("ROLLBACK")
    assert r.status == "ROLLBACK" and len(r.notices) == 1


def test_metadata_for_completion(any_backend):
    assert any_backend.tables() == ["metrics"]
    assert any_backend.columns("metrics") == ["host", "ts", "value", "note"]
    assert any_backend.columns("nope") == []


def test_metadata_while_a_statement_runs(any_backend, slow_scans):
    """Completion refreshes run beside a statement: tables() must not wait for it."""
    done = threading.Event()

    def run():
        try:
            any_backend.execute("SELECT count(*) FROM metrics")
        except BackendError:
            pass
        done.set()

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    assert any_backend.tables() == ["metrics"]
    assert time.monotonic() - t0 < 1.0 and not done.is_set()
    any_backend.cancel()
    t.join(10)


def test_cancel_stops_a_running_statement(any_backend, slow_scans):
    errors: list[BackendError] = []

    def run():
        try:
            any_backend.execute("SELECT * FROM metrics a, metrics b, metrics c")
        except BackendError as e:
            errors.append(e)

    t0 = time.monotonic()
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)
    any_backend.cancel()
    t.join(10)
    assert errors and errors[0].sqlstate == "57014", errors
    assert time.monotonic() - t0 < 3.0
    (r,) = any_backend.execute("SELECT 1 AS ok")           # the connection is still usable
    assert r.table.column("ok").to_pylist() == [1]


def test_a_cancel_between_begin_and_execute_is_not_lost(data_dir, slow_scans):
    """Ctrl-C after the shell started a statement but before its worker thread reached the
    engine cancelled nothing (the session cleared the flag as the statement began): a
    loaded machine made tests/shell/test_cli.py's SIGINT test exit 0. A cancel before
    `begin` still belongs to no statement."""
    b = EmbeddedBackend(data_dir, maintenance=False)
    try:
        b.cancel()                                   # stale: before begin, forgotten
        (r,) = b.execute("SELECT count(*) AS n FROM metrics")
        assert r.table.column("n").to_pylist() == [3]
        b.begin()
        b.cancel()                                   # the worker has not started yet
        with pytest.raises(BackendError) as e:
            b.execute("SELECT * FROM metrics a, metrics b")
        assert e.value.sqlstate == "57014"
        (r,) = b.execute("SELECT 1 AS ok")            # and the next statement runs
        assert r.table.column("ok").to_pylist() == [1]
    finally:
        b.close()


def test_row_errors_embedded(backend):
    (r,) = backend.execute("INSERT INTO metrics VALUES ('a', '2025-01-01 10:00', 1, NULL), "
                           "('q', '2025-01-01 10:00', 1, NULL)")
    assert r.status == "INSERT 0 1"
    assert [(f.ordinal, f.sqlstate) for f in r.row_errors] == [(1, "23505")]
    assert r.row_errors[0].key == ("a", "2025-01-01 10:00")


def test_row_errors_remote_arrive_as_an_error_with_detail(remote):
    with pytest.raises(BackendError) as e:
        remote.execute("INSERT INTO metrics VALUES ('a', '2025-01-01 10:00', 1, NULL), "
                       "('q', '2025-01-01 10:00', 1, NULL)")
    assert e.value.sqlstate == "23505" and e.value.detail


def test_remote_types(remote):
    (r,) = remote.execute("SELECT 1.50::decimal(10,2) AS d, DATE '2020-01-01' AS dt, "
                          "true AS b, NULL AS n, 1.5::real AS f")
    assert r.table.to_pylist()[0]["d"].as_tuple().exponent == -2
    assert [f.type for f in r.table.schema][1:] == [
        pa.date32(), pa.bool_(), pa.string(), pa.float32()]


def test_remote_connection_failure():
    if not HAVE_SERVER:
        pytest.skip("no psycopg")
    from shell.backend import RemoteBackend
    with pytest.raises(BackendError) as e:
        RemoteBackend("postgresql://kudusql@127.0.0.1:1/kudusql?connect_timeout=2")
    assert e.value.sqlstate == "08006"


def test_interactive_shell_over_the_wire(server, drive, slow_scans):
    """The REPL on a RemoteBackend: \\d and a Ctrl-C that sends a real CancelRequest."""
    from shell.backend import RemoteBackend
    b = RemoteBackend(server)
    try:
        d = drive(b)
        d.type("\\d metrics")
        d.send(d.ENTER)
        d.wait_for(r"Tablets: 4, replication factor 1")
        d.type("SELECT * FROM metrics a, metrics b;")
        d.send(d.ENTER)
        d.wait_for(r"running 1\.\d s", 5)
        d.send(d.CTRL_C)
        d.wait_for(r"ERROR:  canceling statement due to user request \(SQLSTATE 57014\)")
        d.type("SELECT 'alive' AS s;")
        d.send(d.ENTER)
        d.wait_for(r" alive\n\(1 row\)")
        d.finish()
    finally:
        b.close()


def test_views_in_the_shell(any_backend):
    """\\dv lists views, \\d describes one (columns and definition), \\dt lists none of
    them; embedded and over the wire alike."""
    from shell.repl import Shell
    import io
    any_backend.execute("CREATE VIEW busy AS SELECT host, max(value) AS peak FROM metrics "
                        "GROUP BY host")
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(any_backend, stdout=out, stderr=err)
    assert shell.run_script("\\dv\n\\d busy\n\\dt\n"), err.getvalue()
    text = out.getvalue()
    assert "List of views\n Name\n------\n busy\n(1 row)" in text
    assert 'View "busy"' in text and " peak   | DOUBLE PRECISION" in text
    assert "View definition:\n  SELECT host, max(value) AS peak FROM metrics GROUP BY host" \
        in text
    assert " busy" not in text.split("List of tables")[1]
    any_backend.execute("DROP VIEW busy")
