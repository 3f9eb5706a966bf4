"""QueryGuard: what every operator consults between two bounded steps of work - may the
statement go on (cancel, statement_timeout, the client gone), and may it hold more memory.

    session.cancel() / timer / lost socket --set--> Event
                                                      |
    Executor: for each morsel (<= MORSEL_ROWS rows):  guard.check()   -> 57014 if set
              materialised Arrow data:                guard.charge(n) -> 53200 past the limit

The executor works in morsels: expression evaluation, filters and projections over at most
`MORSEL_ROWS` rows at a time; aggregation, DISTINCT and hash joins are Acero plans whose
sources are Python generators yielding morsels, so the check runs inside the Acero plan
between batches (an exception raised there ends the plan and comes out of it unchanged).
A morsel is ~10-50 ms of kernel work, so a cancel is honoured within ~100 ms of work.

Memory: the guard meters the Arrow data the statement holds - each operator's result while
its parent runs, plus what an operator accumulates while it runs (scan batches, join output
batches, cross-join chunks, evaluated morsels). `Executor.run` sets the held total to the
size of the result it returns (the inputs are then released), and a MultiJoin releases the
two tables each of its joins consumed (`release`), so the figure follows the plan's live
intermediate results, not the process's RSS; EXPLAIN ANALYZE prints its peak. Past `limit` bytes the statement
fails with 53200 (out_of_memory) before it grows the process further. The limit: the
`query_mem_limit` setting (`SET query_mem_limit = '2GB'`; the server's `--query-mem-limit`;
`kudusql.connect(dir, query_mem_limit=...)`); its default is a quarter of the machine's
RAM (`default_query_mem_limit`); 0 switches the limit off.

Sorts (ORDER BY, windows) are split by a sample sort on a numeric or temporal first key
(`Executor.sort_indices`). Not covered: the single kernel calls that cannot be split without
changing their result - a sort on a text or numeric first key, Acero's final merge of its
hash tables - run to their end once started; they are bounded by the memory limit.
"""

from __future__ import annotations

import functools
import os
import re

from planner.errors import SqlError

# Rows per morsel: the unit of work between two checks (and of Acero's source batches).
MORSEL_ROWS = 1 << 17

_UNITS = {"": 1, "b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}


def default_query_mem_limit() -> int:
    """A quarter of the machine's physical memory (at least 256 MB)."""
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):   # not POSIX: assume 8 GB
        ram = 8 << 30
    return max(256 << 20, ram // 4)


def parse_bytes(value, name: str = "query_mem_limit") -> int:
    """'2GB', '512MB', '1048576' (bytes), 0 = no limit -> bytes (PostgreSQL's memory units,
    kB/MB/GB/TB, 1024-based; the unit is case-insensitive here)."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = re.fullmatch(r"\s*'?\s*(\d+(?:\.\d+)?)\s*([kmgt]?b)?\s*'?\s*", str(value), re.I)
        if not m:
            e = SqlError(f'invalid value for parameter "{name}": "{value}"', "22023")
            e.hint = 'Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".'
            raise e
        n = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    if n < 0:
        raise SqlError(f'invalid value for parameter "{name}": "{value}"', "22023")
    return n


@functools.lru_cache(maxsize=64)
def parse_duration_ms(value: str, name: str = "statement_timeout") -> int:
    """A time setting's value (statement_timeout; read before every statement: cached): an
    integer (milliseconds) or a number with a unit, as PostgreSQL accepts it."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h|d|us)?\s*", value, re.IGNORECASE)
    if not m:
        raise SqlError(f'invalid value for parameter "{name}": "{value}"', "22023",
                       hint='Valid units for this parameter are "us", "ms", "s", "min", "h", '
                            'and "d".' if re.search(r"\d", value) else None)
    scale = {"us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}
    return int(float(m.group(1)) * scale[(m.group(2) or "ms").lower()])


def format_bytes(n: int) -> str:
    """The way SHOW prints a memory setting: the largest unit that divides it."""
    if n == 0:
        return "0"
    for unit in ("TB", "GB", "MB", "kB"):
        size = _UNITS[unit.lower()]
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


class QueryGuard:
    """One statement's cancel check and memory meter; calling it checks for cancel, so it
    can stand wherever a plain `check_cancel` callable is expected."""

    __slots__ = ("_check", "limit", "held", "peak")

    def __init__(self, check_cancel=None, limit: int | None = None):
        self._check = check_cancel
        self.limit = default_query_mem_limit() if limit is None else limit
        self.held = 0
        self.peak = 0

    @classmethod
    def of(cls, check_cancel) -> "QueryGuard":
        """`check_cancel` as a guard (a guard is returned as it is)."""
        return check_cancel if isinstance(check_cancel, QueryGuard) else cls(check_cancel)

    def __call__(self) -> None:
        if self._check is not None:
            self._check()

    check = __call__

    def charge(self, nbytes: int) -> None:
        """`nbytes` more are held; 53200 past the limit. Also checks for cancel."""
        self.held += nbytes
        self._over()
        if self._check is not None:
            self._check()

    def release(self, nbytes: int) -> None:
        """`nbytes` an operator held are dropped (a join's inputs once its result is made)."""
        self.held = max(0, self.held - nbytes)

    def hold(self, nbytes: int) -> None:
        """Exactly `nbytes` are held now (an operator returned; its inputs are released)."""
        self.held = nbytes
        self._over()

    def _over(self) -> None:
        if self.held > self.peak:
            self.peak = self.held
        if self.limit and self.held > self.limit:
            held = self.held
            self.held = 0
            e = SqlError("out of memory", "53200")
            e.detail = (f"The query needed more than query_mem_limit "
                        f"({format_bytes(self.limit)}) for its intermediate results "
                        f"({held >> 20} MB when it was stopped).")
            e.hint = ("Make the query smaller (filters, fewer columns, LIMIT) or raise the "
                      "limit: SET query_mem_limit = '8GB'.")
            raise e
