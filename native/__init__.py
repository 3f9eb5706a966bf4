"""The compiled core: a few Cython kernels, each with a pure-Python twin in its home module.

What is compiled (and where its twin lives):
    native._hashing   hash_key, bucket_hash, bloom_probe
                      (engine/cfile/bloom.py, engine/catalog/partition.py)
    native._wire      scan, decode_bind, scan_run: the wire's frame scanner, Bind and
                      batch decoders (wire/protocol.py); data_row: one row's DataRow
                      (wire/datarows.py); numeric_column: binary NUMERIC parameters
                      (wire/params.py); batch_replies: a pipelined batch's replies
                      (wire/protocol.py)
    native._write     encode_small, wal_record: a small write's compact WAL body
                      (engine/tablet/write_op.py) and its framed WAL record
                      (engine/consensus/log.py)

Contract. A kernel computes exactly what its twin computes, bit for bit, errors included:
the twin is the specification (persisted formats are defined there), the kernel only a
faster way to the same answer. tests/test_native.py compares each kernel with its twin on
generated inputs, and runs chosen test files again with the twins alone.

Choosing. A home module asks `load("_hashing")` once at import and binds the kernel's
functions or its own twins (`kernel` does both for one function whose kernel hands calls
back to its twin). The extension is absent when the package was installed
without a C compiler or Cython (setup.py then warns and installs the pure-Python package),
and is ignored when KUDUSQL_PURE_PYTHON=1 is set: the twins run, same answers, slower.
KUDUSQL_REQUIRE_NATIVE=1 (set by `make test`) turns an absent extension into an error, so
a broken build cannot hide behind the fallback.

Building. `pip install -e .` compiles native/*.pyx (setup.py; Cython and a C compiler are
build requirements). In a git worktree that shares another checkout's virtualenv, build
in place: `python setup.py build_ext --inplace`. docs/compiled-core.md says how to add a
kernel. This package imports nothing from the rest of kudusql: it sits below every layer.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

KERNELS = ("_hashing", "_wire", "_write")


def pure_python() -> bool:
    """Whether KUDUSQL_PURE_PYTHON asks for the pure-Python twins."""
    return os.environ.get("KUDUSQL_PURE_PYTHON", "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled kernel module `native.<name>`, or None: not built, or the twins asked for.
    Raises ImportError when it is absent and KUDUSQL_REQUIRE_NATIVE=1."""
    if pure_python():
        return None
    try:
        return importlib.import_module(f"native.{name}")
    except ImportError:
        if os.environ.get("KUDUSQL_REQUIRE_NATIVE", "") not in ("", "0"):
            raise ImportError(
                f"the compiled kernel native.{name} is not built (KUDUSQL_REQUIRE_NATIVE=1): "
                "run `pip install -e .` or `python setup.py build_ext --inplace`") from None
        return None


def kernel(module: str, name: str, twin, hand_back: str, *cases):
    """`native.<module>.<name>` when that module loads (`load`), after its `hand_back`
    function was given `cases` (by default the twin itself): what the kernel hands back
    the calls it does not decide exactly to. Otherwise `twin`. A home module binds one
    function with it, once, at import."""
    mod = load(module)
    if mod is None:
        return twin
    getattr(mod, hand_back)(*(cases or (twin,)))
    return getattr(mod, name)
