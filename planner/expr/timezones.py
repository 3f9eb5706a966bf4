"""Time zones: the session's TimeZone, zone names, and local time <-> UTC instants.

A `timestamptz` value is an instant: Arrow `timestamp[us, tz="UTC"]`, microseconds since
1970-01-01 00:00 UTC. What depends on a zone - reading text without an offset, casting to
and from `timestamp`, showing it as text, EXTRACT, date_trunc, adding days or months - uses
the session's zone, which the session sets around each statement (`session_time_zone`, a
context variable like planner.expr.temporal's statement clock; UTC where none is set).

Zones are PostgreSQL's: the names of the zoneinfo database (matched without regard to
case: 'america/new_york'), 'UTC' / 'GMT' / 'Z', and POSIX-style offsets, whose sign is
the reverse of ISO 8601's: '+02' and 'UTC+2' are two hours *west* of Greenwich, as
PostgreSQL reads them in SET TIME ZONE and AT TIME ZONE (an offset written inside a
timestamptz literal, '2026-01-01 00:00+02', is ISO's: east). Anything else is 22023
`time zone "x" not recognized`.

Local time -> instant (`to_utc`) is Arrow's assume_timezone, with PostgreSQL's choices at
the DST transitions: a local time that occurs twice (fall back) is the later instant
(standard time), a local time that does not exist (spring forward) is read with the offset
in force before the gap (02:30 on 2026-03-08 in New York is 07:30 UTC, shown 03:30 EDT).
Instant -> local time (`to_local`) is Arrow's local_timestamp. Both are vectorised kernels
over the tz database Arrow uses (the system's zoneinfo).
"""

from __future__ import annotations

import contextvars
import functools
import re
import zoneinfo

import pyarrow as pa
import pyarrow.compute as pc

from planner.errors import SqlError
from planner.expr.arrow_values import combine, Value
from planner.expr.sqltypes import TIMESTAMP, TIMESTAMPTZ

TIMESTAMPTZ = TIMESTAMPTZ
NAIVE = TIMESTAMP

_SESSION_ZONE: contextvars.ContextVar[str] = contextvars.ContextVar(
    "kudusql_session_time_zone", default="UTC")


class session_time_zone:
    """The session's TimeZone for the statements run in the block (`with
    session_time_zone(name): ...`). A class, not a generator context manager: the wire's
    point reads and key writes enter it on every op, and its generator frames cost
    ~1.6 us against ~0.7 here."""

    __slots__ = ("name", "token")

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.token = _SESSION_ZONE.set(self.name)

    def __exit__(self, *exc) -> None:
        _SESSION_ZONE.reset(self.token)


def current_zone() -> str:
    """The Arrow zone of the session's TimeZone."""
    return arrow_zone(_SESSION_ZONE.get())


@functools.cache
def _zone_names() -> dict[str, str]:
    return {n.lower(): n for n in zoneinfo.available_timezones()}


# a POSIX-style offset, after an optional abbreviation: 'UTC+2', 'gmt-05:30', '+02', and
# the names SET TIME ZONE gives a number of hours, '<+05:30>-05:30' (west is positive)
_POSIX = re.compile(r"^(?:(?:utc|gmt|<[^>]*>)\s*)?([+-])?(\d{1,2})(?::?(\d{2}))?$")
_HOURS = re.compile(r"^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?\s*$", re.IGNORECASE)


@functools.cache
def arrow_zone(name: str) -> str:
    """A PostgreSQL zone name -> the zone Arrow's kernels take (an IANA name or an ISO
    offset '+HH:MM'); 22023 for a name PostgreSQL would not recognise."""
    s = name.strip()
    low = s.lower()
    if low in ("utc", "gmt", "z", "zulu", "universal", "etc/utc"):
        return "UTC"
    m = _POSIX.match(low)
    if m and (m.group(1) or low[:3] in ("utc", "gmt") or low[:1] == "<"):
        sign = "-" if m.group(1) != "-" else "+"          # POSIX: '+' is west
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 15 or minutes > 59:
            raise unknown_zone(name)
        return f"{sign}{hours:02d}:{minutes:02d}"
    real = _zone_names().get(low)
    if real is None:
        raise unknown_zone(name)
    return real


def unknown_zone(name: str) -> SqlError:
    return SqlError(f'time zone "{name}" not recognized', "22023")


def check_setting(name: str) -> str:
    """SET TIME ZONE's value as PostgreSQL 15 takes it (check_timezone), and the name
    SHOW TimeZone then gives: a number is hours *east* of Greenwich (SQL's sign, unlike
    a POSIX offset) and is named as PostgreSQL names a fixed offset, '+02' and 2 ->
    '<+02>-02', -5.5 -> '<-05:30>+05:30'; a zoneinfo name is spelled as the database
    spells it ('america/new_york' -> 'America/New_York'); anything else that names a zone
    ('UTC+2', 'EST5EDT') is kept as written. 22023 `invalid value for parameter
    "TimeZone"` for what names none."""
    if _HOURS.match(name):
        try:
            seconds = round(-float(name) * 3600)         # POSIX: west is positive
        except (OverflowError, ValueError):
            seconds = None
        if seconds is None or abs(seconds) > 15 * 3600 + 59 * 60:
            raise SqlError(f'invalid value for parameter "TimeZone": "{name}"', "22023")
        return fixed_offset_name(seconds)
    try:
        arrow_zone(name)
    except SqlError:
        raise SqlError(f'invalid value for parameter "TimeZone": "{name}"', "22023") from None
    return _zone_names().get(name.strip().lower(), name)


def fixed_offset_name(west_seconds: int) -> str:
    """PostgreSQL's name of a fixed-offset zone (pg_tzset_offset), from its POSIX offset
    in seconds (west positive): -7200 -> '<+02>-02', 19800 -> '<-05:30>+05:30'."""
    a = abs(west_seconds)
    text = f"{a // 3600:02d}"
    if a % 3600:
        text += f":{a % 3600 // 60:02d}" + (f":{a % 60:02d}" if a % 60 else "")
    return f"<-{text}>+{text}" if west_seconds > 0 else f"<+{text}>-{text}"


def per_array(fn, v: Value) -> Value:
    if isinstance(v, pa.Scalar):
        return fn(pa.array([v.as_py()], v.type))[0]
    return fn(combine(v))


def to_local(v: Value, zone: str | None = None) -> Value:
    """Instants -> the local times (timestamp without time zone) in `zone` (Arrow's
    name; the session's zone by default)."""
    zone = zone or current_zone()

    def local(a: pa.Array) -> pa.Array:
        a = a.cast(TIMESTAMPTZ)
        if zone == "UTC":
            return a.cast(NAIVE)
        return pc.local_timestamp(a.cast(pa.timestamp("us", tz=zone))).cast(NAIVE)
    return per_array(local, v)


def to_utc(v: Value, zone: str | None = None) -> Value:
    """Local times in `zone` -> instants (timestamptz), PostgreSQL's way at the DST
    transitions (module docstring)."""
    zone = zone or current_zone()

    def utc(a: pa.Array) -> pa.Array:
        a = a.cast(NAIVE)
        if zone == "UTC":
            return a.cast(TIMESTAMPTZ)
        late = pc.assume_timezone(a, timezone=zone, ambiguous="latest", nonexistent="latest")
        back = pc.local_timestamp(late).cast(NAIVE)
        gap = pc.fill_null(pc.not_equal(back, a), False)
        if pc.any(gap).as_py():
            # inside a spring-forward gap: the offset before the gap
            early = pc.assume_timezone(a, timezone=zone, ambiguous="latest",
                                       nonexistent="earliest")
            offset = pc.subtract(pc.local_timestamp(early).cast(NAIVE).cast(pa.int64()),
                                 early.cast(pa.int64()))
            fixed = pc.subtract(a.cast(pa.int64()), offset)
            late = pc.if_else(gap, fixed.cast(pa.timestamp("us", tz=zone)), late)
        return late.cast(TIMESTAMPTZ)
    return per_array(utc, v)


def offset_text(v: Value, zone: str | None = None) -> Value:
    """Each instant's UTC offset in `zone` as PostgreSQL writes it: '+00', '-05',
    '+05:30', and with seconds where a zone's local mean time had them ('+05:53:28')."""
    local = to_local(v, zone)
    secs = pc.divide(pc.subtract(local.cast(pa.int64()), v.cast(TIMESTAMPTZ).cast(pa.int64())),
                     1_000_000)
    sign = pc.if_else(pc.less(secs, 0), "-", "+")
    a = pc.abs(secs)
    hours = pc.divide(a, 3600)
    minutes = pc.divide(pc.subtract(a, pc.multiply(hours, 3600)), 60)
    seconds = pc.subtract(a, pc.add(pc.multiply(hours, 3600), pc.multiply(minutes, 60)))
    hh = pc.utf8_lpad(hours.cast(pa.string()), width=2, padding="0")
    mm = pc.utf8_lpad(minutes.cast(pa.string()), width=2, padding="0")
    ss = pc.utf8_lpad(seconds.cast(pa.string()), width=2, padding="0")
    with_minutes = pc.binary_join_element_wise(hh, ":", mm, "")
    with_seconds = pc.binary_join_element_wise(with_minutes, ":", ss, "")
    text = pc.if_else(pc.not_equal(seconds, 0), with_seconds,
                      pc.if_else(pc.equal(minutes, 0), hh, with_minutes))
    return pc.binary_join_element_wise(sign, text, "")
