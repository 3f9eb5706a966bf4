r"""`kudusql shell` command line: argument parsing and the choice of mode.

    kudusql shell [DSN | DIR | --data-dir DIR] [-c SQL]... [-f FILE]... [--format F] [-x]

Modes, in order of precedence:
  -c / -f given      run them in the order given (psql allows both, repeated), then exit
  stdin not a tty    run the SQL read from standard input, then exit
  otherwise          the interactive REPL (shell.repl)

Target: `--data-dir DIR` opens an embedded database in this process; a positional
`postgresql://user@host:port/db` (or libpq `key=value`) connects to a server; a positional
that is not a DSN is taken as a data directory. With neither, $KUDUSQL_DSN, else
postgresql://kudusql@localhost:5433/kudusql (the `kudusql serve` default).

Errors and exit status, as psql's: a -c string stops at its first error and its status
is 1; a -f file (or standard input) goes on after errors - each printed as
`kudusql:FILE:LINE: ERROR: ...` - and its status is 0, unless ON_ERROR_STOP is on (`-v
ON_ERROR_STOP=1`, or `\set ON_ERROR_STOP on` in the script): then it stops at the first
error with status 3. The status is the last -c / -f's (ON_ERROR_STOP: the first failing
one's, and nothing after it runs); 2 the connection could not be made.

`add_arguments(parser)` fills any argparse parser, so `kudusql/cli.py` reuses it for its
`shell` subcommand: `add_arguments(sub); sub.set_defaults(func=run)`.
"""

from __future__ import annotations

import argparse
import os
import sys

from shell.format import EXPANDED, FORMATS

DEFAULT_DSN = "postgresql://kudusql@localhost:5433/kudusql"
EXIT_USER = 3        # psql's status for a script stopped by ON_ERROR_STOP


class _Ordered(argparse.Action):
    """-c and -f append (kind, value) to one list, so they run in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("target", nargs="?", metavar="DSN",
                   help="postgresql://user@host:port/db, or a data directory")
    p.add_argument("-D", "--data-dir", metavar="DIR",
                   help="open the database in DIR in this process (embedded)")
    p.add_argument("-c", "--command", dest="actions", action=_Ordered, const="c",
                   metavar="SQL", help="run SQL (statements and backslash commands), then exit")
    p.add_argument("-f", "--file", dest="actions", action=_Ordered, const="f",
                   metavar="FILE", help="run the statements in FILE ('-': stdin), then exit; "
                   "errors are reported with their line and the file goes on, unless "
                   "ON_ERROR_STOP is set")
    p.add_argument("-v", "--set", "--variable", dest="variables", action="append",
                   default=[], metavar="NAME=VALUE",
                   help="set a variable, as \\set does (-v ON_ERROR_STOP=1: a script stops "
                        "at its first error, exit status 3)")
    p.add_argument("--format", choices=FORMATS, default=None, help="output format")
    p.add_argument("-x", "--expanded", nargs="?", const="on", choices=EXPANDED,
                   help="expanded output (\\x)")
    p.add_argument("--timing", action="store_true", help="show each statement's time")
    p.add_argument("--no-pager", action="store_true", help="never page results")
    p.add_argument("--null", default=None, metavar="TEXT",
                   help="how NULL is shown (default <null>)")
    p.add_argument("--no-maintenance", action="store_true",
                   help="embedded: do not run background flushes and compactions")
    return p


def run(args: argparse.Namespace) -> int:
    # Imported here so that building the parser (`kudusql --help`, `kudusql serve`) does not
    # load prompt_toolkit.
    from shell.backend import BackendError, EmbeddedBackend, open_backend
    from shell.commands import CommandError, Settings
    from shell.format import format_error
    from shell.repl import Shell, external_pager

    target = args.data_dir or args.target or os.environ.get("KUDUSQL_DSN") or DEFAULT_DSN
    settings = Settings()
    if args.format:
        settings.format = args.format
    if args.expanded:
        settings.expanded = args.expanded
    settings.timing = bool(args.timing)
    settings.pager = not args.no_pager
    if args.null is not None:
        settings.null = args.null
    for assignment in args.variables:          # psql: -v NAME=VALUE sets, -v NAME unsets
        name, eq, value = assignment.partition("=")
        if eq:
            settings.variables[name] = value
        else:
            settings.variables.pop(name, None)
    try:
        settings.on_error_stop
    except CommandError as e:
        print(f"kudusql: {e}", file=sys.stderr)
        return 1

    def opener(t: str):
        if args.data_dir and t == args.data_dir:     # --data-dir is a directory, always
            return EmbeddedBackend(t, maintenance=not args.no_maintenance)
        return open_backend(t, maintenance=not args.no_maintenance)

    try:
        backend = opener(target)
    except BackendError as e:
        print(format_error(e.message, sqlstate=e.sqlstate, detail=e.detail, hint=e.hint),
              file=sys.stderr)
        return 2

    interactive = not args.actions and sys.stdin.isatty()
    shell = Shell(backend, settings=settings, opener=opener,
                  pager=external_pager() if interactive and sys.stdout.isatty() else None)
    def script_status(ok: bool) -> int:
        return EXIT_USER if not ok and shell.stops_on_error() else 0

    try:
        if args.actions:
            status = 0
            for kind, value in args.actions:
                if shell.quitting:
                    break
                if kind == "c":
                    status = 0 if shell.run_script(value) else 1
                elif value == "-":
                    status = script_status(shell.run_stdin(sys.stdin.read()))
                else:
                    try:
                        status = script_status(shell.run_file(value))
                    except CommandError as e:
                        print(f"kudusql: {e}", file=sys.stderr)
                        status = 1
                if status and shell.stops_on_error():
                    break
            return status
        if not interactive:
            return script_status(shell.run_stdin(sys.stdin.read()))
        return shell.run_interactive()
    finally:
        shell.close()


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="kudusql shell", description="The kudusql SQL shell."))
    return run(parser.parse_args(argv))
