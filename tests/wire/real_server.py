"""A real `kudusql serve` process for tests that need one (the directory lock, cancel and
connection-loss tests): started on a free 127.0.0.1 port, every wait bounded, always
stopped (SIGTERM, then SIGKILL) by the context manager."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class RealServer:
    def __init__(self, data_dir: str, *args: str, start_timeout: float = 60.0):
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kudusql", "serve", "--data-dir", data_dir, "--port", "0",
             *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port: int | None = None
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(start_timeout)
        m = re.search(r"on 127\.0\.0\.1:(\d+)", got[0]) if got else None
        if m is None:
            self.stop()
            raise RuntimeError(f"server did not start: {got!r} {self.stderr_lines[-5:]!r}")
        self.port = int(m.group(1))
        threading.Thread(target=lambda: self.proc.stdout.read(), daemon=True).start()

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def dsn(self, **kw) -> str:
        extra = "".join(f" {k}={v}" for k, v in kw.items())
        return f"host=127.0.0.1 port={self.port} user=kudusql dbname=kudusql{extra}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)

    def __enter__(self) -> "RealServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def real_server(data_dir, *args: str):
    s = RealServer(str(data_dir), *args)
    try:
        yield s
    finally:
        s.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def wait_until(pred, timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
