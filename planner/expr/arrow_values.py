"""Arrow values as the evaluator passes them: `Value` (a scalar, an array or chunks) and
the shape helpers every module uses (`broadcast`, `combine`, `per_array`, `view_as`,
`any_true`, `ints_and_mask`). Imports nothing else of planner.expr.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


Value = pa.Scalar | pa.Array | pa.ChunkedArray


def broadcast(v: Value, n: int) -> pa.Array | pa.ChunkedArray:
    """A constant repeated over n rows (an array as it is)."""
    if not isinstance(v, pa.Scalar):
        return v
    if pa.types.is_null(v.type):
        return pa.nulls(n)
    return pa.repeat(v, n)


def combine(v: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Chunks as one array."""
    return v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v


def per_array(fn: Callable[[pa.Array], pa.Array], v: Value) -> Value:
    """Apply an Array -> Array function to a scalar (as a 1-element array), array or chunks."""
    if isinstance(v, pa.Scalar):
        return fn(pa.repeat(v, 1))[0]
    if isinstance(v, pa.ChunkedArray):
        if v.num_chunks == 0:
            return pa.chunked_array([], type=fn(pa.array([], type=v.type)).type)
        return pa.chunked_array([fn(c) for c in v.chunks])
    return fn(v)


def view_as(v: Value, t: pa.DataType) -> Value:
    """Reinterpret a decimal's stored integers under another same-width decimal type (zero
    copy, unchecked: callers choose a precision the data fits, or know why it need not)."""
    if isinstance(v, pa.Scalar):
        return pa.repeat(v, 1).view(t)[0]
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([c.view(t) for c in v.chunks], type=t)
    return v.view(t)


def any_true(v: Value) -> bool:
    """Whether a boolean value (a scalar, or any row of an array) is true; NULL is not."""
    return bool(v.as_py()) if isinstance(v, pa.Scalar) else bool(pc.any(v).as_py())


def ints_and_mask(a: pa.Array, dtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Values (nulls as 0) and the null mask (None if no nulls) of an integer-like array."""
    mask = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    vals = pc.fill_null(a, 0) if a.null_count else a
    return vals.to_numpy(zero_copy_only=False).astype(dtype, copy=False), mask
