r"""The shell: a prompt_toolkit REPL, and the same machinery for -c, -f and standard input.

    shell = Shell(backend)                 # or Shell(open_backend(target))
    shell.run_script(text)   -> bool       # False if a statement or command failed
    shell.run_interactive()  -> int        # the REPL, until \q or Ctrl-D

One path runs everything: input is split into items (shell.statements), a SQL item goes
to `backend.execute`, a backslash item to the command registry (shell.commands); both
produce `Result`s printed by one formatter (shell.format). Results go to `out` (the
terminal, or the file of `\o`), through the pager when taller than the screen; errors,
notices and row errors go to `err`.

Interactive loop
    prompt (PromptSession: multi-line, Enter runs the buffer once it ends with `;` or is
    a backslash command; PostgresLexer highlighting; threaded completion from a background
    metadata refresh; FileHistory at $KUDUSQL_HISTORY or ~/.kudusql_history)
      -> run the items of the buffer, each statement under a progress Application:
           worker thread: backend.execute(sql)
           main thread:   a one-line prompt_toolkit app that reads the keyboard in raw
                          mode: Ctrl-C -> backend.cancel() (a real cancel; the statement
                          fails with 57014 and the shell stays), after 1 s it shows a
                          spinner with the elapsed time; keys typed meanwhile are kept
                          and pre-filled into the next prompt
      -> Ctrl-C at the prompt clears the buffer, Ctrl-D (or \q, quit, exit) leaves.
    Reading keys in raw mode during a statement, instead of catching SIGINT, makes the
    cancel path the same for a real terminal and for prompt_toolkit's pipe input (tests).

Scripts (-c, -f, stdin, and \i) run the same items without the progress app; SIGINT
cancels the running statement. As psql: a file or standard input goes on after an error
(each error is prefixed `kudusql:FILE:LINE:`), unless the variable ON_ERROR_STOP is on
(`-v ON_ERROR_STOP=1`, `\set ON_ERROR_STOP on`, read after each failure): then it stops
at the first error (shell/main.py: exit status 3). A -c string stops at its first error
(psql sends it as one query string, which the server stops running there).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from shell import commands
from shell.backend import Backend, BackendError, Result, is_dsn, open_backend
from shell.commands import CommandError, Settings
from shell.completion import SqlCompleter
from shell.format import (
    format_elapsed,
    format_error,
    format_notice,
    format_result,
    format_row_errors,
)
from shell.statements import Item, is_complete, is_quit, split

PROGRESS_AFTER = 1.0          # seconds before the live progress line appears
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_DDL = ("CREATE", "DROP", "ALTER")
_MAX_INCLUDE_DEPTH = 16


def history_path() -> str:
    return os.path.expanduser(os.environ.get("KUDUSQL_HISTORY") or "~/.kudusql_history")


def external_pager() -> Callable[[str], None] | None:
    """$KUDUSQL_PAGER, $PAGER or `less -SRXF` (when installed), as a function of the text."""
    cmd = os.environ.get("KUDUSQL_PAGER") or os.environ.get("PAGER")
    if cmd is None:
        if not shutil.which("less"):
            return None
        cmd = "less -SRXF"
    if not cmd.strip():
        return None

    def page(text: str) -> None:
        old = None
        if threading.current_thread() is threading.main_thread():
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C belongs to the pager
        try:
            proc = subprocess.Popen(cmd, shell=True, stdin=subprocess.PIPE,
                                    encoding="utf-8", errors="replace")
            try:
                proc.communicate(text if text.endswith("\n") else text + "\n")
            except BrokenPipeError:
                pass
            proc.wait()
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)
    return page


class Shell:
    """One shell session over one backend (see the module docstring)."""

    def __init__(self, backend: Backend | None, *, settings: Settings | None = None,
                 stdout: TextIO | None = None, stderr: TextIO | None = None,
                 pt_input=None, pt_output=None, history: str | None = None,
                 pager: Callable[[str], None] | None = None,
                 opener: Callable[[str], Backend] = open_backend):
        self.backend = backend
        self.settings = settings or Settings()
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.out: TextIO = self.stdout          # \o redirects results here
        self.pt_input = pt_input
        self.pt_output = pt_output
        self.history = history
        self.pager = pager
        self.opener = opener
        self.completer = SqlCompleter()
        self.interactive = False
        self._quit = False
        self._typeahead = ""
        self._include_depth = 0
        self._source: str | None = None       # script name for error prefixes

    # -- Context (what backslash commands may do) ---------------------------------------

    def quit(self) -> None:
        self._quit = True

    @property
    def quitting(self) -> bool:
        """\\q was run: the caller stops feeding input."""
        return self._quit

    def reconnect(self, target: str | None) -> str:
        old = self.backend
        target = target or (old.target if old is not None else None)
        if not target:
            raise CommandError("\\c: no previous connection; give a DSN or a directory")
        same = old is not None and _same_target(old.target, target)
        if same:
            old.close()
            self.backend = None
        try:
            new = self.opener(target)
        except BackendError:
            if same:
                raise CommandError(f"\\c: could not reopen {target}; not connected") from None
            raise
        if old is not None and not same:
            old.close()
        self.backend = new
        self.completer.refresh(new)
        return f'You are now connected to "{new.name}" ({target}).'

    def include(self, path: str) -> None:
        ok = self.run_file(path, stop_on_error=False if self.interactive else None)
        if not ok and not self.interactive and self.stops_on_error():
            raise _ScriptFailed()

    def set_output(self, path: str | None) -> str:
        if self.out is not self.stdout:
            self.out.close()
            self.out = self.stdout
        if path:
            try:   # stays open until the next \o or close()
                self.out = open(os.path.expanduser(path), "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                raise CommandError(f"{path}: {e.strerror}") from None
        return ""

    # -- running input ------------------------------------------------------------------

    def run_file(self, path: str, *, stop_on_error: bool | None = None) -> bool:
        """Run a file (-f, \\i); its errors are prefixed with `kudusql:FILE:LINE:`.
        `stop_on_error` as run_script's. Raises CommandError when the file cannot be
        read."""
        if self._include_depth >= _MAX_INCLUDE_DEPTH:
            raise CommandError(f"\\i: files nested more than {_MAX_INCLUDE_DEPTH} deep")
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CommandError(f"{path}: {e.strerror}") from None
        self._include_depth += 1
        source, self._source = self._source, path
        try:
            return self.run_script(text, stop_on_error=stop_on_error)
        finally:
            self._include_depth -= 1
            self._source = source

    def run_stdin(self, text: str) -> bool:
        """Standard input as a script: errors prefixed `kudusql:<stdin>:LINE:`."""
        source, self._source = self._source, "<stdin>"
        try:
            return self.run_script(text, stop_on_error=None)
        finally:
            self._source = source

    def run_script(self, text: str, *, stop_on_error: bool | None = True) -> bool:
        """Run every statement and command of `text`; False if any failed. After a
        failure: stop (True), go on (False), or (None) stop if ON_ERROR_STOP is on."""
        ok = True
        for item in split(text):
            if self._quit:
                break
            if not self.run_item(item, text):
                ok = False
                if stop_on_error or (stop_on_error is None and self.stops_on_error()):
                    break
        return ok

    def stops_on_error(self) -> bool:
        """ON_ERROR_STOP is on (a script stops at its first error)."""
        try:
            return self.settings.on_error_stop
        except CommandError:
            return False

    def run_item(self, item: Item, text: str = "") -> bool:
        """Run one statement or command and print what it gave; False if it failed."""
        line = _line_of(text, item.offset)
        try:
            if item.kind == "command":
                return self._run_command(item.text, line)
            return self._run_sql(item.text, line)
        except _ScriptFailed:
            return False
        except Exception as e:  # noqa: BLE001 - the shell loop is a boundary: report, go on
            logging.getLogger("kudusql.shell").error("internal error", exc_info=e)
            self._error("ERROR:  internal error\nHINT:  This is a bug in kudusql: please "
                        "report the statement.", line)
            return False

    def _run_command(self, line: str, lineno: int) -> bool:
        try:
            results = commands.run_command(self, line)
        except CommandError as e:
            self._error(f"ERROR:  {e}", lineno)
            return False
        except BackendError as e:
            self._error(format_error(e.message, sqlstate=e.sqlstate, detail=e.detail,
                                     hint=e.hint), lineno)
            return False
        for r in results:
            self._print_result(r)
        return True

    def _run_sql(self, sql: str, line: int) -> bool:
        if self.backend is None:
            self._error("ERROR:  not connected (use \\c)", line)
            return False
        backend = self.backend
        t0 = time.monotonic()
        try:
            results = self._call(lambda: backend.execute(sql))
        except BackendError as e:
            if e.position:                   # name the line of the file the error is on
                line += sql.count("\n", 0, e.position - 1)
            self._error(format_error(e.message, sqlstate=e.sqlstate, sql=sql,
                                     position=e.position, detail=e.detail, hint=e.hint,
                                     width=self._width()), line)
            self._timing(time.monotonic() - t0)
            return False
        ok = True
        for r in results:
            self._print_result(r)
            ok = ok and not r.row_errors
        self._timing(time.monotonic() - t0)
        if any(r.command.startswith(_DDL) for r in results):
            self.completer.refresh(backend)
        return ok

    def _print_result(self, r: Result) -> None:
        for n in r.notices:
            self._error(format_notice(n))
        opts = self.settings.format_options(self._width())
        text = format_result(r, opts)
        if text:
            if r.table is not None and opts.format == "aligned":
                text += "\n"          # psql: a blank line after a table
                if r.command in ("INSERT", "UPDATE", "DELETE") and r.status:
                    text += "\n" + r.status   # ... RETURNING: then the write's tag, as psql
            self._emit(text)
        if r.row_errors:
            words = r.status.split()
            applied = int(words[-1]) if words and words[-1].isdigit() else 0
            self._error(format_row_errors(r.row_errors, applied))

    def _timing(self, seconds: float) -> None:
        """\\timing on: every statement; interactive: any that took a second or more
        (scripts stay clean for their output)."""
        if self.settings.timing or (self.interactive and seconds >= PROGRESS_AFTER):
            self._emit(format_elapsed(seconds))

    # -- output ------------------------------------------------------------------------

    def _width(self) -> int | None:
        if self.pt_output is not None:
            try:
                return self.pt_output.get_size().columns
            except OSError:
                return None
        return shutil.get_terminal_size((100, 24)).columns if self.interactive else None

    def _height(self) -> int:
        if self.pt_output is not None:
            with contextlib.suppress(OSError):
                return self.pt_output.get_size().rows
        return shutil.get_terminal_size((100, 24)).lines

    def _emit(self, text: str) -> None:
        """Results: to `out`, through the pager when interactive and taller than the
        screen (one line is kept for the prompt)."""
        if (self.interactive and self.out is self.stdout and self.settings.pager
                and self.pager is not None and text.count("\n") + 1 > self._height() - 1):
            self.stdout.flush()
            self.pager(text)
            return
        self.out.write(text + "\n")
        self.out.flush()

    def _error(self, text: str, line: int | None = None) -> None:
        if self._source is not None:           # running a file: name the file and line
            text = f"kudusql:{self._source}:{line or 1}: {text}"
        self.stderr.write(text + "\n")
        self.stderr.flush()

    # -- running a statement: cancellable -----------------------------------------------

    def _call(self, fn: Callable[[], list[Result]]) -> list[Result]:
        if self.backend is not None:
            self.backend.begin()        # a Ctrl-C from here on cancels this statement
        if self.interactive:
            return self._call_with_progress(fn)
        return self._call_blocking(fn)

    def _call_blocking(self, fn):
        """Scripts: run `fn` on a worker; SIGINT (Ctrl-C) sends a cancel and keeps waiting
        for the statement to end (it ends with 57014)."""
        if threading.current_thread() is not threading.main_thread():
            return fn()
        box: dict = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=work, name="kudusql-statement", daemon=True).start()
        while True:
            try:
                if done.wait(0.2):
                    break
            except KeyboardInterrupt:
                if self.backend is not None:
                    self.backend.cancel()
                self.stderr.write("Cancel request sent\n")
                self.stderr.flush()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _call_with_progress(self, fn):
        """Interactive: `fn` on a worker while a one-line prompt_toolkit app owns the
        keyboard (see the module docstring)."""
        import asyncio

        from prompt_toolkit.application import Application
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.keys import Keys
        from prompt_toolkit.layout import ConditionalContainer, Layout, Window
        from prompt_toolkit.layout.controls import FormattedTextControl

        box: dict = {}
        t0 = time.monotonic()
        state = {"cancels": 0}

        def progress():
            el = time.monotonic() - t0
            spin = _SPINNER[int(el * 10) % len(_SPINNER)]
            tail = ("cancel requested, waiting for the statement to stop"
                    if state["cancels"] else "Ctrl-C to cancel")
            return [("class:progress", f"{spin} running {el:.1f} s · {tail}")]

        kb = KeyBindings()

        @kb.add("c-c")
        @kb.add(Keys.SIGINT)
        def _cancel(event) -> None:
            state["cancels"] += 1
            if self.backend is not None:
                self.backend.cancel()

        @kb.add(Keys.Any)
        def _typeahead(event) -> None:
            data = event.data
            if data == "\r":
                data = "\n"
            if data.isprintable() or data == "\n":
                self._typeahead += data

        visible = Condition(lambda: time.monotonic() - t0 >= PROGRESS_AFTER)
        app: Application = Application(
            layout=Layout(ConditionalContainer(
                Window(FormattedTextControl(progress), height=1), filter=visible)),
            key_bindings=kb, refresh_interval=0.1, erase_when_done=True,
            input=self.pt_input, output=self.pt_output)

        def pre_run() -> None:
            loop = asyncio.get_running_loop()

            def finish() -> None:
                if not app.is_done:
                    app.exit()

            def work() -> None:
                try:
                    box["value"] = fn()
                except BaseException as e:  # noqa: BLE001 - re-raised by the caller
                    box["error"] = e
                finally:
                    loop.call_soon_threadsafe(finish)

            threading.Thread(target=work, name="kudusql-statement", daemon=True).start()

        app.run(pre_run=pre_run)
        if "error" in box:
            raise box["error"]
        return box["value"]

    # -- the REPL ------------------------------------------------------------------------

    def _prompt_session(self):
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import ThreadedCompleter
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.lexers import PygmentsLexer
        from pygments.lexers.sql import PostgresLexer

        kb = KeyBindings()

        @kb.add("enter")
        def _enter(event) -> None:
            """Keep a selected completion, then run the buffer if it is complete (ends
            with `;`, or is a backslash command), else start a new line."""
            b = event.current_buffer
            b.complete_state = None
            if is_complete(b.text):
                b.validate_and_handle()
            else:
                b.insert_text("\n")

        path = self.history or history_path()
        try:
            with open(path, "a", encoding="utf-8"):
                pass
            history = FileHistory(path)
        except OSError:
            history = InMemoryHistory()

        def message():
            return f"{self._name()}=> "

        def continuation(width, line_number, is_soft_wrap):
            return f"{self._name()}-> ".rjust(width)

        return PromptSession(
            message=message, multiline=True, prompt_continuation=continuation,
            lexer=PygmentsLexer(PostgresLexer), completer=ThreadedCompleter(self.completer),
            complete_while_typing=True, history=history, key_bindings=kb,
            input=self.pt_input, output=self.pt_output, enable_open_in_editor=True)

    def _name(self) -> str:
        return self.backend.name if self.backend is not None else "!"

    def run_interactive(self) -> int:
        """The REPL; returns the exit status (0)."""
        self.interactive = True
        session = self._prompt_session()
        if self.backend is not None:
            self.completer.refresh(self.backend)
            self._emit(f"kudusql shell, {self.backend.target}\n"
                       "Type \\? for help, \\q or Ctrl-D to quit.")
        while not self._quit:
            try:
                default, self._typeahead = self._typeahead.rstrip("\n"), ""
                text = session.prompt(default=default)
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if is_quit(text):
                break
            try:
                self.run_script(text, stop_on_error=False)
            except KeyboardInterrupt:       # Ctrl-C between a statement and its output
                self._error("interrupted")
        return 0

    def close(self) -> None:
        if self.out is not self.stdout:
            self.out.close()
            self.out = self.stdout
        if self.backend is not None:
            self.backend.close()
            self.backend = None


class _ScriptFailed(Exception):
    """A non-interactive \\i file stopped at an error (already printed)."""


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _same_target(a: str, b: str) -> bool:
    if is_dsn(a) or is_dsn(b):
        return a == b
    return os.path.abspath(a) == os.path.abspath(b)


__all__ = ["PROGRESS_AFTER", "Shell", "external_pager", "history_path"]
