"""Session settings (PostgreSQL's GUCs) as clients see them on the wire.

A connection starts with `DEFAULTS`, overlaid by its StartupMessage parameters; `SET`,
`RESET` and `SHOW` act on them. The settings in `REPORTED` are sent as ParameterStatus
after authentication and again whenever their value changes (PostgreSQL's GUC_REPORT):
asyncpg needs `server_version`, libpq reads `client_encoding`/`standard_conforming_strings`,
pgjdbc refuses a connection whose `client_encoding` is not UTF8, `DateStyle` not ISO or
`integer_datetimes`/`standard_conforming_strings` not on/off.

Values the server cannot honour are refused (22023): another client encoding than UTF8,
a non-ISO DateStyle, standard_conforming_strings off. `statement_timeout` (milliseconds,
or with a unit: '5s', '100ms', '1min') is read by the connection; SHOW prints it and the
other time settings as PostgreSQL does (`1s`, `500ms`, `90s`, `1min`, `0`), pg_settings
gives the milliseconds with unit `ms`. `TimeZone` is checked as PostgreSQL checks it
(zoneinfo names, UTC, POSIX offsets: planner/expr/timezones.py; 22023 otherwise) and
handed to the session before each statement (wire/backend.py `hand_settings_to_session`):
statements read and compute timestamptz values in it, and the text format prints them in
it (wire/text_codec.py). `query_mem_limit` goes to the session the same way. Anything
else is stored and shown back as given, like PostgreSQL's placeholder variables.

    SET [SESSION | LOCAL] name { TO | = } { value [, ...] | DEFAULT }
    SET TIME ZONE { value | LOCAL | DEFAULT }
    SET SESSION CHARACTERISTICS AS TRANSACTION ... / SET TRANSACTION ...
    (READ ONLY / READ WRITE: default_transaction_read_only / the block's mode, enforced
    by wire/transaction.py; other modes accepted)
    RESET name | RESET ALL
    SHOW name | SHOW ALL

The dialect parses them (planner/commands.py: KuduSet, KuduReset, KuduShowSetting);
`Settings.execute(node)` runs one. `SERVER_VERSION` is the one version string the server
reports (ParameterStatus, SHOW server_version, version()).
"""

from __future__ import annotations

import re

import pyarrow as pa

from planner.errors import SqlError
from planner.expr.timezones import check_setting
from planner.guard import default_query_mem_limit, format_bytes, parse_bytes, \
    parse_duration_ms
from planner.result import StatementResult
from planner.commands import KuduReset, KuduSet, KuduShowSetting
from session.access_mode import parse_bool_setting

SERVER_VERSION = "15.6 (kudusql 0.1.0)"
SERVER_VERSION_NUM = "150006"

DEFAULTS: dict[str, str] = {
    "application_name": "",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "default_transaction_read_only": "off",
    "in_hot_standby": "off",
    "integer_datetimes": "on",
    "IntervalStyle": "postgres",
    "is_superuser": "on",
    "server_encoding": "UTF8",
    "server_version": SERVER_VERSION,
    "session_authorization": "kudusql",
    "standard_conforming_strings": "on",
    "TimeZone": "UTC",
    # not reported
    "server_version_num": SERVER_VERSION_NUM,
    "statement_timeout": "0",
    "search_path": '"$user", public',
    "transaction_isolation": "read committed",
    "default_transaction_isolation": "read committed",
    "transaction_read_only": "off",
    "extra_float_digits": "1",
    "max_identifier_length": "63",
    "max_index_keys": "32",
    "lc_collate": "C.UTF-8",
    "lc_ctype": "C.UTF-8",
    "lc_messages": "C.UTF-8",
    "bytea_output": "hex",
    "jit": "off",
    "block_size": "8192",
    "port": "5433",
    "default_transaction_deferrable": "off",
    "idle_in_transaction_session_timeout": "0",
    "lock_timeout": "0",
    "row_security": "on",
    "synchronous_commit": "on",
    "timezone_abbreviations": "Default",
    # the per-statement memory limit (planner/guard.py); the server overrides this default
    # with its --query-mem-limit at connection start
    "query_mem_limit": format_bytes(default_query_mem_limit()),
}

REPORTED = ("application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
            "in_hot_standby", "integer_datetimes", "IntervalStyle", "is_superuser",
            "server_encoding", "server_version", "session_authorization",
            "standard_conforming_strings", "TimeZone")

_CANON = {k.lower(): k for k in DEFAULTS}
_ALIASES = {"time zone": "TimeZone", "transaction isolation level": "transaction_isolation",
            "session authorization": "session_authorization", "names": "client_encoding"}
_READ_ONLY = {"server_version", "server_version_num", "server_encoding", "integer_datetimes",
              "in_hot_standby", "is_superuser", "session_authorization", "max_identifier_length",
              "max_index_keys", "lc_collate", "lc_ctype", "block_size", "port"}
_UTF8 = {"utf8", "utf-8", "unicode"}


BOOL_SETTINGS = ("default_transaction_read_only", "transaction_read_only")


def canonical(name: str) -> str:
    return _ALIASES.get(name.lower(), _CANON.get(name.lower(), name.lower()))


# settings kept in milliseconds, shown as PostgreSQL shows them (`format_ms`)
MS_SETTINGS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
_MS_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))


def format_ms(ms: int) -> str:
    """Milliseconds as SHOW prints a time setting: the largest unit that divides the value
    (`1s`, `500ms`, `90s`, `1min`, `2h`), `0` for zero."""
    if ms == 0:
        return "0"
    for unit, size in _MS_UNITS:
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


class Settings:
    """One connection's settings; `changed` collects reported ones to send as
    ParameterStatus (the connection drains it after each statement)."""

    def __init__(self, startup: dict[str, str] | None = None, *, user: str = "kudusql",
                 superuser: bool = True, port: int | None = None):
        self.values = dict(DEFAULTS)
        # extra_float_digits < 1 (kept by `set` / `reset`): the point-read fast path, which
        # prints floats in the default's shortest form only, declines (wire/fastpath.py)
        self.low_float_digits = False
        # default_transaction_read_only is "on" (kept alike): what the session's access
        # mode reads for every statement (session/access_mode.py `default_of`)
        self.default_read_only = False
        self.values["session_authorization"] = user
        self.values["is_superuser"] = "on" if superuser else "off"
        if port is not None:
            self.values["port"] = str(port)
        self.changed: list[str] = []
        # settings whose value is the connection's state, not stored: name -> () -> value
        # (transaction_read_only: the transaction's mode, wire/transaction.py)
        self.live: dict = {}
        # where a value came from, as pg_settings.source says: the StartupMessage or its
        # options ("client"), a SET in this session ("session"); else "default"
        self._client: set[str] = set()
        self._session: set[str] = set()
        for k, v in (startup or {}).items():
            if k in ("user", "database", "replication", "options"):
                continue
            self.set(k, v, startup=True)
        if startup and startup.get("options"):
            self._apply_options(startup["options"])
        self.session_defaults = dict(self.values)
        self.changed.clear()

    def _apply_options(self, options: str) -> None:
        """libpq's `options=-c name=value ...` (also `--name=value`)."""
        for m in re.finditer(r"(?:-c\s*|--)([A-Za-z_.]+)=((?:\\.|\S)+)", options):
            self.set(m.group(1).replace("-", "_"), m.group(2).replace("\\ ", " "),
                     startup=True)

    def get(self, name: str) -> str | None:
        key = canonical(name)
        live = self.live.get(key)
        return live() if live is not None else self.values.get(key)

    @property
    def query_mem_limit_bytes(self) -> int:
        return parse_bytes(self.values.get("query_mem_limit", "0"))

    @property
    def extra_float_digits(self) -> int:
        """<= 0: float text output with 15 + this many digits (float4 6 +); >= 1 the
        shortest exact form (planner/expr/float_text.py `float_digits_text`)."""
        return int(self.values.get("extra_float_digits", "1"))

    @property
    def statement_timeout_ms(self) -> int:
        return parse_duration_ms(self.values.get("statement_timeout", "0"))

    def set(self, name: str, value: str, startup: bool = False) -> None:
        key = canonical(name)
        if key in _READ_ONLY and not startup:
            raise SqlError(f'parameter "{key}" cannot be changed', "55P02")
        if key in _READ_ONLY:
            return
        value = self._check(key, value)
        (self._client if startup else self._session).add(key)
        if self.values.get(key) != value:
            self.values[key] = value
            self._derive(key, value)
            if key in REPORTED:
                self.changed.append(key)

    def _check(self, key: str, value: str) -> str:
        low = value.strip().strip("'").lower()
        if key in BOOL_SETTINGS:
            return "on" if parse_bool_setting(key, value) else "off"
        if key == "query_mem_limit":            # bytes or kB/MB/GB/TB; 0 = no limit
            return format_bytes(parse_bytes(value.strip().strip("'")))
        if key == "client_encoding":
            if low not in _UTF8:
                raise SqlError(f'invalid value for parameter "client_encoding": "{value}" '
                               "(kudusql speaks UTF8 only)", "22023")
            return "UTF8"
        if key == "DateStyle":
            parts = [p.strip().upper() for p in value.split(",")]
            if any(p not in ("ISO", "MDY", "DMY", "YMD") for p in parts):
                raise SqlError(f'invalid value for parameter "DateStyle": "{value}" (only '
                               "ISO output is supported)", "22023")
            order = next((p for p in parts if p != "ISO"), "MDY")
            return f"ISO, {order}"
        if key == "standard_conforming_strings":
            if low not in ("on", "true", "1", "yes"):
                raise SqlError('invalid value for parameter "standard_conforming_strings": '
                               f'"{value}" (only on is supported)', "22023")
            return "on"
        if key in MS_SETTINGS:
            return str(parse_duration_ms(value, key))
        if key == "extra_float_digits":
            try:
                n = int(low)
            except ValueError:
                raise SqlError(f'invalid value for parameter "extra_float_digits": '
                               f'"{value}"', "22023") from None
            if not -15 <= n <= 3:
                raise SqlError(f'{n} is outside the valid range for parameter '
                               f'"extra_float_digits" (-15 .. 3)', "22023")
            return str(n)
        if key == "IntervalStyle" and low != "postgres":
            raise SqlError(f'invalid value for parameter "IntervalStyle": "{value}"', "22023")
        if key == "TimeZone":
            if low in ("local", "default"):
                return DEFAULTS["TimeZone"]
            return check_setting(value.strip().strip("'"))
        return value

    def _derive(self, key: str, value: str) -> None:
        """Keep the flags read on hot paths in step with a changed value."""
        if key == "extra_float_digits":
            self.low_float_digits = int(value) < 1
        elif key == "default_transaction_read_only":
            self.default_read_only = value == "on"

    def source(self, key: str) -> str:
        """pg_settings.source of a canonical name: "override" (the connection's state,
        `live`), "session" (SET), "client" (the StartupMessage), or "default"."""
        if key in self.live:
            return "override"
        if key in self._session:
            return "session"
        return "client" if key in self._client else "default"

    def reset_value(self, key: str) -> str | None:
        """What RESET gives a canonical name back (pg_settings.reset_val): the startup
        value, else the default."""
        return self.session_defaults.get(key)

    def reset(self, name: str) -> None:
        key = canonical(name)
        self._session.discard(key)
        default = self.session_defaults.get(key)
        if default is None:
            self.values.pop(key, None)
        elif self.values.get(key) != default:
            self.values[key] = default
            self._derive(key, default)
            if key in REPORTED:
                self.changed.append(key)

    def reset_all(self) -> None:
        for k in list(self.values):
            if k not in _READ_ONLY:
                self.reset(k)

    def drain_changed(self) -> list[tuple[str, str]]:
        out = [(k, self.values[k]) for k in dict.fromkeys(self.changed)]
        self.changed.clear()
        return out

    # -- statements -------------------------------------------------------------------------
    def execute(self, node: KuduSet | KuduReset | KuduShowSetting) -> StatementResult:
        """Run SET / RESET / SHOW (a node of planner/commands.py)."""
        name = node.args.get("name")
        if isinstance(node, KuduSet):
            if not node.args.get("noop"):
                value = node.args.get("value")
                if value is None:
                    self.reset(name)
                else:
                    self.set(name, value)
            return StatementResult("SET")
        if isinstance(node, KuduReset):
            if name is None:
                self.reset_all()
            else:
                self.reset(name)
            return StatementResult("RESET")
        return self._show(name)

    def show(self, key: str) -> str:
        """A setting's value as SHOW prints it (time settings in PostgreSQL's units; a
        setting in `live`, the connection's state, as that says now)."""
        if key in self.live:
            return self.live[key]()
        value = self.values[key]
        return format_ms(int(value)) if key in MS_SETTINGS and value.isdigit() else value

    def _show(self, name: str | None) -> StatementResult:
        if name is None:
            names = sorted(self.values, key=str.lower)
            t = pa.table({"name": pa.array(names, pa.string()),
                          "setting": pa.array([self.show(n) for n in names], pa.string()),
                          "description": pa.array([""] * len(names), pa.string())})
            return StatementResult.rows("SHOW", t)
        key = canonical(name)
        if key not in self.values:
            raise SqlError(f'unrecognized configuration parameter "{name}"', "42704")
        return StatementResult.rows("SHOW", pa.table({key: pa.array([self.show(key)],
                                                                     pa.string())}))
