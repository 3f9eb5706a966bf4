"""Shared pieces of the benchmark scripts: the summary table, the load average and the
in-process point-op table."""

from __future__ import annotations

import os


def load_avg() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover
        return "load average n/a"


def load_kv(db, rows: int):
    """The in-process point-op table of bench.wire_bench and bench.write_bench: `kv (k, v,
    s)` hash-partitioned four ways, keys 0..rows-1 loaded 100,000 at a time; returns (a
    session of `db`, the table)."""
    import numpy as np
    import pyarrow as pa

    s = db.session()
    s.execute("CREATE TABLE kv (k BIGINT NOT NULL, v BIGINT, s VARCHAR(32), "
              "PRIMARY KEY (k)) PARTITION BY HASH (k) PARTITIONS 4")
    t = db.catalog.table("kv")
    for lo in range(0, rows, 100_000):
        k = np.arange(lo, min(rows, lo + 100_000))
        t.insert(pa.table({"k": k, "v": k % 1000,
                           "s": pa.array([f"value-{i}" for i in k.tolist()])}))
    return s, t


class Results:
    """Figures with their targets, printed as one summary table."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []  # (figure, value, target, verdict)
        self.misses = 0

    def add(self, figure: str, value: str, target: str = "-", ok: bool | None = None) -> None:
        verdict = "-" if ok is None else ("PASS" if ok else "MISS")
        if ok is False:
            self.misses += 1
        self.rows.append((figure, value, target, verdict))

    def print(self) -> None:
        w = [max(len(r[i]) for r in self.rows + [("figure", "value", "target", "")])
             for i in range(4)]
        line = "-" * (sum(w) + 9)
        print(line)
        print(f"{'figure':<{w[0]}} | {'value':>{w[1]}} | {'target':<{w[2]}} | result")
        print(line)
        for f, v, t, r in self.rows:
            print(f"{f:<{w[0]}} | {v:>{w[1]}} | {t:<{w[2]}} | {r}")
        print(line)

    def report(self, title: str, strict: bool) -> int:
        """Print the summary under `title`; the exit status (1 on a MISS with --strict)."""
        print(f"\n== summary: {title} ==")
        self.print()
        print(f"{self.misses} figure(s) missed their target; {load_avg()} "
              f"(other processes on the machine skew timings)")
        return 1 if (strict and self.misses) else 0
