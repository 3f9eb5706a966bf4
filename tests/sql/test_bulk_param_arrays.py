"""`Session.execute_many`'s parameter columns (session/session.py `_param_array`): a
column of Decimals written to a DECIMAL column is converted to the column's type directly
when every value fits it exactly, else inferred as before; either way the column the
engine receives is the one `insert_rows` made from the inferred column (`sql_round`)."""

from __future__ import annotations

import decimal
import random

import pyarrow as pa
import pytest

from planner.dml import sql_round
from session.session import _param_array

D = decimal.Decimal


def _rounded(values: list, t: pa.DataType):
    """What insert_rows gives the engine for these values: `pa.array` inferred, then
    rounded into the column's type; an error as its repr."""
    try:
        return sql_round(pa.array(values), t)
    except Exception as e:  # noqa: BLE001 - compared
        return repr(e)


def _cases(rng: random.Random):
    exact = [D("0"), D("-0.00"), D("1.5"), D("123.45"), D("9999999999.99"),
             D("-9999999999.99"), D("1E+3"), D("0.10"), D("7"), None]
    other = [D("1.005"), D("0.001"), D("12345678901.5"), D("1E+12"), D("NaN"),
             D("Infinity"), 3, 2.5, "1.25"]
    for _ in range(300):
        n = rng.randrange(1, 8)
        values = [rng.choice(exact) for _ in range(n)]
        if rng.random() < 0.4:
            values[rng.randrange(n)] = rng.choice(other)
        yield values


@pytest.mark.parametrize("t", [pa.decimal128(12, 2), pa.decimal128(38, 10),
                               pa.decimal128(5, 0), pa.decimal256(50, 3)])
def test_typed_decimal_columns_equal_inferred_then_rounded(t):
    rng = random.Random(str(t))
    typed = 0
    for values in _cases(rng):
        want = _rounded(values, t)
        try:
            got = sql_round(_param_array(values, t), t)
        except Exception as e:  # noqa: BLE001 - compared
            got = repr(e)
        if isinstance(want, str) or isinstance(got, str):
            assert got == want, values
            continue
        assert got.type == want.type and got.to_pylist() == want.to_pylist(), values
        typed += _param_array(values, t).type == t
    assert typed > 20           # the typed conversion is taken, not only the fallback


def test_other_columns_are_inferred():
    values = [D("1.5"), None, D("2.25")]
    assert _param_array(values, None).type == pa.array(values).type
    assert _param_array(values, pa.float64()).type == pa.array(values).type
    assert _param_array([1, 2], pa.decimal128(12, 2)).type == pa.int64()
