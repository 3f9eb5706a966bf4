"""kudusql's answers to the PostgreSQL oracle's corpus (tests/sql/pgoracle) against the
answers recorded from PostgreSQL 15, through the embedded DB-API and through psycopg over
the wire. A statement in DEVIATIONS must still differ (its reason says why the difference
stays); one that starts to agree fails, so the list only shrinks."""

from __future__ import annotations

import json

import psycopg
import pytest

import kudusql
from tests.sql.pgoracle.corpus import STATEMENTS
from tests.sql.pgoracle.corpus_text import STATEMENTS as TEXT_STATEMENTS
from tests.sql.pgoracle.record import EXPECTED, EXPECTED_TEXT
from tests.sql.pgoracle.run import run_corpus, run_text
from tests.sql.pgoracle.values import ordered, same
from tests.wire.conftest import start_server, stop_server

# name -> why kudusql's answer differs from PostgreSQL's and is left so (docs/sql.md)
_SCALE = ("numeric division and avg have a fixed result scale (6 / 28 digits); PostgreSQL's "
          "varies with the operands' values")
_DATE_PLUS = "date + interval and date_trunc(date) stay DATE (PostgreSQL: timestamp)"
_REFUSED = "refused with 0A000 (docs/sql.md, what is deliberately unsupported)"
_FLOAT_NUMERIC = ("a float cast to numeric keeps the float's digits at a fixed scale "
                  "(PostgreSQL rounds to 15 significant digits, 6 for real)")
DEVIATIONS: dict[str, str] = {
    "gs_select_month_clamp": "generate_series over dates gives timestamp (PostgreSQL "
                             "resolves it to its timestamp with time zone form)",
    "math_numeric_division": _SCALE, "math_decimal_literal_division": _SCALE,
    "agg_avg_numeric": _SCALE,
    "dt_date_trunc_date_argument": _DATE_PLUS, "dt_date_plus_interval": _DATE_PLUS,
    "dt_month_end_interval": _DATE_PLUS,
    **dict.fromkeys(["sub_lateral_top_sale", "sub_lateral_left_count",
                     "join2_full_on_constant_filter"], _REFUSED),
    "err_round_double_digits": "round(double precision, n) is accepted (PostgreSQL: 42883)",
    "num2_float_to_numeric_digits": _FLOAT_NUMERIC, "num2_real_widening": _FLOAT_NUMERIC,
    "str2_char_padding": "CHAR(n) is text: no blank padding, trailing blanks significant",
    "str2_case_mapping_non_ascii": "upper('ß') is 'ẞ' (Arrow's Unicode case mapping; "
                                   "PostgreSQL's C.UTF-8 keeps 'ß')",
    "sub2_case_guards_subquery": "a scalar subquery runs before CASE picks a branch: one "
                                 "returning several rows is 21000 even in a branch not taken",
    "dt2_fraction_rounding": "'24:00:00' is not read as the next midnight (22008)",
    "err2_union_int_text": "UNION of integer and a text literal is 42804 (PostgreSQL casts "
                           "the literal: 22P02)",
    "dml_insert_varchar_too_long": "VARCHAR(n) truncates longer values, as Kudu does "
                                   "(PostgreSQL: 22001)",
    "dml_update_key_to_duplicate": "primary keys are immutable: UPDATE of a key is 0A000",
    "dml_select_batch_with_one_duplicate": "a multi-row INSERT applies the rows without "
                                           "errors, as Kudu does (PostgreSQL: none)",
}
# differences through one path only
EMBEDDED_DEVIATIONS: dict[str, str] = {}
WIRE_DEVIATIONS: dict[str, str] = {}

RECORDED = json.loads(EXPECTED.read_text())["statements"] if EXPECTED.exists() else {}
RECORDED_TEXT = json.loads(EXPECTED_TEXT.read_text())["statements"]


def test_the_recording_is_of_this_corpus():
    """Every statement recorded, with the same SQL (re-record after editing corpus.py)."""
    stale = [n for n, sql in STATEMENTS if RECORDED.get(n, {}).get("sql") != sql]
    extra = sorted(set(RECORDED) - {n for n, _ in STATEMENTS})
    assert not stale and not extra, (stale[:10], extra[:10])
    listed = set(DEVIATIONS) | set(EMBEDDED_DEVIATIONS) | set(WIRE_DEVIATIONS)
    assert listed <= set(RECORDED), sorted(listed - set(RECORDED))
    assert [(n, RECORDED_TEXT.get(n, {}).get("sql")) for n, _ in TEXT_STATEMENTS] == \
        TEXT_STATEMENTS and len(RECORDED_TEXT) == len(TEXT_STATEMENTS)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    conn = kudusql.connect(str(tmp_path_factory.mktemp("pgoracle") / "db"))
    try:
        return run_corpus(conn, kudusql.Error)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("pgoracle-wire") / "db")
    try:
        with psycopg.connect(r.dsn(), autocommit=True) as conn:
            return run_corpus(conn, psycopg.Error)
    finally:
        stop_server(r)


def _check(name: str, ours: dict, deviations: dict[str, str]) -> None:
    theirs = RECORDED[name]
    diff = same(ours, theirs, ordered(theirs["sql"]))
    reason = DEVIATIONS.get(name) or deviations.get(name)
    if reason:
        assert diff, f"{name} now agrees with PostgreSQL: take it out of the deviations"
        pytest.xfail(f"{reason} ({diff})")
    assert diff is None, f"{name}: {diff}\n  {theirs['sql']}"


NAMES = [n for n, _ in STATEMENTS]


@pytest.mark.parametrize("name", NAMES)
def test_embedded(name, embedded):
    _check(name, embedded[name], EMBEDDED_DEVIATIONS)


@pytest.mark.parametrize("name", NAMES)
def test_wire(name, wire):
    _check(name, wire[name], WIRE_DEVIATIONS)


@pytest.fixture(scope="module")
def wire_text(tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("pgoracle-text") / "db")
    try:
        with psycopg.connect(r.dsn(), autocommit=True) as conn:
            return run_text(conn, psycopg.Error)
    finally:
        stop_server(r)


@pytest.mark.parametrize("name", [n for n, _ in TEXT_STATEMENTS])
def test_wire_text(name, wire_text):
    """Values as the server printed them (corpus_text.py), character for character, and
    the TimeZone ParameterStatus after each SET / SHOW; no deviations."""
    ours, theirs = wire_text[name], RECORDED_TEXT[name]
    diff = same(ours, theirs, ordered(theirs["sql"]))
    assert diff is None, f"{name}: {diff}\n  {theirs['sql']}"
    assert ours.get("TimeZone") == theirs.get("TimeZone")
