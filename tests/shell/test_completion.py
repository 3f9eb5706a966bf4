"""shell.completion: what is offered where, and the background metadata refresh."""

from __future__ import annotations

import threading

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from shell.completion import Metadata, SqlCompleter


def completer() -> SqlCompleter:
    c = SqlCompleter()
    c.metadata = Metadata(("metrics", "orders", "Mixed Case"),
                          {"metrics": ("host", "ts", "value"), "orders": ("o_id", "o_total"),
                           "Mixed Case": ("a",)})
    return c


def offered(text: str, c: SqlCompleter | None = None) -> list[str]:
    c = c or completer()
    return [x.text for x in c.get_completions(Document(text, len(text)), CompleteEvent())]


def test_tables_after_from_join_into_update():
    assert offered("SELECT * FROM me") == ["metrics"]
    assert offered("SELECT * FROM metrics m JOIN o") == ["orders"]
    assert offered("INSERT INTO ") [:3] == ["metrics", "orders", '"Mixed Case"']
    assert offered("update Or") == ["orders"]
    assert offered("SELECT * FROM metrics, or") == ["orders"]
    assert "table_changes" in offered("SELECT * FROM ta")


def test_columns_of_the_tables_the_statement_names():
    assert offered("SELECT h FROM metrics") == ["metrics"]     # the word being typed
    text = "SELECT h"
    doc = Document(text + " FROM metrics", len(text))
    got = [x.text for x in completer().get_completions(doc, CompleteEvent())]
    assert got == ["host", "hash", "having"]        # columns first, then keywords


def test_alias_dot_column():
    assert offered("SELECT m.v FROM metrics m WHERE m.") == ["host", "ts", "value"]
    text = "SELECT o.o_"
    doc = Document(text + " FROM orders AS o", len(text))
    assert [x.text for x in completer().get_completions(doc, CompleteEvent())] == \
        ["o_id", "o_total"]


def test_keywords_follow_the_case_typed():
    assert "SELECT" in offered("SEL") and "select" in offered("sel")


def test_functions():
    assert "coalesce" in offered("SELECT coa")


def test_quoted_names_are_quoted():
    assert offered('SELECT * FROM "Mi') == ['"Mixed Case"']


def test_only_the_current_statement_counts():
    assert offered("SELECT * FROM orders; SELECT * FROM me") == ["metrics"]


def test_backslash_commands_and_their_arguments():
    assert offered("\\d") == ["\\d", "\\dt", "\\dv"]
    assert offered("\\tab") == ["\\tablets"]
    assert offered("\\d me") == ["metrics"]
    assert offered("\\tablets ") == ["metrics", "orders", '"Mixed Case"']
    assert offered("\\format c") == ["csv"]
    assert offered("\\x a") == ["auto"]


class SlowBackend:
    def __init__(self):
        self.release = threading.Event()

    def tables(self):
        self.release.wait(5)
        return ["t1"]

    def columns(self, table):
        return ["c1"]


def test_refresh_runs_in_the_background_and_swaps_at_once():
    c = SqlCompleter()
    b = SlowBackend()
    c.refresh(b)
    assert not c.wait_refreshed(0.05)
    assert "t1" not in offered("SELECT * FROM t", c)     # the old (empty) snapshot meanwhile
    b.release.set()
    assert c.wait_refreshed(5)
    assert offered("SELECT * FROM t", c)[0] == "t1"
    assert offered("SELECT * FROM t1 WHERE c", c)[0] == "c1"


def test_a_failing_refresh_keeps_the_old_snapshot():
    class Broken:
        def tables(self):
            raise OSError("connection lost")

    c = completer()
    c.refresh(Broken(), wait=True)
    assert c.wait_refreshed(1) and "metrics" in offered("SELECT * FROM m", c)
