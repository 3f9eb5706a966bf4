"""Slow table scans for the shell tests, and `python -m shell` with them for child processes.

`slowed(scan, prefix)` wraps `engine.catalog.table.Table.scan` so that every batch of a
scan (of the tables whose name starts with `prefix`) takes DELAY seconds: a long query whose
executor checks for a cancel between batches, as it does on a big table. Run as a script,
this is `python -m shell` with scans of `slow_*` tables slowed (the tmux and SIGINT tests).
"""

from __future__ import annotations

import sys
import time

import engine.catalog.table as catalog_table

DELAY = 0.4


class SlowScan:
    def __init__(self, scan):
        self._scan = scan

    def __iter__(self):
        return self

    def __next__(self):
        time.sleep(DELAY)
        return next(self._scan)

    def __getattr__(self, name):
        return getattr(self._scan, name)


def slowed(real_scan, prefix: str = ""):
    def scan(self, *a, **k):
        s = real_scan(self, *a, **k)
        return SlowScan(s) if self.name.startswith(prefix) else s
    return scan


if __name__ == "__main__":
    from shell.main import main
    catalog_table.Table.scan = slowed(catalog_table.Table.scan, "slow_")
    sys.exit(main())
