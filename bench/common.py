"""Shared pieces of the benchmark scripts: the summary table and the load average."""

from __future__ import annotations

import os


def load_avg() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover
        return "load average n/a"


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
