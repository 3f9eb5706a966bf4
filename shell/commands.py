r"""Backslash commands: one registry, from which `\?` and completion are generated.

    @command("\\dt", "[PATTERN]", "list tables", group="Informational", completes="table")
    def list_tables(ctx, arg) -> list[Result]: ...

A handler takes the shell (`Context`: the backend, the settings, and the few actions that
change the shell itself) and the rest of the line, and returns `Result`s — the same shape
SQL statements return, so one formatter prints both. Usage mistakes raise `CommandError`;
SQL failures propagate as `BackendError`. Both count as errors for the exit status.

Introspection is plain SQL over the backend, so it works the same embedded and remote:
    \d t        DESCRIBE t + SHOW CREATE TABLE t (key, partitioning, replication)
                + SHOW PARTITIONS t (range partitions and their tablet counts)
    \tablets t  SHOW TABLETS t; the key range of each tablet is read from its partition
                text (`HASH(a): 1, RANGE: 10 <= VALUES < 20` -> bucket 1, [10, 20))
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable
from typing import Protocol

import pyarrow as pa

from shell.backend import Backend, Result
from shell.format import EXPANDED, FORMATS, FormatOptions, human_bytes


class CommandError(Exception):
    """A backslash command was misused (unknown name, bad argument, missing file)."""


@dataclasses.dataclass
class Settings:
    """What \\x, \\timing, \\format and \\pager change."""
    format: str = "aligned"
    expanded: str = "off"
    timing: bool = False
    pager: bool = True
    null: str = "<null>"
    # \set / -v variables; ON_ERROR_STOP is the one the shell reads
    variables: dict[str, str] = dataclasses.field(default_factory=dict)

    def format_options(self, width: int | None = None) -> FormatOptions:
        return FormatOptions(self.format, self.expanded, self.null, width)

    @property
    def on_error_stop(self) -> bool:
        """psql's ON_ERROR_STOP: a script stops at its first error (exit status 3)."""
        value = self.variables.get("ON_ERROR_STOP")
        return value is not None and parse_bool(value, "ON_ERROR_STOP")


def parse_bool(value: str, name: str) -> bool:
    r"""A psql boolean variable's value (psql's ParseVariableBool): a prefix of true, false,
    yes or no, `on` / `off` (at least two letters: `o` is both), 1 or 0, any case; `\set
    ON_ERROR_STOP` with no value stores '' which psql also takes as on."""
    v = value.strip().lower()
    if v == "":
        return True
    for words, result in ((("true", "yes"), True), (("false", "no"), False)):
        if any(w.startswith(v) for w in words):
            return result
    if v in ("1", "on") or (len(v) >= 2 and "on".startswith(v)):
        return True
    if v in ("0",) or (len(v) >= 2 and "off".startswith(v)):
        return False
    raise CommandError(f'unrecognized value "{value}" for "{name}": Boolean expected')


class Context(Protocol):
    backend: Backend
    settings: Settings

    def quit(self) -> None: ...
    def reconnect(self, target: str | None) -> str: ...
    def include(self, path: str) -> None: ...
    def set_output(self, path: str | None) -> str: ...


Handler = Callable[[Context, str], list[Result]]


@dataclasses.dataclass(frozen=True)
class Command:
    name: str                      # "\\dt"
    args: str                      # "[PATTERN]" for \?
    help: str
    group: str
    run: Handler
    completes: str | None = None   # "table" | "file" | "target" | a choice list "a|b|c"
    offline: bool = False          # runs without a connection (\\x, \\c, ...)


REGISTRY: dict[str, Command] = {}


def command(name: str, args: str, help: str, *, group: str, completes: str | None = None,
            aliases: tuple[str, ...] = (), offline: bool = False):
    def register(fn: Handler) -> Handler:
        c = Command(name, args, help, group, fn, completes, offline)
        for n in (name, *aliases):
            REGISTRY[n] = c
        return fn
    return register


def parse_line(line: str) -> tuple[str, str]:
    """`\\d  metrics ` -> ("\\d", "metrics")."""
    line = line.strip()
    m = re.match(r"\\([A-Za-z?]+|\S)", line)
    if not m:
        raise CommandError(f"invalid command {line}")
    return "\\" + m.group(1), line[m.end():].strip()


def run_command(ctx: Context, line: str) -> list[Result]:
    name, arg = parse_line(line)
    cmd = REGISTRY.get(name)
    if cmd is None:
        raise CommandError(f"invalid command {name}\nTry \\? for help.")
    if not cmd.offline and ctx.backend is None:
        raise CommandError("not connected (use \\c)")
    return cmd.run(ctx, arg)


def help_text() -> str:
    """`\\?`: every registered command, grouped, generated from REGISTRY."""
    seen: dict[str, list[Command]] = {}
    for c in REGISTRY.values():
        group = seen.setdefault(c.group, [])
        if c not in group:
            group.append(c)
    width = max(len(f"{c.name} {c.args}".rstrip()) for c in REGISTRY.values()) + 2
    out = []
    for group, cmds in seen.items():
        if out:
            out.append("")
        out.append(group)
        for c in cmds:
            usage = f"{c.name} {c.args}".rstrip()
            out.append(f"  {usage.ljust(width)}{c.help}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# argument helpers

_IDENT = re.compile(r'^(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)$')


def table_arg(arg: str, usage: str) -> str:
    """The table argument as SQL text (a quoted or plain identifier)."""
    if not arg:
        raise CommandError(f"missing table name\nUsage: {usage}")
    if not _IDENT.match(arg):
        raise CommandError(f"invalid table name {arg!r}\nUsage: {usage}")
    return arg


def _on_off(arg: str, current: bool, name: str) -> bool:
    a = arg.lower()
    if not a:
        return not current
    if a in ("on", "true", "1", "yes"):
        return True
    if a in ("off", "false", "0", "no"):
        return False
    raise CommandError(f"unrecognized value \"{arg}\" for \"{name}\": on or off expected")


def _status(text: str) -> list[Result]:
    return [Result(status=text)]


def _one_table(ctx: Context, sql: str) -> pa.Table:
    rs = ctx.backend.execute(sql)
    if not rs or rs[0].table is None:
        raise CommandError(f"{sql} returned no rows")
    return rs[0].table


# ---------------------------------------------------------------------------------------------
# partition text -> key ranges

_HASH = re.compile(r"HASH\(([^)]*)\): (\d+)")


def parse_partition(text: str) -> tuple[list[tuple[str, int]], str | None]:
    """`HASH(a, b): 1, HASH(c): 0, RANGE: 10 <= VALUES < 20` ->
    ([("a, b", 1), ("c", 0)], "10 <= VALUES < 20"); the range is None when the table has
    no range level."""
    hashes = [(m.group(1), int(m.group(2))) for m in _HASH.finditer(text)]
    _, sep, rng = text.partition("RANGE: ")
    return hashes, (rng.strip() if sep else None)


_ISO = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.(\d+))?Z")


def pretty_bounds(text: str) -> str:
    """Timestamps in partition text as people write them:
    `2026-01-01T00:00:00.000000Z` -> `2026-01-01 00:00:00`."""
    def sub(m: re.Match) -> str:
        frac = (m.group(3) or "").rstrip("0")
        return f"{m.group(1)} {m.group(2)}" + (f".{frac}" if frac else "")
    return _ISO.sub(sub, text)


_BOUNDS = re.compile(r"^(?:(?P<lo>.+?) <= )?VALUES(?: < (?P<hi>.+))?$")


def key_range(rng: str | None) -> str:
    """A range partition's key range, half-open: `10 <= VALUES < 20` -> `[10, 20)`,
    `VALUES < 10` -> `(-inf, 10)`, `VALUE = 30` -> `[30, 30]`, UNBOUNDED -> `(-inf, +inf)`."""
    if rng is None or rng == "UNBOUNDED":
        return "(-inf, +inf)"
    rng = pretty_bounds(rng)
    if rng.startswith("VALUE = "):
        v = rng[len("VALUE = "):]
        return f"[{v}, {v}]"
    m = _BOUNDS.match(rng)
    if not m:
        return rng
    lo, hi = m.group("lo"), m.group("hi")
    return f"{'[' + lo if lo is not None else '(-inf'}, {hi + ')' if hi is not None else '+inf)'}"


# ---------------------------------------------------------------------------------------------
# the commands

@command("\\q", "", "quit kudusql", group="General", aliases=("\\quit",),
         offline=True)
def _quit(ctx: Context, arg: str) -> list[Result]:
    ctx.quit()
    return []


@command("\\?", "", "show this help", group="General", aliases=("\\help",),
         offline=True)
def _help(ctx: Context, arg: str) -> list[Result]:
    return _status(help_text())


def _name_list(names: list[str], arg: str, kind: str, title: str) -> list[Result]:
    """`\\dt` / `\\dv`: the names matching psql's PATTERN (* and ? wildcards; unquoted, it
    matches case-insensitively), sorted, or psql's "Did not find any ..." status."""
    if arg:
        quoted = arg.startswith('"')
        pat = arg.strip('"') if quoted else arg.lower()
        names = [n for n in names if fnmatch.fnmatchcase(n if quoted else n.lower(), pat)]
    if not names:
        return _status(f"Did not find any {kind}s." if not arg
                       else f'Did not find any {kind} named "{arg}".')
    return [Result(status=f"SELECT {len(names)}", title=title,
                   table=pa.table({"Name": pa.array(sorted(names), pa.string())}))]


@command("\\dt", "[PATTERN]", "list tables (PATTERN: * and ? wildcards)", group="Informational",
         completes="table")
def _list_tables(ctx: Context, arg: str) -> list[Result]:
    return _name_list(ctx.backend.tables(), arg, "table", "List of tables")


@command("\\dv", "[PATTERN]", "list views (PATTERN: * and ? wildcards)",
         group="Informational", completes="table")
def _list_views(ctx: Context, arg: str) -> list[Result]:
    return _name_list(_one_table(ctx, "SHOW VIEWS").column(0).to_pylist(), arg, "view",
                      "List of views")


def _describe_view(ctx: Context, t: str) -> list[Result]:
    """\\d of a view: its columns and types, then its definition (psql's `View
    definition:`)."""
    desc = _one_table(ctx, f"DESCRIBE {t}").to_pylist()
    create = _one_table(ctx, f"SHOW CREATE VIEW {t}").column(0)[0].as_py() or ""
    table = pa.table({"Column": pa.array([c["name"] for c in desc], pa.string()),
                      "Type": pa.array([c["type"] for c in desc], pa.string())})
    query = create.split("\n", 1)[1] if "\n" in create else create
    footer = ("View definition:", *(f"  {ln}" for ln in query.splitlines()))
    return [Result(status=f"SELECT {table.num_rows}", title=f'View "{_unquote(t)}"',
                   table=table, footer=footer, row_count=False)]


@command("\\d", "[TABLE|VIEW]", "describe a table (columns, key, partitioning, "
         "replication) or a view (columns, definition); no argument: \\dt",
         group="Informational", completes="table")
def _describe(ctx: Context, arg: str) -> list[Result]:
    if not arg:
        return _list_tables(ctx, "")
    t = table_arg(arg, "\\d TABLE")
    if _unquote(t) in _one_table(ctx, "SHOW VIEWS").column(0).to_pylist():
        return _describe_view(ctx, t)
    desc = _one_table(ctx, f"DESCRIBE {t}").to_pylist()
    create = _one_table(ctx, f"SHOW CREATE TABLE {t}").column(0)[0].as_py() or ""
    parts = _one_table(ctx, f"SHOW PARTITIONS {t}").to_pylist()

    key = _primary_key(create) or [c["name"] for c in desc if c.get("primary_key")]
    rows = {"Column": [], "Type": [], "Key": [], "Nullable": [], "Default": [],
            "Encoding": [], "Compression": []}
    block = any(c.get("block_size") for c in desc)
    if block:
        rows["Block size"] = []
    for c in desc:
        rows["Column"].append(c["name"])
        rows["Type"].append(c["type"])
        rows["Key"].append(str(key.index(c["name"]) + 1) if c["name"] in key else "")
        rows["Nullable"].append("" if c.get("nullable", True) else "not null")
        rows["Default"].append(c.get("default") or "")
        rows["Encoding"].append(_short(c.get("encoding"), "AUTO_ENCODING", "auto"))
        rows["Compression"].append(_short(c.get("compression"), "DEFAULT_COMPRESSION",
                                          "default"))
        if block:
            bs = c.get("block_size")
            rows["Block size"].append(str(bs) if bs else "")
    table = pa.table({k: pa.array(v, pa.string()) for k, v in rows.items()})

    footer = [f"Primary key: ({', '.join(key)})"]
    part_clause = _partition_clause(create)
    footer.append(f"Partitioning: {part_clause or 'none (one tablet)'}")
    ranged = [p for p in parts if p.get("range_partition") != "UNBOUNDED"]
    tablets = sum(int(p.get("tablets") or 0) for p in parts)
    if ranged:
        footer.append("Range partitions:")
        for p in ranged:
            n = int(p.get("tablets") or 0)
            footer.append(f"    {pretty_bounds(p['range_partition'])}  "
                          f"({n} tablet{'' if n == 1 else 's'})")
    rf = _replication(create)
    footer.append(f"Tablets: {tablets}" + (f", replication factor {rf}" if rf else ""))
    return [Result(status=f"SELECT {table.num_rows}", title=f'Table "{_unquote(t)}"',
                   table=table, footer=tuple(footer), row_count=False)]


@command("\\tablets", "TABLE", "list a table's tablets: key ranges, rowsets, sizes",
         group="Informational", completes="table")
def _tablets(ctx: Context, arg: str) -> list[Result]:
    t = table_arg(arg, "\\tablets TABLE")
    rows = _one_table(ctx, f"SHOW TABLETS {t}").to_pylist()
    parsed = [parse_partition(r.get("partition") or "") for r in rows]
    levels = [cols for cols, _ in parsed[0][0]] if parsed else []
    has_range = any(rng is not None for _, rng in parsed)
    cols: dict[str, list] = {"Tablet": [r["tablet_id"] for r in rows]}
    for i, level in enumerate(levels):
        cols[f"Bucket ({level})"] = [h[i][1] if i < len(h) else None for h, _ in parsed]
    if has_range:
        cols["Key range"] = [key_range(rng) for _, rng in parsed]
    cols["Rowsets"] = [r.get("num_rowsets") for r in rows]
    cols["MRS rows"] = [r.get("memrowset_rows") for r in rows]
    cols["On disk"] = [human_bytes(r.get("on_disk_bytes")) for r in rows]
    cols["Replicas"] = [r.get("replication_factor") for r in rows]
    types = {"Rowsets": pa.int64(), "MRS rows": pa.int64(), "Replicas": pa.int32()}
    table = pa.table({k: pa.array(v, types.get(k, pa.int32() if k.startswith("Bucket")
                                                 else pa.string()))
                      for k, v in cols.items()})
    total = sum(r.get("on_disk_bytes") or 0 for r in rows)
    rowsets = sum(r.get("num_rowsets") or 0 for r in rows)
    mrs = sum(r.get("memrowset_rows") or 0 for r in rows)
    closed = sum(r.get("memrowset_rows") is None for r in rows)
    summary = (f"{len(rows)} tablet{'' if len(rows) == 1 else 's'}, {rowsets} rowsets, "
               f"{mrs} MemRowSet rows, {human_bytes(total)} on disk")
    if closed:     # SHOW TABLETS does not open a tablet to count its MemRowSet
        summary += f"; MemRowSet rows unknown for {closed} tablet(s) not open yet"
    return [Result(status=f"SELECT {len(rows)}", title=f'Tablets of "{_unquote(t)}"',
                   table=table, footer=(summary,), row_count=False)]


@command("\\x", "[on|off|auto]", "toggle expanded output (auto: when wider than the screen)",
         group="Formatting", completes="on|off|auto", offline=True)
def _expanded(ctx: Context, arg: str) -> list[Result]:
    s = ctx.settings
    a = arg.lower()
    if not a:
        s.expanded = "off" if s.expanded != "off" else "on"
    elif a in EXPANDED:
        s.expanded = a
    else:
        raise CommandError(f'unrecognized value "{arg}" for "\\x": on, off or auto expected')
    return _status("Expanded display is used automatically." if s.expanded == "auto"
                   else f"Expanded display is {s.expanded}.")


@command("\\timing", "[on|off]", "toggle showing how long each statement took",
         group="Formatting", completes="on|off", offline=True)
def _timing(ctx: Context, arg: str) -> list[Result]:
    ctx.settings.timing = _on_off(arg, ctx.settings.timing, "\\timing")
    return _status(f"Timing is {'on' if ctx.settings.timing else 'off'}.")


@command("\\format", "[aligned|csv|json]", "set the output format (no argument: show it)",
         group="Formatting", completes="|".join(FORMATS), offline=True)
def _format(ctx: Context, arg: str) -> list[Result]:
    if arg:
        if arg.lower() not in FORMATS:
            raise CommandError(f'unknown format "{arg}": {", ".join(FORMATS)} expected')
        ctx.settings.format = arg.lower()
    return _status(f"Output format is {ctx.settings.format}.")


@command("\\pager", "[on|off]", "toggle the pager for results taller than the screen",
         group="Formatting", completes="on|off", offline=True)
def _pager(ctx: Context, arg: str) -> list[Result]:
    ctx.settings.pager = _on_off(arg, ctx.settings.pager, "\\pager")
    return _status(f"Pager usage is {'on' if ctx.settings.pager else 'off'}.")


@command("\\o", "[FILE]", "send query results to FILE (no argument: back to the screen)",
         group="Input/Output", completes="file", offline=True)
def _output(ctx: Context, arg: str) -> list[Result]:
    msg = ctx.set_output(_path(arg) or None)
    return _status(msg) if msg else []


@command("\\set", "[NAME [VALUE]]", "set a variable (no argument: list them); "
         "ON_ERROR_STOP on: scripts stop at the first error", group="Variables",
         offline=True)
def _set(ctx: Context, arg: str) -> list[Result]:
    if not arg:
        return _status("\n".join(f"{k} = '{v}'" for k, v in
                                  sorted(ctx.settings.variables.items())))
    name, _, value = arg.partition(" ")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise CommandError(f'invalid variable name: "{name}"')
    value = _path(value.strip())
    if name == "ON_ERROR_STOP":
        parse_bool(value, name)                 # refused before it is stored, as psql does
    ctx.settings.variables[name] = value
    return []


@command("\\unset", "NAME", "unset a variable", group="Variables", offline=True)
def _unset(ctx: Context, arg: str) -> list[Result]:
    if not arg:
        raise CommandError("\\unset: missing required argument")
    ctx.settings.variables.pop(arg.strip(), None)
    return []


@command("\\i", "FILE", "run the statements and commands in FILE", group="Input/Output",
         completes="file")
def _include(ctx: Context, arg: str) -> list[Result]:
    if not arg:
        raise CommandError("\\i: missing file name")
    ctx.include(_path(arg))
    return []


@command("\\c", "[DSN|DIR]", "reconnect (to the same target, or to a new one)",
         group="Connection", completes="target", aliases=("\\connect",), offline=True)
def _connect(ctx: Context, arg: str) -> list[Result]:
    return _status(ctx.reconnect(_path(arg) or None))


# ---------------------------------------------------------------------------------------------
# helpers for \d

def _path(arg: str) -> str:
    arg = arg.strip()
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "'\"":
        return arg[1:-1]
    return arg


def _unquote(ident: str) -> str:
    return ident[1:-1].replace('""', '"') if ident.startswith('"') else ident.lower()


def _short(value: str | None, default: str, shown: str) -> str | None:
    return shown if value == default else value


def _primary_key(create: str) -> list[str]:
    m = re.search(r"PRIMARY KEY \(([^)]*)\)", create)
    if not m:
        return []
    return [_unquote(c.strip()) if c.strip().startswith('"') else c.strip()
            for c in m.group(1).split(",")]


def _partition_clause(create: str) -> str | None:
    """`PARTITION BY HASH (a) PARTITIONS 2, RANGE (ts)` from SHOW CREATE TABLE's text (the
    range partitions themselves are listed from SHOW PARTITIONS)."""
    m = re.search(r"^PARTITION BY (.*)$", create, re.MULTILINE)
    if not m:
        return None
    clause = m.group(1).rstrip()
    if clause.endswith("("):
        clause = clause[:-1].rstrip()
    return clause


def _replication(create: str) -> str | None:
    m = re.search(r"'kudu\.num_tablet_replicas'\s*=\s*'(\d+)'", create)
    return m.group(1) if m else None


def command_names() -> list[str]:
    return sorted(REGISTRY)
