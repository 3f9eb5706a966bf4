"""shell.format: the pure rendering functions, against exact expected text."""

from __future__ import annotations

import datetime
import decimal
import json

import pyarrow as pa
import pytest

from shell.backend import Result, RowError
from shell.format import (
    FormatOptions,
    aligned,
    caret_lines,
    column_text,
    csv_text,
    expanded,
    format_elapsed,
    format_error,
    format_result,
    format_row_errors,
    human_bytes,
    json_text,
)


def result(**cols) -> Result:
    return Result("SELECT", pa.table(cols))


SAMPLE = result(
    host=pa.array(["a", "bb", None]),
    n=pa.array([1, 22, None], pa.int64()),
    note=pa.array(["two\nlines", "", "x"]),
)


def test_aligned_is_psqls_table_with_a_row_count():
    assert aligned(SAMPLE).split("\n") == [
        "  host  |   n    | note",
        "--------+--------+-------",
        " a      |      1 | two  +",
        "        |        | lines",
        " bb     |     22 |",
        " <null> | <null> | x",
        "(3 rows)",
    ]


def test_null_is_distinct_from_empty_and_configurable():
    text = format_result(SAMPLE, FormatOptions(null="∅"))
    assert " ∅    |  ∅ | x" in text         # numbers stay right-aligned
    assert "(1 row)" in aligned(result(a=pa.array([None], pa.string())))


def test_title_and_footer():
    r = Result("SELECT 1", pa.table({"a": [1]}), title="T", footer=("Key: (a)",))
    assert aligned(r).split("\n") == [" T", " a", "---", " 1", "(1 row)", "Key: (a)"]


def test_empty_result_keeps_headers():
    r = Result("SELECT 0", pa.table({"a": pa.array([], pa.int32()), "bc": pa.array([], pa.string())}))
    assert aligned(r) == " a | bc\n---+----\n(0 rows)"


def test_wide_characters_line_up():
    lines = aligned(result(k=["日本", "ab"], v=[1, 2])).split("\n")
    assert lines[2] == " 日本 | 1" and lines[3] == " ab   | 2"


def test_expanded_pads_the_record_header_to_the_block():
    assert expanded(result(name=["a"], value=["x" * 20])).split("\n")[0] == \
        "-[ RECORD 1 ]" + "-" * 15
    # a key column wider than the label: psql's `+` marks where the `|` runs
    assert expanded(result(a_very_long_column_name=[1])).split("\n")[0] == \
        "-[ RECORD 1 ]-----------+--"


def test_expanded():
    assert expanded(SAMPLE).split("\n") == [
        "-[ RECORD 1 ]",
        "host | a",
        "n    | 1",
        "note | two+",
        "     | lines",
        "-[ RECORD 2 ]",
        "host | bb",
        "n    | 22",
        "note |",
        "-[ RECORD 3 ]",
        "host | <null>",
        "n    | <null>",
        "note | x",
    ]
    assert expanded(result(a=pa.array([], pa.int8()))) == "(0 rows)"


def test_expanded_auto_switches_when_wider_than_the_screen():
    r = result(a=["x" * 50], b=["y" * 50])
    assert format_result(r, FormatOptions(expanded="auto", width=200)).startswith("  ")
    assert format_result(r, FormatOptions(expanded="auto", width=80)).startswith("-[ RECORD 1")


def test_csv_and_json():
    assert csv_text(SAMPLE) == 'host,n,note\na,1,"two\nlines"\nbb,22,\n,,x'
    rows = json.loads(json_text(SAMPLE))
    assert rows == [{"host": "a", "n": 1, "note": "two\nlines"},
                    {"host": "bb", "n": 22, "note": ""},
                    {"host": None, "n": None, "note": "x"}]
    assert json_text(result(a=pa.array([], pa.int8()))) == "[]"


def test_json_keeps_decimals_exact():
    r = result(d=pa.array([decimal.Decimal("12345678901234567890.12")], pa.decimal128(22, 2)))
    assert json_text(r) == '[\n{"d": 12345678901234567890.12}\n]'


def test_status_results_print_their_tag():
    assert format_result(Result("INSERT 0 5")) == "INSERT 0 5"
    assert format_result(Result("CREATE TABLE", footer=("x",))) == "CREATE TABLE\nx"


@pytest.mark.parametrize("array, expected", [
    (pa.array([True, False]), ["true", "false"]),
    (pa.array([0.1, 1e20, float("nan"), float("inf")]), ["0.1", "1e+20", "NaN", "Infinity"]),
    (pa.array([0.1], pa.float32()), ["0.1"]),
    (pa.array([decimal.Decimal("1.50"), decimal.Decimal("-0.01")], pa.decimal128(5, 2)),
     ["1.50", "-0.01"]),
    (pa.array([datetime.datetime(2025, 1, 1, 10), datetime.datetime(2025, 1, 1, 10, 0, 0, 500)],
              pa.timestamp("us")), ["2025-01-01 10:00:00", "2025-01-01 10:00:00.0005"]),
    (pa.array([datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)], pa.timestamp("us", "UTC")),
     ["2025-01-01 00:00:00+00"]),
    (pa.array([datetime.date(2020, 2, 29)]), ["2020-02-29"]),
    (pa.array([b"\x00\xff"]), ["\\x00ff"]),
    (pa.array([pa.MonthDayNano([14, 3, 3_723_500_000_000])], pa.month_day_nano_interval()),
     ["1 year 2 mons 3 days 01:02:03.5"]),
    (pa.array([[1, None]], pa.list_(pa.int64())), ["[1, null]"]),
    (pa.array([None, None], pa.null()), [None, None]),
])
def test_cell_text(array, expected):
    assert column_text(array) == expected


def test_error_with_caret_under_the_position():
    sql = "SELECT a,\n       foo\nFROM t"
    text = format_error('column "foo" does not exist', sqlstate="42703", sql=sql,
                        position=sql.index("foo") + 1)
    assert text.split("\n") == [
        'ERROR:  column "foo" does not exist (SQLSTATE 42703)',
        "LINE 2:        foo",
        "               ^",
    ]


def test_caret_at_the_end_of_input_and_with_wide_characters():
    assert caret_lines("SELECT", 7) == ["LINE 1: SELECT", "              ^"]
    assert caret_lines("SELECT '日本' x", 13) == ["LINE 1: SELECT '日本' x",
                                                 " " * 22 + "^"]


def test_caret_on_a_long_line_cuts_around_the_position():
    sql = "SELECT " + ", ".join(f"c{i}" for i in range(100)) + ", bad FROM t"
    pos = sql.index("bad") + 1
    line, caret = caret_lines(sql, pos, width=80)
    assert len(line) <= 80 and line.startswith("LINE 1: ...")
    assert line[caret.index("^"):].startswith("bad")


def test_error_detail_and_hint():
    assert format_error("boom", detail="d", hint="h") == "ERROR:  boom\nDETAIL:  d\nHINT:  h"


def test_row_errors_list_every_failed_row():
    errs = (RowError(3, "23505", "dup b", ("b",)), RowError(1, "23505", "dup a", ("a",)))
    assert format_row_errors(errs, applied=3) == (
        "ERROR:  2 of 5 rows failed (3 applied)\n"
        "  row 1 (23505): dup a\n"
        "  row 3 (23505): dup b")


def test_elapsed_and_sizes():
    assert format_elapsed(0.0123) == "Time: 12.300 ms"
    assert format_elapsed(61.5) == "Time: 61500.000 ms (01:01.500)"
    assert format_elapsed(3725) == "Time: 3725000.000 ms (1:02:05.000)"
    assert [human_bytes(n) for n in (0, 1763, 5 << 20, None)] == \
        ["0 bytes", "1.7 kB", "5.0 MB", None]
