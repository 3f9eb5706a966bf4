"""MaintenanceManager: a thread that always runs the best next maintenance op.

Kudu's tablet servers never wait for a trigger to tidy storage (paper §4.11): a scheduler
looks at every registered tablet after each op and picks what to do next by a score:

    priority  op                       score
    1         FlushMRS                 memory pressure: in-memory bytes / memory limit, plus
              FlushDMS                 its own size / threshold and age / max age
    2         (WAL retention)          log bytes held back by the store, per 64 MiB
    3         MajorDeltaCompaction     REDO records per base row (read cost of deltas)
              MinorDeltaCompaction     number of REDO files
              MergingCompaction        reduction of average rowset height (knapsack policy)
              UndoDeltaBlockGC         UNDO records older than the ancient history mark

Memory pressure outranks everything (an out-of-memory kill loses the process), WAL retention
comes next (it bounds recovery time and disk), then read performance. An op is run only if
its score is positive; otherwise the thread sleeps for `poll_interval_s` or until `wake()`.

Ops run one at a time on the manager's thread (Kudu's default of one maintenance thread);
they run concurrently with reads and writes, which never wait for them except for the
short swaps at their ends.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)


@dataclasses.dataclass
class MaintenanceOp:
    name: str
    score: float
    run: Callable[[], int]
    tablet: object = None


@dataclasses.dataclass
class OpStats:
    runs: int = 0
    seconds: float = 0.0
    work: int = 0  # rows / records processed
    last_seconds: float = 0.0  # the latest run's duration
    last_run: float | None = None  # when it finished (time.time(); status pages show it)


class MaintenanceManager:
    def __init__(self, poll_interval_s: float = 0.25):
        self.poll_interval_s = poll_interval_s
        self._tablets: list = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats: dict[str, OpStats] = {}
        self.errors: list[str] = []
        self._idle = threading.Event()

    def register(self, tablet) -> None:
        with self._lock:
            if tablet not in self._tablets:
                self._tablets.append(tablet)
        tablet.maintenance = self
        self.wake()

    def unregister(self, tablet) -> None:
        with self._lock:
            if tablet in self._tablets:
                self._tablets.remove(tablet)
        tablet.maintenance = None

    def start(self) -> "MaintenanceManager":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="maintenance",
                                            daemon=True)
            self._thread.start()
        return self

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def wake(self) -> None:
        self._wake.set()

    def candidates(self) -> list[MaintenanceOp]:
        with self._lock:
            tablets = list(self._tablets)
        ops: list[MaintenanceOp] = []
        for t in tablets:
            for op in t.maintenance_ops():
                op.tablet = t
                ops.append(op)
        return ops

    def run_once(self) -> MaintenanceOp | None:
        """Run the best op if any has a positive score (also used directly by tests)."""
        ops = [op for op in self.candidates() if op.score > 0]
        if not ops:
            return None
        best = max(ops, key=lambda op: op.score)
        t0 = time.perf_counter()
        work = best.run()
        st = self.stats.setdefault(best.name, OpStats())
        st.runs += 1
        st.last_seconds = time.perf_counter() - t0
        st.seconds += st.last_seconds
        st.last_run = time.time()
        st.work += int(work or 0)
        return best

    def run_until_idle(self, max_ops: int = 1000) -> int:
        n = 0
        while n < max_ops and self.run_once() is not None:
            n += 1
        return n

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                op = self.run_once()
            except Exception as e:  # noqa: BLE001 - a failed op must not kill the thread
                log.exception("maintenance op failed")
                self.errors.append(repr(e))
                op = None
                self._stop.wait(self.poll_interval_s)
            if op is None:
                self._idle.set()
                self._wake.wait(self.poll_interval_s)
                self._wake.clear()
            else:
                self._idle.clear()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until the thread finds nothing to do (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._idle.clear()
            self.wake()
            if self._idle.wait(timeout=max(0.0, deadline - time.monotonic())):
                if not [op for op in self.candidates() if op.score > 0]:
                    return True
        return False
