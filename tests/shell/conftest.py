"""Fixtures for the shell tests: a small database, and a driver that runs the real
interactive shell in-process on prompt_toolkit's pipe input, drawing on a `vt.Screen`."""

from __future__ import annotations

import threading
import time

import pytest

import engine.catalog.table as catalog_table
from shell.backend import EmbeddedBackend
from shell.commands import Settings
from shell.repl import Shell
from tests.shell.slow_shell import slowed
from tests.shell.vt import Screen

METRICS_DDL = """CREATE TABLE metrics (
  host STRING NOT NULL, ts TIMESTAMP NOT NULL,
  value DOUBLE ENCODING BIT_SHUFFLE, note STRING,
  PRIMARY KEY (host, ts))
PARTITION BY HASH (host) PARTITIONS 2,
  RANGE (ts) (PARTITION VALUES < '2026-01-01',
              PARTITION '2026-01-01' <= VALUES < '2027-01-01')"""

METRICS_ROWS = """INSERT INTO metrics VALUES
  ('a', '2025-01-01 10:00', 0.5, NULL),
  ('b', '2026-01-01 10:00', 1.5, 'x'),
  ('c', '2026-06-01 12:30', 2.5, 'line one
line two')"""


@pytest.fixture
def data_dir(tmp_path) -> str:
    """A data directory with `metrics` (2 hash buckets x 2 ranges, 3 rows)."""
    d = str(tmp_path / "db")
    b = EmbeddedBackend(d, maintenance=False)
    try:
        b.execute(METRICS_DDL)
        b.execute(METRICS_ROWS)
    finally:
        b.close()
    return d


@pytest.fixture
def backend(data_dir):
    b = EmbeddedBackend(data_dir, maintenance=False)
    yield b
    b.close()


class Driver:
    """The interactive shell on a pipe input, in a thread; keys in, screen out."""

    ENTER, TAB, CTRL_C, CTRL_D, UP = "\r", "\t", "\x03", "\x04", "\x1b[A"

    def __init__(self, backend, *, history: str, rows: int = 30, cols: int = 100,
                 pager=None, settings: Settings | None = None):
        from prompt_toolkit.data_structures import Size
        from prompt_toolkit.input import create_pipe_input
        from prompt_toolkit.output.vt100 import Vt100_Output

        self.screen = Screen(rows, cols)
        self._pipe_cm = create_pipe_input()
        self.input = self._pipe_cm.__enter__()
        self.output = Vt100_Output(self.screen, lambda: Size(rows=rows, columns=cols),
                                   term="xterm", enable_cpr=False)
        self.shell = Shell(backend, settings=settings, stdout=self.screen,
                           stderr=self.screen, pt_input=self.input, pt_output=self.output,
                           history=history, pager=pager)
        self.status: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.status = self.shell.run_interactive()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def start(self, *, wait_completion: bool = True) -> Driver:
        self.thread.start()
        assert self.screen.wait_for(r"\w=>", 10), self.screen.text()
        if wait_completion:
            assert self.shell.completer.wait_refreshed(10)
        return self

    def send(self, keys: str, pause: float = 0.0) -> None:
        self.input.send_text(keys)
        if pause:
            time.sleep(pause)

    def type(self, text: str) -> None:
        """Type text a few characters at a time, as a person would (completion and
        highlighting run between the keys)."""
        for i in range(0, len(text), 4):
            self.input.send_text(text[i:i + 4])
            time.sleep(0.01)

    def wait_for(self, pattern: str, timeout: float = 10.0, count: int = 1) -> None:
        assert self.screen.wait_for(pattern, timeout, count=count), \
            f"{pattern!r} not on the screen:\n{self.screen.text()}"

    def finish(self, timeout: float = 10.0) -> int | None:
        """Quit (Ctrl-C clears a half-typed line, Ctrl-D on the empty line quits)."""
        deadline = time.monotonic() + timeout
        while self.thread.is_alive() and time.monotonic() < deadline:
            self.send(self.CTRL_C, 0.1)
            self.send(self.CTRL_D)
            self.thread.join(1.0)
        self._pipe_cm.__exit__(None, None, None)
        if self.error is not None:
            raise self.error
        assert not self.thread.is_alive(), "the shell did not quit"
        return self.status


@pytest.fixture
def drive(request, tmp_path):
    """drive(**kw) -> a started Driver over the `metrics` database; closed afterwards.
    The embedded `backend` is opened only when no backend is given (a test driving its
    own backend may hold the data directory itself: one owner per directory)."""
    drivers: list[Driver] = []

    def make(b=None, **kw) -> Driver:
        kw.setdefault("history", str(tmp_path / "history"))
        d = Driver(b or request.getfixturevalue("backend"), **kw).start()
        drivers.append(d)
        return d

    yield make
    for d in drivers:
        d.finish()


@pytest.fixture
def slow_scans(monkeypatch):
    """Every table scan takes 0.4 s per batch (tests/shell/slow_shell.py)."""
    monkeypatch.setattr(catalog_table.Table, "scan", slowed(catalog_table.Table.scan))
