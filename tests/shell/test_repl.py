"""The interactive shell driven for real: keys go into prompt_toolkit's pipe input, the
terminal output (prompt_toolkit's escape sequences and the shell's results) is drawn on a
VT100 screen model (tests/shell/vt.py), and the assertions read that screen."""

from __future__ import annotations

import re
import time

from tests.shell import slow_shell


def prompt_lines(d) -> list[str]:
    return [ln for ln in d.screen.text().splitlines() if re.match(r"db[=-]>", ln)]


def test_completes_a_table_name(drive):
    d = drive()
    d.type("SELECT count(*) AS n FROM met")
    d.wait_for(r"metrics\s+table")                 # the completion menu, drawn under the line
    menu = [ln for ln in d.screen.display() if re.search(r"metrics\s+table", ln)]
    assert menu and not menu[0].startswith("db=>")
    d.send(d.TAB)
    d.wait_for(r"db=> SELECT count\(\*\) AS n FROM metrics\s*$")
    d.send(";" + d.ENTER)
    d.wait_for(r"\(1 row\)")
    assert re.search(r" n\n---\n 3\n\(1 row\)", d.screen.text())
    assert "db=> SELECT count(*) AS n FROM metrics;" in d.screen.text()


def test_completes_columns_and_backslash_arguments(drive):
    d = drive()
    d.type("\\d me")
    d.wait_for(r"^\s+metrics\s+table")               # the menu first, as a person sees it
    d.send(d.TAB)
    d.wait_for(r"db=> \\d metrics\s*$")
    d.send(d.ENTER)
    d.wait_for(r"Tablets: 4")
    d.type("SELECT  FROM metrics;")
    d.send("\x1b[D" * len(" FROM metrics;"))      # back to after SELECT
    d.type("va")
    d.wait_for(r"^\s+value\s+column")              # a column of the table named after FROM
    d.send(d.TAB + d.ENTER)
    d.wait_for(r" value\n-------\n")


def test_multi_line_statement_runs_at_the_semicolon(drive):
    d = drive()
    for line in ("SELECT host,", "       value", "FROM metrics", "WHERE value > 1"):
        d.type(line)
        d.send(d.ENTER)
    d.wait_for(r"db-> WHERE value > 1\n\s*db->", 5)
    assert "rows)" not in d.screen.text()          # nothing ran yet: no `;`
    d.type("ORDER BY host;")
    d.send(d.ENTER)
    d.wait_for(r"\(2 rows\)")
    lines = prompt_lines(d)
    first = lines.index("db=> SELECT host,")
    assert lines[first:first + 5] == [
        "db=> SELECT host,", "db->        value", "db-> FROM metrics", "db-> WHERE value > 1",
        "db-> ORDER BY host;"]
    assert " b    |   1.5\n c    |   2.5\n(2 rows)" in d.screen.text()


def test_ctrl_c_cancels_a_long_query_and_keeps_the_shell(drive, slow_scans):
    d = drive()
    d.type("SELECT * FROM metrics a, metrics b, metrics c;")
    t0 = time.monotonic()
    d.send(d.ENTER)
    d.wait_for(r"running 1\.\d s · Ctrl-C to cancel", 5)      # the live progress line
    d.send(d.CTRL_C)
    d.wait_for(r"canceling statement due to user request \(SQLSTATE 57014\)", 10)
    assert time.monotonic() - t0 < 6                          # not the whole query
    d.wait_for(r"Time: \d+\.\d{3} ms \(00:0\d\.\d{3}\)")        # long: elapsed is shown
    assert "running" not in "\n".join(d.screen.display())     # the progress line is gone
    d.type("SELECT 'still here' AS s;")
    d.send(d.ENTER)
    d.wait_for(r"still here\n\(1 row\)")


def test_ctrl_c_at_the_prompt_clears_the_line_and_ctrl_d_quits(drive):
    d = drive()
    d.type("SELECT half a stat")
    d.send(d.CTRL_C)
    d.wait_for(r"db=>\s*$")
    d.type("SELECT 7 AS seven;")
    d.send(d.ENTER)
    d.wait_for(r" seven\n-------\n     7\n")
    assert "ERROR" not in d.screen.text()
    d.send(d.CTRL_D)
    d.thread.join(5)
    assert not d.thread.is_alive() and d.status == 0


def test_quit_words(drive):
    d = drive()
    d.type("\\q")
    d.send(d.ENTER)
    d.thread.join(5)
    assert not d.thread.is_alive() and d.status == 0


def test_describe_on_screen(drive):
    d = drive()
    d.type("\\d metrics")
    d.send(d.ENTER)
    d.wait_for(r"Tablets: 4, replication factor 1")
    text = d.screen.text()
    assert re.search(r'^\s+Table "metrics"\n Column \|\s+Type\s+\| Key \| Nullable', text, re.MULTILINE)
    assert " ts     | TIMESTAMP | 2   | not null |" in text
    assert "Partitioning: HASH (host) PARTITIONS 2, RANGE (ts)" in text


def test_error_caret_lines_up_under_the_failing_word(drive):
    d = drive()
    d.type("SELECT host,")
    d.send(d.ENTER)
    d.type("  nope FROM metrics;")
    d.send(d.ENTER)
    d.wait_for(r"LINE 2:")
    lines = d.screen.text().splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("LINE 2:"))
    assert lines[i - 1] == 'ERROR:  column "nope" does not exist (SQLSTATE 42703)'
    assert lines[i] == "LINE 2:   nope FROM metrics"
    assert lines[i + 1].index("^") == lines[i].index("nope")


def test_history_persists_across_sessions(drive, tmp_path):
    hist = str(tmp_path / "hist")
    d = drive(history=hist)
    d.type("SELECT 42 AS answer;")
    d.send(d.ENTER)
    d.wait_for(r"\(1 row\)")
    d.send(d.CTRL_D)
    d.thread.join(5)
    assert d.status == 0
    with open(hist) as f:
        assert "SELECT 42 AS answer;" in f.read()
    d2 = drive(history=hist)
    d2.send(d2.UP)
    d2.wait_for(r"db=> SELECT 42 AS answer;\s*$")
    d2.send(d2.ENTER)
    d2.wait_for(r"    42\n\(1 row\)")


def test_tall_results_go_to_the_pager(backend, drive):
    values = ", ".join(f"('h{i:02d}', '2025-02-01', {i}, NULL)" for i in range(40))
    backend.execute(f"INSERT INTO metrics VALUES {values}")
    paged: list[str] = []
    d = drive(rows=24, pager=paged.append)
    d.type("SELECT host FROM metrics WHERE host LIKE 'h%' ORDER BY host;")
    d.send(d.ENTER)
    deadline = time.monotonic() + 10
    while not paged and time.monotonic() < deadline:
        time.sleep(0.05)
    d.wait_for(r"^db=>\s*$")                # the next prompt (keys typed earlier would wait)
    d.type("SELECT 1 AS short;")
    d.send(d.ENTER)
    d.wait_for(r" short\n")
    assert len(paged) == 1 and paged[0].endswith(" h39\n(40 rows)\n")
    assert " h39" not in d.screen.text()                 # the pager showed it, not the shell
    d.type("\\pager off")
    d.send(d.ENTER)
    d.type("SELECT host FROM metrics WHERE host LIKE 'h%' ORDER BY host;")
    d.send(d.ENTER)
    d.wait_for(r"\(40 rows\)")
    assert len(paged) == 1


def test_keys_typed_during_a_query_wait_in_the_next_prompt(drive, slow_scans, monkeypatch):
    monkeypatch.setattr(slow_shell, "DELAY", 0.15)
    d = drive()
    d.type("SELECT count(*) FROM metrics;")
    d.send(d.ENTER)
    time.sleep(0.2)
    d.type("SELECT 5")                          # while the query runs
    d.wait_for(r"\(1 row\)", 10)
    d.wait_for(r"db=> SELECT 5\s*$")
