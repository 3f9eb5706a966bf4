"""`kudusql shell` / `python -m shell` without a terminal: -c, -f, standard input, exit
statuses as psql's (0 ok, also a file that went on after errors; 1 a -c failed; 2 no
connection; 3 a script stopped by ON_ERROR_STOP), checked against psql itself."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import shutil

import psycopg
import pytest

import kudusql
from shell.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_command(capsys, data_dir):
    status, out, err = run(capsys, "-D", data_dir, "--no-maintenance", "-c",
                           "SELECT host, value FROM metrics WHERE value > 1 ORDER BY host")
    assert (status, err) == (0, "")
    assert out == " host | value\n------+-------\n b    |   1.5\n c    |   2.5\n(2 rows)\n\n"


def test_commands_and_files_run_in_order(capsys, data_dir, tmp_path):
    f = tmp_path / "two.sql"
    f.write_text("SELECT 2 AS two;\n")
    status, out, _ = run(capsys, "-D", data_dir, "--no-maintenance", "-c", "SELECT 1 AS one",
                         "-f", str(f), "-c", "\\format csv\nSELECT 3 AS three")
    assert status == 0
    assert out.index(" one") < out.index(" two") < out.index("Output format is csv.")
    assert out.endswith("three\n3\n")


def test_a_failing_statement_exits_1_and_stops(capsys, data_dir):
    status, out, err = run(capsys, "-D", data_dir, "--no-maintenance",
                           "-c", "SELECT 1 AS one; SELECT nope FROM metrics; SELECT 3 AS three")
    assert status == 1
    assert " one" in out and "three" not in out
    assert err == ('ERROR:  column "nope" does not exist (SQLSTATE 42703)\n'
                   "LINE 1: SELECT nope FROM metrics\n"
                   "               ^\n")


def test_a_failing_file_goes_on_and_names_file_and_line(capsys, data_dir, tmp_path):
    """psql: a file goes on after an error (status 0), each error prefixed FILE:LINE."""
    f = tmp_path / "bad.sql"
    f.write_text("SELECT 1 AS one;\nSELECT 2 AS two;\nSELEC 3;\nSELECT 4 AS four;\n")
    status, out, err = run(capsys, "-D", data_dir, "--no-maintenance", "-f", str(f))
    assert status == 0 and err.startswith(f"kudusql:{f}:3: ERROR:  ")
    assert " four" in out
    status, _out, err = run(capsys, "-D", data_dir, "-f", str(tmp_path / "missing.sql"))
    assert status == 1 and "No such file" in err


@pytest.mark.parametrize("how", [("-v", "ON_ERROR_STOP=1"), ("--set", "ON_ERROR_STOP=on"),
                                 "\\set ON_ERROR_STOP on"])
def test_on_error_stop_stops_with_status_3(capsys, data_dir, tmp_path, how):
    f = tmp_path / "bad.sql"
    head = how + "\n" if isinstance(how, str) else ""
    f.write_text(head + "SELECT 1 AS one;\nSELECT nope;\nSELECT 4 AS four;\n")
    opts = list(how) if isinstance(how, tuple) else []
    status, out, err = run(capsys, "-D", data_dir, "--no-maintenance", *opts, "-f", str(f),
                           "-c", "SELECT 5 AS five")
    assert status == 3
    assert " one" in out and " four" not in out and " five" not in out
    line = 3 if head else 2
    assert err.startswith(f'kudusql:{f}:{line}: ERROR:  column "nope" does not exist')


def test_the_status_is_the_last_actions_as_psqls(capsys, data_dir, tmp_path):
    good = tmp_path / "good.sql"
    good.write_text("SELECT 1;\n")
    assert run(capsys, "-D", data_dir, "-c", "SELECT nope", "-f", str(good))[0] == 0
    assert run(capsys, "-D", data_dir, "-f", str(good), "-c", "SELECT nope")[0] == 1
    status, _out, err = run(capsys, "-D", data_dir, "-v", "ON_ERROR_STOP=maybe", "-c", "SELECT 1")
    assert status == 1 and 'unrecognized value "maybe" for "ON_ERROR_STOP"' in err


PSQL = shutil.which("psql")


@pytest.mark.skipif(PSQL is None, reason="psql is not installed")
@pytest.mark.parametrize("stop", [None, "1", "off"])
def test_f_behaves_as_psql_f(capsys, tmp_path, stop):
    """Differential: the same script through psql 15 (against `kudusql serve`) and through
    `kudusql shell -f` (embedded): the same exit status, the same statements run, the same
    errors at the same lines (psql: prefixes, ours kudusql:)."""
    from tests.wire.conftest import start_server, stop_server
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE t (k INT PRIMARY KEY);\nINSERT INTO t VALUES (1);\n"
                      "SELECT nope FROM t;\nINSERT INTO t VALUES (2);\n"
                      "SELEC 1;\n\nINSERT INTO t VALUES (3);\n")
    opts = ["-v", f"ON_ERROR_STOP={stop}"] if stop else []
    srv = start_server(tmp_path / "served")
    try:
        env = dict(os.environ, PSQLRC="/dev/null", PGCONNECT_TIMEOUT="10")
        p = subprocess.run([PSQL, "-X", "-h", "127.0.0.1", "-p", str(srv.port), "-U",
                            "kudusql", *opts, "-f", str(script)], capture_output=True,
                           text=True, env=env, timeout=60, check=False)
        with psycopg.connect(srv.dsn(), autocommit=True) as c:
            psql_rows = c.execute("SELECT k FROM t ORDER BY k").fetchall()
    finally:
        stop_server(srv)
    status, _out, err = run(capsys, "-D", str(tmp_path / "embedded"), "--no-maintenance",
                            *opts, "-f", str(script))
    with kudusql.connect(str(tmp_path / "embedded")) as c:
        cur = c.cursor()
        cur.execute("SELECT k FROM t ORDER BY k")
        ours = cur.fetchall()
    assert status == p.returncode and ours == psql_rows, (status, p.returncode, p.stderr)

    def errors(text, prefix):
        return [ln.split(" ERROR:")[0].replace(prefix, "") for ln in text.splitlines()
                if " ERROR:" in ln]
    assert errors(err, "kudusql:") == errors(p.stderr, "psql:")
    assert len(errors(err, "kudusql:")) == (1 if stop == "1" else 2)


def test_sql_on_standard_input(capsys, data_dir, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        "-- a script\nSELECT count(*) AS n\n  FROM metrics;\n\\x\nSELECT 'a' AS k\n"))
    status, out, _ = run(capsys, "-D", data_dir, "--no-maintenance")
    assert status == 0
    assert out == (" n\n---\n 3\n(1 row)\n\nExpanded display is on.\n"
                   "-[ RECORD 1 ]\nk | a\n\n")         # the last statement needs no `;`


def test_formats_from_the_command_line(capsys, data_dir):
    status, out, _ = run(capsys, "-D", data_dir, "--format", "json", "--no-maintenance",
                         "-c", "SELECT host FROM metrics WHERE host = 'a'")
    assert (status, out) == (0, '[\n{"host": "a"}\n]\n')
    status, out, _ = run(capsys, "-D", data_dir, "-x", "--null", "NULL", "--no-maintenance",
                         "-c", "SELECT note FROM metrics WHERE host = 'a'")
    assert out == "-[ RECORD 1 ]\nnote | NULL\n\n"


def test_no_connection_exits_2(capsys):
    pytest.importorskip("psycopg")
    status, _out, err = run(capsys, "postgresql://kudusql@127.0.0.1:1/x?connect_timeout=2",
                            "-c", "SELECT 1")
    assert status == 2 and err.startswith("ERROR:  could not connect")


def test_python_dash_m_shell_reads_a_pipe(data_dir):
    """The real entry point in a child process: SQL piped in, exit status out."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "shell", "-D", data_dir, "--no-maintenance"],
                       input="SELECT 'piped' AS p;\nSELECT nope;\nSELECT 'never' AS n;\n",
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
                       check=False)
    assert p.returncode == 0                        # psql: standard input goes on
    assert p.stdout.startswith("   p\n-------\n piped\n(1 row)\n\n") and " never\n" in p.stdout
    assert p.stderr.startswith('kudusql:<stdin>:2: ERROR:  column "nope" does not exist')


def _sigint_as_a_terminal_gives_it() -> None:
    """In the child before exec: SIGINT delivered and handled by default, as a shell started
    from a terminal has it. SIG_IGN is inherited across exec (and Python then leaves SIGINT
    ignored), and a shell starts background jobs (`pytest &`) with SIGINT ignored: run that
    way, the suite failed here every time (the shell printed nothing on stderr and ran to the
    end), in the foreground never."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_sigint_cancels_the_running_statement_of_a_script(data_dir):
    """Ctrl-C (SIGINT) during -c: a real cancel, the statement fails with 57014, exit 1."""
    from shell.backend import EmbeddedBackend
    b = EmbeddedBackend(data_dir, maintenance=False)
    b.execute("CREATE TABLE slow_t (k INT NOT NULL, PRIMARY KEY (k)) "
              "PARTITION BY HASH (k) PARTITIONS 4")
    b.execute("INSERT INTO slow_t VALUES " + ", ".join(f"({k})" for k in range(100)))
    b.close()
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "shell", "slow_shell.py"),
                          "-D", data_dir, "--no-maintenance",
                          "-c", "SELECT 'started' AS s", "-c", "SELECT * FROM slow_t a, slow_t b"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=ROOT, preexec_fn=_sigint_as_a_terminal_gives_it)
    try:
        assert p.stdout.readline() == "    s\n"          # the first command ran
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    # (a failure seen once in a full run on a loaded machine exited 0; the output says how)
    assert p.returncode == 1, (p.returncode, err, out[:300], out.count("\n"))
    assert "Cancel request sent" in err
    assert "canceling statement due to user request (SQLSTATE 57014)" in err


def test_kudusql_shell_subcommand(capsys, data_dir):
    cli = pytest.importorskip("kudusql.cli")
    assert cli.main(["shell", "-D", data_dir, "--no-maintenance", "-c",
                     "SELECT count(*) AS n FROM metrics"]) == 0
    assert capsys.readouterr().out == " n\n---\n 3\n(1 row)\n\n"


def test_syntax_errors_in_postgres_words_with_caret_and_hint(capsys, data_dir):
    status, _, err = run(capsys, "-D", data_dir, "--no-maintenance", "-c", "SELEC * FROM metrics")
    assert status == 1
    assert err.splitlines()[:3] == ['ERROR:  syntax error at or near "SELEC" (SQLSTATE 42601)',
                                    "LINE 1: SELEC * FROM metrics", "        ^"], err
    status, _, err = run(capsys, "-D", data_dir, "--no-maintenance", "-c",
                         "CREATE TABLE t9 (a INT PRIMARY KEY) PARTITION BY foo")
    assert 'syntax error at or near "foo"' in err and "HINT:  Expected HASH or RANGE" in err
    assert "sqlglot" not in err and "<class" not in err


def test_server_logging_leaves_out_sqlglot_chatter():
    """`kudusql serve` logged sqlglot's INFO "Applying array index offset (-1)" for every
    statement that indexes an array; a long wire fuzz run filled a 64 KiB stderr pipe with
    it. sqlglot's own messages stay at WARNING unless --verbose."""
    import logging

    from kudusql import logs
    sqlglot_log = logging.getLogger("sqlglot")
    before = sqlglot_log.level
    try:
        logs.configure(verbose=False)
        assert not sqlglot_log.isEnabledFor(logging.INFO)
        assert sqlglot_log.isEnabledFor(logging.WARNING)
    finally:
        sqlglot_log.setLevel(before)


def test_returning_prints_the_rows_then_the_writes_tag(capsys, data_dir):
    """As psql: the RETURNING rows, a blank line, then `INSERT 0 n` (not the rows alone)."""
    status, out, err = run(capsys, "-D", data_dir, "--no-maintenance", "-c",
                           "UPDATE metrics SET value = value + 1 WHERE host = 'b' "
                           "RETURNING host, value")
    assert (status, err) == (0, "")
    assert out == " host | value\n------+-------\n b    |   2.5\n(1 row)\n\nUPDATE 1\n"
