"""COPY ... FROM STDIN and COPY ... TO STDOUT in text, CSV and binary formats.

    COPY table [(col, ...)] FROM STDIN [[WITH] (option [, ...]) | legacy options]
    COPY {table [(col, ...)] | (query)} TO STDOUT [[WITH] (option [, ...]) | legacy options]
    options: FORMAT {text | csv | binary}, DELIMITER 'c', NULL 's', HEADER [bool],
             QUOTE 'c', ESCAPE 'c', FORCE_QUOTE {(col, ...) | *}, ENCODING 'utf8'
    legacy:  BINARY, CSV, HEADER, DELIMITER [AS] 'c', NULL [AS] 's', QUOTE [AS] 'c', ...

COPY FROM (Kudu semantics, like INSERT): CopyData is buffered and cut into chunks at row
boundaries (about `CHUNK_BYTES`); each chunk is parsed into Arrow columns (text and CSV by
pyarrow's CSV reader, binary by `_BinaryReader`) and inserted as one write through the
catalog, so a failing row never stops the others. Rows that fail - a bad value (22P02),
NULL in a NOT NULL column (23502), a duplicate key (23505), a wrong number of fields
(22P04) - are collected with their line numbers; at CopyDone the client gets `COPY n` when
none failed, else one ErrorResponse: the first failure's SQLSTATE, a message saying how
many rows failed and how many were applied, and the failures ("line 3: ...") in DETAIL.
A malformed binary stream, CopyFail (57014) or a cancel stops the COPY; chunks inserted
before stay inserted.

COPY TO runs the query (or `SELECT cols FROM table`) through the session and sends one
CopyData per row, as PostgreSQL does (psycopg parses each CopyData as a row); the rows of a
batch are formatted together with Arrow kernels (wire.pg_types encoders plus escaping or
quoting), never value by value.

Not supported: COPY to or from a server file or PROGRAM (0A000; psql's \\copy works through
STDIN/STDOUT), FORCE_NOT_NULL / FORCE_NULL, encodings other than UTF8, OIDS.
"""

from __future__ import annotations

import dataclasses
import re
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from planner.commands import CopySpec
from planner.errors import SqlError
from wire import pg_types as T

CHUNK_BYTES = 4 << 20
BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\0"
BINARY_HEADER = BINARY_SIGNATURE + b"\0\0\0\0\0\0\0\0"
BINARY_TRAILER = b"\xff\xff"
MAX_REPORTED_FAILURES = 20


# -- COPY FROM --------------------------------------------------------------------------------
@dataclasses.dataclass
class Failure:
    line: int
    sqlstate: str
    message: str


@dataclasses.dataclass
class Chunk:
    table: pa.Table                 # target column names; strings or already typed
    lines: np.ndarray               # line number of each row
    failures: list[Failure]         # rows dropped while parsing (22P04 ...)


_TEXT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_END_MARK = re.compile(rb"(?:^|\n)\\\.(?:\r?\n|$)")


def _unescape_text(s: str) -> str:
    """COPY text format backslash escapes (one value; only values with a backslash)."""
    out, i, n = [], 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        d = s[i + 1]
        if d in _TEXT_ESCAPES:
            out.append(_TEXT_ESCAPES[d])
            i += 2
        elif d in "01234567":
            j = i + 1
            while j < n and j < i + 4 and s[j] in "01234567":
                j += 1
            out.append(chr(int(s[i + 1:j], 8)))
            i = j
        elif d == "x" and i + 2 < n and s[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and s[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(s[i + 2:j], 16)))
            i = j
        else:
            out.append(d)
            i += 2
    return "".join(out)


class CopyIn:
    """Incremental COPY FROM STDIN parser: `feed(data)` / `finish()` return Chunks."""

    def __init__(self, spec: CopySpec, columns: list[str], types: list[pa.DataType]):
        self.spec = spec
        self.columns = columns
        self.types = types
        self.buf = bytearray()
        self.next_line = 1            # line number of the next unparsed line
        self.header_pending = spec.header
        self.ended = False            # saw the \. end marker
        self.rows = 0
        self.binary = _BinaryReader(columns, types) if spec.format == "binary" else None

    def feed(self, data: bytes) -> list[Chunk]:
        if self.ended:
            return []
        if self.binary is not None:
            self.binary.feed(data)
            return self.binary.chunks(final=False)
        self.buf += data
        if len(self.buf) < CHUNK_BYTES:
            return []
        cut = self._cut()
        if cut <= 0:
            return []
        part = bytes(self.buf[:cut])
        del self.buf[:cut]
        return self._parse(part)

    def finish(self) -> list[Chunk]:
        if self.binary is not None:
            return self.binary.chunks(final=True)
        if self.ended or not self.buf:
            return []
        part = bytes(self.buf)
        self.buf.clear()
        if not part.endswith(b"\n"):
            part += b"\n"
        return self._parse(part)

    def _cut(self) -> int:
        """End of the last complete row in the buffer (0: none yet)."""
        buf = self.buf
        if self.spec.format == "csv":
            q = self.spec.quote.encode()
            if self.spec.escape != self.spec.quote:
                return 0            # quotes cannot be counted: parse everything at the end
            pos = len(buf)
            while True:
                nl = buf.rfind(b"\n", 0, pos)
                if nl < 0:
                    return 0
                if buf.count(q, 0, nl) % 2 == 0:   # not inside a quoted value
                    return nl + 1
                pos = nl
        return buf.rfind(b"\n") + 1

    def _parse(self, data: bytes) -> list[Chunk]:
        m = _END_MARK.search(data)
        if m is not None:
            data = data[:m.start() + (1 if m.group().startswith(b"\n") else 0)]
            self.ended = True
        first_line = self.next_line
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = first_line + data.count(b"\n", 0, e.start)
            raise SqlError(f'invalid byte sequence for encoding "UTF8" (line {line})',
                           "22021") from None
        skip = 0
        if self.header_pending:
            self.header_pending = False
            skip = 1
        nlines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        self.next_line += nlines
        if not data or nlines - skip <= 0:
            return []
        failures: list[Failure] = []
        ncols = len(self.columns)

        def bad_row(row) -> str:
            line = first_line + skip + (row.number - 1 if row.number is not None else 0)
            if row.actual_columns > row.expected_columns:
                msg = "extra data after last expected column"
            else:
                msg = f'missing data for column "{self.columns[row.actual_columns]}"' \
                    if row.actual_columns < ncols else "wrong number of columns"
            failures.append(Failure(line, "22P04", msg))
            return "skip"

        csv = self.spec.format == "csv"
        parse = pacsv.ParseOptions(
            delimiter=self.spec.delimiter,
            quote_char=self.spec.quote if csv else False,
            double_quote=csv and self.spec.escape == self.spec.quote,
            escape_char=(self.spec.escape if csv and self.spec.escape != self.spec.quote
                         else False),
            newlines_in_values=csv, ignore_empty_lines=False, invalid_row_handler=bad_row)
        read = pacsv.ReadOptions(column_names=self.columns, skip_rows=skip, use_threads=False,
                                 block_size=max(len(data) + 1, 1 << 20))
        conv = pacsv.ConvertOptions(column_types={c: pa.string() for c in self.columns},
                                    null_values=[self.spec.null], strings_can_be_null=True,
                                    quoted_strings_can_be_null=False)
        try:
            table = pacsv.read_csv(pa.BufferReader(data), read_options=read,
                                   parse_options=parse, convert_options=conv)
        except pa.ArrowInvalid as e:
            raise SqlError(f"COPY {self.spec.format} data: {e}", "22P04") from None
        # line numbers: text rows are lines; a CSV record may span lines (numbered by
        # record, which is what the client counts unless values hold newlines)
        bad = {f.line for f in failures}
        all_lines = np.arange(first_line + skip, first_line + nlines, dtype=np.int64)
        if bad:
            all_lines = all_lines[~np.isin(all_lines, list(bad))]
        lines = all_lines[:table.num_rows]
        if not csv:
            table = self._unescape(table)
        table, bad_rows = self._typed(table, lines, failures)
        if bad_rows is not None:
            table = table.filter(pa.array(~bad_rows))
            lines = lines[~bad_rows]
        self.rows += table.num_rows
        return [Chunk(table, lines, failures)]

    def _unescape(self, table: pa.Table) -> pa.Table:
        cols = []
        for col in table.columns:
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            has = pc.match_substring(col, "\\")
            if pc.any(has).as_py():
                mask = has.fill_null(False).to_numpy(zero_copy_only=False)
                vals = [_unescape_text(v) for v, m in zip(col.to_pylist(), mask) if m]
                col = pc.replace_with_mask(col, pa.array(mask), pa.array(vals, pa.string()))
            cols.append(col)
        return pa.Table.from_arrays(cols, names=table.column_names)

    def _typed(self, table: pa.Table, lines: np.ndarray, failures: list[Failure]
               ) -> tuple[pa.Table, np.ndarray | None]:
        """The text values converted to the columns' types, vectorised; values that do not
        convert fail their row (22P02 / 22003, reported with the line number) and the
        returned mask drops those rows. PostgreSQL's text forms Arrow's cast does not read
        are handled here: bool (t/f/yes/no/on/off), bytea (\\x hex), zoned timestamps."""
        cols = []
        bad: np.ndarray | None = None
        for name, col, typ in zip(self.columns, table.columns, self.types):
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            if pa.types.is_string(typ) or col.null_count == len(col):
                cols.append(col.cast(typ) if col.null_count == len(col) else col)
                continue
            if pa.types.is_boolean(typ):
                low = pc.utf8_lower(pc.utf8_trim_whitespace(col))
                t = pc.is_in(low, value_set=pa.array(sorted(T.BOOL_TRUE_WORDS)))
                f = pc.is_in(low, value_set=pa.array(sorted(T.BOOL_FALSE_WORDS)))
                ok = pc.or_(pc.or_(t, f), col.is_null())
                col = pc.if_else(ok, pc.if_else(col.is_null(),
                                                pa.scalar(None, pa.bool_()), t), col)
                if pc.all(ok).as_py():
                    cols.append(col)
                    continue
                col = col.cast(pa.string())
            elif pa.types.is_binary(typ):
                col, bad = _bytea(name, col, lines, failures, bad)
                cols.append(col)
                continue
            elif pa.types.is_timestamp(typ) and pc.any(pc.match_substring_regex(
                    col, r"[+-]\d\d(:?\d\d)?$|Z$")).as_py():
                col = _timestamps_with_zone(col)
                if pa.types.is_timestamp(col.type):
                    cols.append(col)
                    continue
            try:
                cols.append(col.cast(typ))
                continue
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
            # error path only: find the values that do not convert, one by one
            vals = col.to_pylist()
            out = []
            if bad is None:
                bad = np.zeros(len(vals), bool)
            for i, v in enumerate(vals):
                try:
                    out.append(None if v is None else pa.array([v]).cast(typ)[0].as_py())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    out.append(None)
                    if not bad[i]:
                        bad[i] = True
                        failures.append(Failure(int(lines[i]), *_invalid(name, typ, v)))
            cols.append(pa.array(out, typ))
        return pa.Table.from_arrays(cols, names=table.column_names), bad


def _bytea(name: str, col: pa.Array, lines: np.ndarray, failures: list[Failure],
           bad: np.ndarray | None) -> tuple[pa.Array, np.ndarray | None]:
    """bytea text values (\\x hex or escapes), value by value: rare in bulk loads."""
    vals = []
    for i, v in enumerate(col.to_pylist()):
        try:
            vals.append(None if v is None else T.parse_bytea(v))
        except T.ParamError as e:
            if bad is None:
                bad = np.zeros(len(col), bool)
            if not bad[i]:
                bad[i] = True
                failures.append(Failure(int(lines[i]), "22P02",
                                        f'{e.message} (column "{name}")'))
            vals.append(None)
    return pa.array(vals, pa.binary()), bad


def _invalid(name: str, typ: pa.DataType, value: str) -> tuple[str, str]:
    pgname = T.TYPES.get(T.type_oid(typ)[0], ("?",))[0]
    try:
        float(value)
        numeric = True
    except ValueError:
        numeric = False
    if numeric and (pa.types.is_integer(typ) or pa.types.is_decimal(typ)):
        return "22003", f'value "{value}" is out of range for type {pgname} (column "{name}")'
    return "22P02", f'invalid input syntax for type {pgname}: "{value}" (column "{name}")'


def _timestamps_with_zone(col: pa.Array) -> pa.Array:
    vals = []
    for v in col.to_pylist():
        try:
            vals.append(None if v is None else T.parse_text(v, T.TIMESTAMPTZ))
        except T.ParamError:
            return col
    return pa.array(vals, pa.timestamp("us"))


class _BinaryReader:
    """COPY BINARY tuples -> Arrow columns. The format is a chain of length prefixes
    (int16 field count, then int32 length + bytes per field), so finding where each field
    starts is a Python loop over fields: pyarrow has no reader for it. The values are then
    decoded column by column with numpy where the width is fixed."""

    def __init__(self, columns: list[str], types: list[pa.DataType]):
        self.columns, self.types = columns, types
        self.buf = bytearray()
        self.pos = 0
        self.header_done = False
        self.done = False
        self.rows = 0
        self.fields: list[list[bytes | None]] = [[] for _ in columns]

    def feed(self, data: bytes) -> None:
        if self.done:
            return
        self.buf += data
        self._scan()

    def _scan(self) -> None:
        buf, pos, n = self.buf, self.pos, len(self.buf)
        unpack16, unpack32 = struct.Struct("!h").unpack_from, struct.Struct("!i").unpack_from
        if not self.header_done:
            if n < 19:
                return
            if bytes(buf[:11]) != BINARY_SIGNATURE:
                raise SqlError("COPY file signature not recognized", "22P04")
            (flags,) = unpack32(buf, 11)
            (ext,) = unpack32(buf, 15)
            if flags & 0x10000:
                raise SqlError("COPY BINARY with OIDs is not supported", "0A000")
            if ext < 0 or n < 19 + ext:
                if ext < 0:
                    raise SqlError("invalid COPY file header (wrong length)", "22P04")
                return
            pos = 19 + ext
            self.header_done = True
        ncols = len(self.columns)
        fields = self.fields
        while pos + 2 <= n:
            (nf,) = unpack16(buf, pos)
            if nf == -1:
                self.done = True
                pos += 2
                break
            if nf != ncols:
                raise SqlError(f"row field count is {nf}, expected {ncols} (line "
                               f"{self.rows + len(fields[0]) + 1})", "22P04")
            p = pos + 2
            row: list[bytes | None] = []
            for _ in range(nf):
                if p + 4 > n:
                    row = None
                    break
                (ln,) = unpack32(buf, p)
                p += 4
                if ln == -1:
                    row.append(None)
                    continue
                if ln < 0:
                    raise SqlError("invalid field length in COPY BINARY data", "22P04")
                if p + ln > n:
                    row = None
                    break
                row.append(bytes(buf[p:p + ln]))
                p += ln
            if row is None:
                break
            for c, v in enumerate(row):
                fields[c].append(v)
            pos = p
        del buf[:pos]
        self.pos = 0

    def chunks(self, final: bool) -> list[Chunk]:
        if final and not self.done and (self.buf or not self.header_done):
            raise SqlError("unexpected EOF in COPY data", "22P04")
        count = len(self.fields[0]) if self.fields else 0
        if count == 0 or (not final and count < 65536):
            return []
        cols = [_decode_binary_column(vals, typ, name)
                for vals, typ, name in zip(self.fields, self.types, self.columns)]
        table = pa.Table.from_arrays(cols, names=self.columns)
        lines = np.arange(self.rows + 1, self.rows + 1 + count, dtype=np.int64)
        self.rows += count
        self.fields = [[] for _ in self.columns]
        return [Chunk(table, lines, [])]


_FIXED = {T.INT2: (2, ">i2"), T.INT4: (4, ">i4"), T.INT8: (8, ">i8"), T.FLOAT4: (4, ">f4"),
          T.FLOAT8: (8, ">f8")}


def _decode_binary_column(vals: list[bytes | None], typ: pa.DataType, name: str) -> pa.Array:
    oid, _ = T.type_oid(typ)
    mask = np.fromiter((v is None for v in vals), bool, len(vals))
    present = [v for v in vals if v is not None]
    widths = {len(v) for v in present}
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        ints = pa.types.is_integer(typ)
        if len(widths) <= 1:
            w = widths.pop() if widths else _FIXED.get(oid, (8, ">i8"))[0]
            dt = {2: ">i2", 4: ">i4", 8: ">i8"}.get(w) if ints else {4: ">f4", 8: ">f8"}.get(w)
            if dt is None:
                raise SqlError(f'incorrect binary data format for column "{name}"', "22P03")
            filler = b"\0" * w
            raw = np.frombuffer(b"".join(v if v is not None else filler for v in vals), dt)
            return pa.array(raw.astype(dt[1:]), mask=mask)
    if oid == T.DATE and widths <= {4}:
        raw = np.frombuffer(b"".join(v if v is not None else b"\0" * 4 for v in vals), ">i4")
        return pa.array((raw.astype(np.int32) + T.PG_EPOCH_DAYS), pa.int32(),
                        mask=mask).cast(pa.date32())
    if oid in (T.TIMESTAMP, T.TIMESTAMPTZ) and widths <= {8}:
        raw = np.frombuffer(b"".join(v if v is not None else b"\0" * 8 for v in vals), ">i8")
        return pa.array(raw.astype(np.int64) + T.PG_EPOCH_US, pa.int64(),
                        mask=mask).cast(pa.timestamp("us"))
    if oid == T.BOOL and widths <= {1}:
        raw = np.frombuffer(b"".join(v if v is not None else b"\0" for v in vals), np.uint8)
        return pa.array(raw != 0, mask=mask)
    if oid == T.BYTEA:
        return pa.array(vals, pa.binary())
    if oid == T.TEXT:
        try:
            return pa.array(vals, pa.binary()).cast(pa.string())
        except pa.ArrowInvalid:
            raise SqlError('invalid byte sequence for encoding "UTF8"', "22021") from None
    # numeric, or integers of mixed widths: value by value
    out = []
    for v in vals:
        if v is None:
            out.append(None)
            continue
        if pa.types.is_integer(typ) and len(v) in (2, 4, 8):
            out.append(int.from_bytes(v, "big", signed=True))
        elif pa.types.is_floating(typ) and len(v) in (4, 8):
            out.append(struct.unpack("!f" if len(v) == 4 else "!d", v)[0])
        else:
            try:
                out.append(T.parse_binary(v, oid))
            except T.ParamError as e:
                raise SqlError(f'{e.message} (column "{name}")', e.sqlstate) from None
    try:
        return pa.array(out, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(out)


# -- COPY TO ----------------------------------------------------------------------------------
_NEEDS_ESCAPE = r"[\\\x08\x0c\n\r\t\x0b]"


def _plain_text(t: pa.DataType) -> bool:
    """Types whose text form is made of letters, digits and `-+.:` only (numbers, NaN and
    Infinity, booleans, dates): nothing to escape unless the delimiter is such a character."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or \
        pa.types.is_boolean(t) or pa.types.is_date(t)


def _text_field(col: pa.Array, spec: CopySpec, zone: str = "UTC") -> pa.Array:
    s = T.encode_text(col, zone)
    if not (pa.types.is_string(s.type) or pa.types.is_large_string(s.type)):
        s = s.cast(pa.string())
    if _plain_text(col.type) and not (spec.delimiter.isalnum() or spec.delimiter in "-+.:"):
        return s.fill_null(spec.null)      # nothing to escape: skip the scan of every value
    pattern = _NEEDS_ESCAPE if spec.delimiter == "\t" else \
        _NEEDS_ESCAPE[:-1] + re.escape(spec.delimiter) + "]"
    if pc.any(pc.match_substring_regex(s, pattern)).as_py():
        s = pc.replace_substring(s, "\\", "\\\\")
        for ch, rep in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"),
                        ("\f", "\\f"), ("\v", "\\v")):
            s = pc.replace_substring(s, ch, rep)
        if spec.delimiter not in ("\t", "\\"):
            s = pc.replace_substring(s, spec.delimiter, "\\" + spec.delimiter)
    return s.fill_null(spec.null)


def _csv_field(col: pa.Array, spec: CopySpec, force: bool, zone: str = "UTC") -> pa.Array:
    s = T.encode_text(col, zone)
    if not pa.types.is_string(s.type):
        s = s.cast(pa.string())
    q, e = spec.quote, spec.escape
    special = "[" + re.escape(spec.delimiter + q + "\n\r") + "]"
    need = pc.or_(pc.match_substring_regex(s, special), pc.equal(s, pa.scalar("")))
    if spec.null != "":
        need = pc.or_(need, pc.equal(s, pa.scalar(spec.null)))
    if force:
        need = pc.is_valid(s)
    need = need.fill_null(False)
    if pc.any(need).as_py():
        inner = s
        if e != q:
            inner = pc.replace_substring(inner, e, e + e)
        inner = pc.replace_substring(inner, q, e + q)
        quoted = pc.binary_join_element_wise(pa.scalar(q), inner, pa.scalar(q), "")
        s = pc.if_else(need, quoted, s)
    return s.fill_null(spec.null)


def _copy_data(parts: list) -> bytes:
    """One CopyData message per row: `d`, the length, then the row's `parts` concatenated
    (binary arrays, and binary scalars that stand in every row). The lengths are summed
    first, so one join builds every message."""
    n = next(len(p) for p in parts if isinstance(p, pa.Array))
    fixed = sum(len(p.as_py()) for p in parts if isinstance(p, pa.Scalar))
    size = np.full(n, 4 + fixed, np.int64)
    for p in parts:
        if isinstance(p, pa.Array):
            size += pc.binary_length(p).to_numpy(zero_copy_only=False)
    h = np.empty((n, 5), np.uint8)
    h[:, 0] = ord("d")
    h[:, 1:] = size.astype(">i4").view(np.uint8).reshape(n, 4)
    head = pa.FixedSizeBinaryArray.from_buffers(pa.binary(5), n, [None, pa.py_buffer(h)]) \
        .cast(pa.binary())
    joined = pc.binary_join_element_wise(head, *parts, pa.scalar(b"", pa.binary()))
    offs = np.frombuffer(joined.buffers()[1], np.int32, n + 1, joined.offset * 4)
    return memoryview(joined.buffers()[2])[offs[0]:offs[-1]].tobytes()


def _fields_to_messages(fields: list[pa.Array], delimiter: str) -> bytes:
    """One CopyData message per row of text fields (no NULLs left): the fields joined by the
    delimiter, then a newline, all in the one join of `_copy_data`."""
    d = pa.scalar(delimiter.encode(), pa.binary())
    parts: list = []
    for i, f in enumerate(fields):
        if i:
            parts.append(d)
        parts.append(f.cast(pa.binary()))
    parts.append(pa.scalar(b"\n", pa.binary()))
    return _copy_data(parts)


def _lines_to_messages(lines: pa.Array) -> bytes:
    """One CopyData message per line (already terminated)."""
    return _copy_data([lines.cast(pa.binary())])


class CopyOut:
    """Formats result batches as CopyData messages (one per row); text and CSV show
    timestamptz values in `zone` (the session's TimeZone), as PostgreSQL's COPY TO does."""

    def __init__(self, spec: CopySpec, names: list[str], zone: str = "UTC",
                 float_digits: int = 1):
        self.spec = spec
        self.names = names
        self.zone = zone
        self.float_digits = float_digits    # extra_float_digits (<= 0: fewer digits)
        self.first = True

    def header(self) -> bytes:
        """Messages before the first batch (the CSV/text header line)."""
        if self.spec.format != "binary" and self.spec.header:
            d = self.spec.delimiter
            cols = pa.array(self.names, pa.string())
            fields = _csv_field(cols, self.spec, False) if self.spec.format == "csv" else cols
            line = d.join(fields.to_pylist()) + "\n"
            return _lines_to_messages(pa.array([line], pa.string()))
        return b""

    def batch(self, batch: pa.RecordBatch | pa.Table) -> bytes:
        if batch.num_rows == 0:
            return b""
        if self.spec.format != "binary" and self.float_digits < 1:
            batch = T.apply_float_digits(batch, [0] * batch.num_columns, self.float_digits)
        cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                for c in batch.columns]
        if self.spec.format == "binary":
            # the rows of a batch are built together, then cut into one CopyData each
            rows, sizes = T.join_rows([T.encode_binary(c) for c in cols], b"", False,
                                      with_sizes=True)
            n = len(sizes)
            offs = np.zeros(n + 1, np.int32)
            np.cumsum(sizes, out=offs[1:])
            lines = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offs),
                                                                  pa.py_buffer(rows)])
            if self.first:
                first = pa.array([BINARY_HEADER + lines[0].as_py()], pa.binary())
                lines = pa.concat_arrays([first, lines.slice(1)])
            self.first = False
            return _lines_to_messages(lines)
        if self.spec.format == "csv":
            fq = self.spec.force_quote
            fields = [_csv_field(c, self.spec, fq is True or n in (fq or ()), self.zone)
                      for c, n in zip(cols, self.names)]
        else:
            fields = [_text_field(c, self.spec, self.zone) for c in cols]
        return _fields_to_messages(fields, self.spec.delimiter)

    def trailer(self) -> bytes:
        if self.spec.format != "binary":
            return b""
        data = (BINARY_HEADER if self.first else b"") + BINARY_TRAILER
        return b"d" + struct.pack("!i", len(data) + 4) + data
