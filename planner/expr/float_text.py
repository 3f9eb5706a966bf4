"""Floats written as text under the session's extra_float_digits, as PostgreSQL's float8out
and float4out write them: at 1 or more (the default) the shortest digits that read back
(planner/expr/casts.py `_float_text`, vectorised); at 0 or less, C's %.*g with
15 + extra_float_digits significant digits (6 + it for real), at least one
(`float_digits_text`). Both a `::text` cast and the wire's text results follow it.

The setting is the session's (wire/settings.py keeps it; wire/backend.py hands it to the
session, session/session.py enters `session_float_digits` around a statement); code that
runs outside a session sees the default, 1.
"""

from __future__ import annotations

import contextvars

import numpy as np
import pyarrow as pa

_FLOAT_DIGITS: contextvars.ContextVar[int] = contextvars.ContextVar(
    "kudusql_extra_float_digits", default=1)


class session_float_digits:
    """extra_float_digits for the statements run in the block (`with
    session_float_digits(n): ...`); a class like timezones.session_time_zone, for its
    cost."""

    __slots__ = ("extra", "token")

    def __init__(self, extra: int) -> None:
        self.extra = extra

    def __enter__(self) -> None:
        self.token = _FLOAT_DIGITS.set(self.extra)

    def __exit__(self, *exc) -> None:
        _FLOAT_DIGITS.reset(self.token)


def current_float_digits() -> int:
    return _FLOAT_DIGITS.get()


def float_digits_text(arr: pa.Array, extra: int) -> pa.Array:
    """A float column as PostgreSQL prints it with extra_float_digits = `extra` <= 0: C's
    %.*g with 15 + extra significant digits (float4: 6 + extra), at least 1; NaN,
    Infinity, -Infinity spelled out. (>= 1 is the shortest exact form, `_float_text`.)"""
    single = pa.types.is_float32(arr.type)
    ndig = max(1, (6 if single else 15) + extra)
    x = arr.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
    # np.char.mod runs Python's % (C's printf rules, two-digit exponents) on each value
    # in one call: there is no %g kernel in Arrow or numpy, and this setting is rare
    # (old drivers); the default's shortest form stays vectorised (`_float_text`)
    out = np.char.mod(f"%.{ndig}g", x).astype(object)
    with np.errstate(invalid="ignore"):
        out[np.isnan(x)] = "NaN"
        out[np.isposinf(x)] = "Infinity"
        out[np.isneginf(x)] = "-Infinity"
    return pa.array(out, pa.string(), mask=None if not arr.null_count else
                    ~arr.is_valid().to_numpy(zero_copy_only=False))
