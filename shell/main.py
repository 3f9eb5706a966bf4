"""`kudusql shell` command line: argument parsing and the choice of mode.

    kudusql shell [DSN | DIR | --data-dir DIR] [-c SQL]... [-f FILE]... [--format F] [-x]

Modes, in order of precedence:
  -c / -f given      run them in the order given (psql allows both, repeated), then exit
  stdin not a tty    run the SQL read from standard input, then exit
  otherwise          the interactive REPL (shell.repl)

Target: `--data-dir DIR` opens an embedded database in this process; a positional
`postgresql://user@host:port/db` (or libpq `key=value`) connects to a server; a positional
that is not a DSN is taken as a data directory. With neither, $KUDUSQL_DSN, else
postgresql://kudusql@localhost:5433/kudusql (the `kudusql serve` default).

Exit status: 0 success; 1 a statement or command failed (scripts stop at the first error);
2 the connection could not be made.

`add_arguments(parser)` fills any argparse parser, so `kudusql/cli.py` reuses it for its
`shell` subcommand: `add_arguments(sub); sub.set_defaults(func=run)`.
"""

from __future__ import annotations

import argparse
import os
import sys

from shell.format import EXPANDED, FORMATS

DEFAULT_DSN = "postgresql://kudusql@localhost:5433/kudusql"


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
                   metavar="FILE", help="run the statements in FILE ('-': stdin), then exit")
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
    try:
        if args.actions:
            for kind, value in args.actions:
                if shell.quitting:
                    break
                if kind == "c":
                    ok = shell.run_script(value)
                elif value == "-":
                    ok = shell.run_script(sys.stdin.read())
                else:
                    try:
                        ok = shell.run_file(value)
                    except CommandError as e:
                        print(f"kudusql: {e}", file=sys.stderr)
                        ok = False
                if not ok:
                    return 1
            return 0
        if not interactive:
            return 0 if shell.run_script(sys.stdin.read()) else 1
        return shell.run_interactive()
    finally:
        shell.close()


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="kudusql shell", description="The kudusql SQL shell."))
    return run(parser.parse_args(argv))
