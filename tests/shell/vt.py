"""A small VT100 screen model for driving the shell in-process: feed it what a terminal
would receive (prompt_toolkit's escape sequences and the shell's plain output) and read
back the rows a user would see.

Handled: printable text (wide characters take two cells), CR, LF (as CR+LF: a tty's ONLCR),
BS, TAB, cursor movement (CSI A B C D G H f d), erase in line / display (CSI K, J), and
scrolling into a scrollback list. Colours, modes and every other sequence are ignored.
This is what prompt_toolkit's renderer emits (it moves relatively and erases); it is not
a general terminal emulator.
"""

from __future__ import annotations

import re
import threading

from wcwidth import wcwidth

_TOKEN = re.compile(
    r"\x1b\[([0-9;?>=]*)([@-~])"        # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (window title)
    r"|\x1b[()#][0-9A-Za-z]"             # charset
    r"|\x1b[^\[\]]"                      # other two-character escapes
    r"|[\x00-\x1f]"                      # C0 controls
    r"|[^\x00-\x1f\x1b]+")               # text


class Screen:
    """A file-like sink (`write`, `flush`) and the screen it draws."""

    encoding = "utf-8"

    def __init__(self, rows: int = 30, cols: int = 100):
        self.rows, self.cols = rows, cols
        self.grid = [[" "] * cols for _ in range(rows)]
        self.scrollback: list[str] = []
        self.x = self.y = 0
        self.raw: list[str] = []
        self._cond = threading.Condition()

    # -- file interface -------------------------------------------------------------------
    def write(self, data: str) -> int:
        with self._cond:
            self.raw.append(data)
            self._feed(data)
            self._cond.notify_all()
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    # -- reading ---------------------------------------------------------------------------
    def display(self) -> list[str]:
        with self._cond:
            return ["".join(r).rstrip() for r in self.grid]

    def text(self) -> str:
        """Everything that scrolled off, then the visible rows."""
        with self._cond:
            rows = self.scrollback + ["".join(r).rstrip() for r in self.grid]
        return "\n".join(rows).rstrip()

    def wait_for(self, pattern: str, timeout: float = 10.0, *, count: int = 1) -> bool:
        """Block until `pattern` (a regex, `^`/`$` per line) appears `count` times in
        `text()`."""
        rx = re.compile(pattern, re.MULTILINE)
        with self._cond:
            return self._cond.wait_for(
                lambda: len(rx.findall(self._text_locked())) >= count, timeout)

    def _text_locked(self) -> str:
        return "\n".join(self.scrollback + ["".join(r).rstrip() for r in self.grid])

    # -- the model --------------------------------------------------------------------------
    def _linefeed(self) -> None:
        self.y += 1
        if self.y >= self.rows:
            self.scrollback.append("".join(self.grid.pop(0)).rstrip())
            self.grid.append([" "] * self.cols)
            self.y = self.rows - 1

    def _put(self, ch: str) -> None:
        w = wcwidth(ch)
        if w <= 0:
            return
        if self.x + w > self.cols:
            self.x = 0
            self._linefeed()
        self.grid[self.y][self.x] = ch
        if w == 2:
            self.grid[self.y][self.x + 1] = ""
        self.x += w

    def _feed(self, data: str) -> None:
        for m in _TOKEN.finditer(data):
            tok = m.group()
            if m.group(2) is not None:
                self._csi(m.group(1), m.group(2))
            elif tok == "\r":
                self.x = 0
            elif tok == "\n":
                self.x = 0
                self._linefeed()
            elif tok == "\b":
                self.x = max(0, self.x - 1)
            elif tok == "\t":
                self.x = min(self.cols - 1, (self.x // 8 + 1) * 8)
            elif tok[0] in "\x1b" or len(tok) == 1 and ord(tok) < 32:
                continue
            else:
                for ch in tok:
                    self._put(ch)

    def _csi(self, params: str, final: str) -> None:
        if params.startswith("?") or final == "m":
            return
        nums = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        n = nums[0] if nums and nums[0] else 1
        if final == "A":
            self.y = max(0, self.y - n)
        elif final == "B":
            self.y = min(self.rows - 1, self.y + n)
        elif final == "C":
            self.x = min(self.cols - 1, self.x + n)
        elif final == "D":
            self.x = max(0, self.x - n)
        elif final == "G":
            self.x = min(self.cols - 1, n - 1)
        elif final == "d":
            self.y = min(self.rows - 1, n - 1)
        elif final in "Hf":
            row = nums[0] if nums and nums[0] else 1
            col = nums[1] if len(nums) > 1 and nums[1] else 1
            self.y, self.x = min(self.rows, row) - 1, min(self.cols, col) - 1
        elif final == "K":
            mode = nums[0] if nums else 0
            row = self.grid[self.y]
            lo, hi = {0: (self.x, self.cols), 1: (0, self.x + 1), 2: (0, self.cols)}[mode]
            for i in range(lo, hi):
                row[i] = " "
        elif final == "J":
            mode = nums[0] if nums else 0
            if mode == 0:
                self._csi("", "K")
                for r in range(self.y + 1, self.rows):
                    self.grid[r] = [" "] * self.cols
            elif mode in (2, 3):
                self.grid = [[" "] * self.cols for _ in range(self.rows)]
