"""Backslash commands and scripts, through the Shell over an embedded database (the
non-interactive path: what -c, -f, stdin and \\i run)."""

from __future__ import annotations

import io
import re

import pytest

from shell import commands
from shell.commands import key_range, parse_partition, pretty_bounds
from shell.repl import Shell


class Run:
    def __init__(self, backend, **kw):
        self.out, self.err = io.StringIO(), io.StringIO()
        self.shell = Shell(backend, stdout=self.out, stderr=self.err, **kw)

    def __call__(self, text: str, **kw) -> bool:
        self.out.seek(0), self.out.truncate()
        self.err.seek(0), self.err.truncate()
        return self.shell.run_script(text, **kw)


@pytest.fixture
def run(backend):
    return Run(backend)


def test_describe_table(run):
    assert run("\\d metrics")
    assert run.out.getvalue() == """\
                              Table "metrics"
 Column |   Type    | Key | Nullable | Default |  Encoding   | Compression
--------+-----------+-----+----------+---------+-------------+-------------
 host   | STRING    | 1   | not null |         | auto        | default
 ts     | TIMESTAMP | 2   | not null |         | auto        | default
 value  | DOUBLE    |     |          |         | BIT_SHUFFLE | default
 note   | STRING    |     |          |         | auto        | default
Primary key: (host, ts)
Partitioning: HASH (host) PARTITIONS 2, RANGE (ts)
Range partitions:
    VALUES < 2026-01-01 00:00:00  (2 tablets)
    2026-01-01 00:00:00 <= VALUES < 2027-01-01 00:00:00  (2 tablets)
Tablets: 4, replication factor 1

"""


def test_describe_hash_only_table_and_defaults(run):
    assert run("CREATE TABLE h (a INT NOT NULL, b STRING NOT NULL, c INT DEFAULT 7, "
               "PRIMARY KEY (b, a)) PARTITION BY HASH (a) PARTITIONS 2, HASH (b) PARTITIONS 3;"
               "\\d h")
    out = run.out.getvalue()
    assert " a      | INT    | 2   | not null |" in out
    assert " b      | STRING | 1   | not null |" in out
    assert " c      | INT    |     |          | 7       |" in out
    assert "Primary key: (b, a)\nPartitioning: HASH (a) PARTITIONS 2, HASH (b) PARTITIONS 3\n" \
           "Tablets: 6, replication factor 1" in out
    assert "Range partitions" not in out


def test_tablets_show_key_ranges_rowsets_and_sizes(run):
    assert run("\\tablets metrics")
    lines = run.out.getvalue().splitlines()
    assert lines[0].strip() == 'Tablets of "metrics"'
    assert re.split(r"\s*\|\s*", lines[1].strip()) == [
        "Tablet", "Bucket (host)", "Key range", "Rowsets", "MRS rows", "On disk", "Replicas"]
    rows = [re.split(r"\s*\|\s*", ln.strip()) for ln in lines[3:7]]
    assert sorted((r[1], r[2]) for r in rows) == [
        ("0", "(-inf, 2026-01-01 00:00:00)"), ("0", "[2026-01-01 00:00:00, 2027-01-01 00:00:00)"),
        ("1", "(-inf, 2026-01-01 00:00:00)"), ("1", "[2026-01-01 00:00:00, 2027-01-01 00:00:00)")]
    assert all(re.fullmatch(r"[0-9a-f]{32}", r[0]) for r in rows)
    assert all(re.fullmatch(r"\d+\.\d kB|\d+ bytes", r[5]) for r in rows)
    assert re.match(r"4 tablets, \d+ rowsets, \d+ MemRowSet rows, .* on disk", lines[7])


@pytest.mark.parametrize("text, expected", [
    ("HASH(host): 1, RANGE: 10 <= VALUES < 20", ([("host", 1)], "10 <= VALUES < 20")),
    ("HASH(a, b): 0, HASH(c): 2", ([("a, b", 0), ("c", 2)], None)),
    ("RANGE: VALUE = 30", ([], "VALUE = 30")),
    ("UNPARTITIONED", ([], None)),
])
def test_parse_partition(text, expected):
    assert parse_partition(text) == expected


@pytest.mark.parametrize("rng, expected", [
    ("10 <= VALUES < 20", "[10, 20)"), ("VALUES < 10", "(-inf, 10)"),
    ("10 <= VALUES", "[10, +inf)"), ("VALUE = 30", "[30, 30]"), ("UNBOUNDED", "(-inf, +inf)"),
    (None, "(-inf, +inf)"),
    ("(1, 'a') <= VALUES < (2, 'b')", "[(1, 'a'), (2, 'b'))"),
    ("VALUES < 2026-01-01T00:00:00.500000Z", "(-inf, 2026-01-01 00:00:00.5)"),
])
def test_key_range(rng, expected):
    assert key_range(rng) == expected
    assert pretty_bounds("2026-01-01T10:00:00.000000Z") == "2026-01-01 10:00:00"


def test_list_tables_and_patterns(run):
    run("CREATE TABLE other (a INT NOT NULL, PRIMARY KEY (a)) PARTITION BY HASH (a) PARTITIONS 2")
    assert run("\\dt")
    assert run.out.getvalue() == "List of tables\n  Name\n---------\n metrics\n other\n(2 rows)\n\n"
    assert run("\\dt met*") and " metrics\n(1 row)" in run.out.getvalue()
    assert run("\\dt nope*") and run.out.getvalue() == 'Did not find any table named "nope*".\n'
    assert run("\\d") and "List of tables" in run.out.getvalue()


def test_help_is_generated_from_the_registry(run):
    assert run("\\?")
    out = run.out.getvalue()
    for c in set(commands.REGISTRY.values()):
        assert re.search(rf"^  {re.escape(c.name)}[ \[].*{re.escape(c.help[:20])}", out, re.MULTILINE), c
    for name in ("\\q", "\\dt", "\\d", "\\tablets", "\\x", "\\timing", "\\o", "\\i", "\\c",
                 "\\format"):
        assert name in commands.REGISTRY


def test_expanded_format_and_timing_toggles(run):
    assert run("\\x\nSELECT host, value FROM metrics WHERE host = 'a';")
    assert run.out.getvalue() == ("Expanded display is on.\n-[ RECORD 1 ]\nhost  | a\n"
                                  "value | 0.5\n\n")
    assert run("\\x off\n\\format csv\nSELECT host, note FROM metrics ORDER BY host;")
    assert run.out.getvalue() == ("Expanded display is off.\nOutput format is csv.\n"
                                  'host,note\na,\nb,x\nc,"line one\nline two"\n')
    assert run("\\format json\nSELECT host FROM metrics WHERE host = 'b';\n\\format aligned")
    assert '[\n{"host": "b"}\n]\n' in run.out.getvalue()
    assert run("\\timing on\nSELECT 1;")
    assert re.search(r"Timing is on\.\n.*\(1 row\)\n\nTime: \d+\.\d{3} ms\n$",
                     run.out.getvalue(), re.DOTALL)


def test_bad_arguments(run):
    assert not run("\\format xml")
    assert run.err.getvalue() == 'ERROR:  unknown format "xml": aligned, csv, json expected\n'
    assert not run("\\nope")
    assert run.err.getvalue() == "ERROR:  invalid command \\nope\nTry \\? for help.\n"
    assert not run("\\d no_such_table")
    assert '"no_such_table" does not exist (SQLSTATE 42P01)' in run.err.getvalue()
    assert not run("\\tablets")
    assert "missing table name" in run.err.getvalue()


def test_output_to_a_file_and_back(run, tmp_path):
    f = tmp_path / "out.txt"
    assert run(f"\\o {f}\nSELECT host FROM metrics WHERE host = 'a';\n\\o\nSELECT 2 AS two;")
    assert f.read_text() == " host\n------\n a\n(1 row)\n\n"
    assert run.out.getvalue() == " two\n-----\n   2\n(1 row)\n\n"


def test_include_a_file_names_the_failing_line(run, tmp_path):
    f = tmp_path / "script.sql"
    f.write_text("SELECT 1 AS one;\n\n-- a comment\nSELECT nope\n  FROM metrics;\nSELECT 3;\n")
    assert not run(f"\\set ON_ERROR_STOP on\n\\i {f}")
    assert run.out.getvalue() == " one\n-----\n   1\n(1 row)\n\n"      # stopped at the error
    assert run.err.getvalue() == (
        f'kudusql:{f}:4: ERROR:  column "nope" does not exist (SQLSTATE 42703)\n'
        "LINE 2: SELECT nope\n"
        "               ^\n")
    assert not run("\\i /no/such/file.sql")
    assert "No such file" in run.err.getvalue()


def test_scripts_stop_at_the_first_error_interactive_input_does_not(run):
    assert not run("SELECT 1 AS a; SELECT x; SELECT 2 AS b;")
    assert " b\n" not in run.out.getvalue()
    assert not run("SELECT 1 AS a; SELECT x; SELECT 2 AS b;", stop_on_error=False)
    assert " b\n" in run.out.getvalue()


def test_row_errors_are_all_printed_and_fail_the_script(run):
    ok = run("INSERT INTO metrics VALUES ('a', '2025-01-01 10:00', 1, NULL), "
             "('d', '2025-01-01 10:00', 1, NULL), ('b', '2026-01-01 10:00', 1, NULL);")
    assert not ok
    assert run.out.getvalue() == "INSERT 0 1\n"
    err = run.err.getvalue().splitlines()
    assert err[0] == "ERROR:  2 of 3 rows failed (1 applied)"
    # key values as SQL literals (engine.types.sql_literal)
    assert err[1].startswith("  row 1 (23505): duplicate key") and \
        "('a', '2025-01-01 10:00')" in err[1]
    assert err[2].startswith("  row 3 (23505): duplicate key") and \
        "('b', '2026-01-01 10:00')" in err[2]


def test_notices_go_to_stderr(run):
    assert run("ROLLBACK;")
    assert run.out.getvalue() == "ROLLBACK\n"
    assert run.err.getvalue().startswith("NOTICE:  kudusql applies each statement")


def test_reconnect(backend, data_dir, tmp_path):
    from shell.backend import EmbeddedBackend

    def opener(t):
        return EmbeddedBackend(t, maintenance=False)

    r = Run(backend, opener=opener)
    assert r("\\c")
    assert r.out.getvalue() == f'You are now connected to "db" ({data_dir}).\n'
    assert r.shell.backend is not backend
    other = str(tmp_path / "other")
    assert r(f"\\c {other}\n\\dt") and "Did not find any tables." in r.out.getvalue()
    assert r(f"\\c {data_dir}\n\\dt") and " metrics\n" in r.out.getvalue()
    r.shell.close()


def test_not_connected(run):
    run.shell.backend.close()
    run.shell.backend = None
    assert not run("SELECT 1;")
    assert "not connected" in run.err.getvalue()
    assert run("\\x") and not run("\\dt")
