"""shell.statements: splitting input at `;` and backslash commands (psql's rules)."""

from __future__ import annotations

import pytest

from shell.statements import Item, is_complete, is_quit, split


def kinds(text: str) -> list[tuple[str, str, bool]]:
    return [(i.kind, i.text, i.complete) for i in split(text)]


def test_statements_end_at_semicolons():
    assert kinds("SELECT 1; SELECT 2;") == [("sql", "SELECT 1", True), ("sql", "SELECT 2", True)]


def test_trailing_statement_without_semicolon_is_incomplete():
    assert kinds("SELECT 1;\nSELECT\n  2") == [("sql", "SELECT 1", True),
                                              ("sql", "SELECT\n  2", False)]


@pytest.mark.parametrize("text", [
    "SELECT 'a;b';",
    "SELECT 'it''s;';",
    "SELECT E'it\\'s;';",
    'SELECT 1 AS "x;y";',
    "SELECT $$a;b$$;",
    "SELECT $fn$ a;$$;b $fn$;",
    "SELECT 1 -- a; comment\n;",
    "SELECT /* a; /* nested; */ still; */ 1;",
])
def test_semicolons_inside_literals_and_comments_do_not_split(text):
    items = split(text)
    assert len(items) == 1 and items[0].complete, items


@pytest.mark.parametrize("text", [
    "SELECT 'open;", "SELECT \"open;", "SELECT $$ open;", "SELECT /* open;", "SELECT E'a\\';",
])
def test_unterminated_literals_are_incomplete(text):
    assert not is_complete(text)


def test_parameters_are_not_dollar_quotes():
    assert kinds("SELECT $1; SELECT a$b;") == [("sql", "SELECT $1", True),
                                              ("sql", "SELECT a$b", True)]


def test_backslash_commands_run_to_the_end_of_the_line():
    text = "SELECT 1; \\x\n\\d metrics\nSELECT 2;"
    assert split(text) == [Item("sql", "SELECT 1", 0), Item("command", "\\x", 10),
                           Item("command", "\\d metrics", 13), Item("sql", "SELECT 2", 24)]


def test_backslash_inside_a_statement_is_just_a_character():
    assert kinds("SELECT 1 \\x\n;") == [("sql", "SELECT 1 \\x", True)]


def test_blank_and_comment_only_input_has_no_items():
    assert split("  \n -- nothing\n /* here */ ") == []


def test_offsets_point_at_the_statement():
    text = "  -- c\n  SELECT 1;"
    (item,) = split(text)
    assert text[item.offset:].startswith("-- c")      # leading comment kept with it


def test_is_complete_decides_the_enter_key():
    assert is_complete("")
    assert is_complete("SELECT 1;")
    assert is_complete("\\dt")
    assert is_complete("select 1;\n\\x")
    assert not is_complete("SELECT 1")
    assert not is_complete("SELECT 1; SELECT")
    assert is_complete("quit") and is_quit("exit") and is_quit("\\q") and not is_quit("quitx")
