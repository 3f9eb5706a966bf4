"""CFile: a file of columns, each a sequence of encoded pages with an ordinal index.

Layout (one file can hold several columns, like Kudu's log-block container holding the
blocks of a rowset):

    +--------+--------+-----+--------+--------+-----+--------+-----------------------+
    | col A  | col A  | ... | col B  | col B  | ... | footer | footer_len | "KSQLCF01" |
    | page 0 | page 1 |     | page 0 | page 1 |     | (JSON) |  uint32 LE |   magic    |
    +--------+--------+-----+--------+--------+-----+--------+-----------------------+

Pages start at 8-byte aligned offsets (so fixed-width values can be viewed in place). Per
column the footer holds the *ordinal index* (first row of every page, its offset and
size), each page's CRC32 (checked the first time a reader touches the page), and per-page
statistics: null count and min/max of the physical values (omitted for values longer than
64 bytes). A sorted column (the primary-key index) also keeps a *value
index*: the first and last value of every page, so a key is located with one binary search
over the footer and one inside one page. Pages are written by `encodings.encode_page`, so
each is self-describing (encoding, compression, nulls).

Readers memory-map the file and hand page buffers to the decoders without copying: an
uncompressed PLAIN page becomes an Arrow array pointing into the page cache. Files are
immutable once `finish()` has renamed them into place, so the mapping never changes.
"""

from __future__ import annotations

import bisect
import json
import os
import struct
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import errors
from engine.fs import fsync_dir  # noqa: F401 - re-exported for the rowset writers
from engine.cfile.cell_reader import page_cell_reader
from engine.cfile.encodings import (Compression, Encoding, decode_page, dict_page, encode_page,
                                    gather_page, page_encoding)

MAGIC = b"KSQLCF01"
_TRAILER = struct.Struct("<I8s")
_MAX_STAT_BYTES = 64

ENCODING_BY_NAME = {
    "AUTO_ENCODING": Encoding.AUTO, "PLAIN_ENCODING": Encoding.PLAIN,
    "PREFIX_ENCODING": Encoding.PREFIX, "RLE": Encoding.RLE, "DICT_ENCODING": Encoding.DICT,
    "BIT_SHUFFLE": Encoding.BIT_SHUFFLE, "FOR_ENCODING": Encoding.FOR,
}
# A column's COMPRESSION attribute; any other name (or none) is stored uncompressed.
COMPRESSION_BY_NAME = {"LZ4": Compression.LZ4}

_TYPES = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bool": pa.bool_(), "binary": pa.binary(),
    "fixed_size_binary[16]": pa.binary(16),
}


def _type_name(t: pa.DataType) -> str:
    name = str(t)
    if name not in _TYPES:
        raise errors.InvalidArgument(f"unsupported physical type {t}")
    return name


def _stat(v: Any) -> Any:
    """A page min/max as a JSON value (bytes as hex; None when too long to be useful)."""
    if isinstance(v, bytes):
        return None if len(v) > _MAX_STAT_BYTES else {"b": v.hex()}
    if isinstance(v, float) and v != v:
        return None
    return v


def _unstat(v: Any) -> Any:
    if isinstance(v, dict):
        return bytes.fromhex(v["b"])
    return v


class CFileWriter:
    """Writes columns page by page to `<path>.tmp`; `finish()` renames it to `path`."""

    def __init__(self, path: str, fsync: bool = True):
        self.path = path
        self._tmp = path + ".tmp"
        self._f = open(self._tmp, "wb")
        self._fsync = fsync
        self._offset = 0
        self._columns: list[dict] = []

    def add_column(self, name: str, arr: pa.Array, page_rows: int,
                   encoding: Encoding = Encoding.AUTO, compression: Compression = Compression.NONE,
                   value_index: bool = False) -> None:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        n = len(arr)
        offsets, sizes, nulls, mins, maxs, firsts, lasts = [], [], [], [], [], [], []
        crcs: list[int] = []
        for start in range(0, max(n, 1), page_rows):
            page = arr.slice(start, min(page_rows, n - start))
            data = encode_page(page, encoding, compression)
            self._f.write(data)
            crcs.append(zlib.crc32(data))
            offsets.append(self._offset)
            sizes.append(len(data))
            self._offset += len(data)
            pad = -self._offset % 8  # pages start 8-aligned so PLAIN decodes zero-copy
            if pad:
                self._f.write(b"\0" * pad)
                self._offset += pad
            nulls.append(page.null_count)
            if len(page) and page.null_count < len(page) and not pa.types.is_fixed_size_binary(
                    page.type):
                mm = pc.min_max(page)
                mins.append(_stat(mm["min"].as_py()))
                maxs.append(_stat(mm["max"].as_py()))
            else:
                mins.append(None)
                maxs.append(None)
            if value_index and len(page):
                firsts.append(page[0].as_py().hex())
                lasts.append(page[len(page) - 1].as_py().hex())
        meta = {"name": name, "type": _type_name(arr.type), "num_rows": n,
                "page_rows": page_rows, "offsets": offsets, "sizes": sizes, "nulls": nulls,
                "crc": crcs, "min": mins, "max": maxs}
        if value_index:
            meta["first"] = firsts
            meta["last"] = lasts
        self._columns.append(meta)

    def finish(self, metadata: dict | None = None) -> int:
        footer = json.dumps({"columns": self._columns, "metadata": metadata or {}},
                            separators=(",", ":")).encode()
        self._f.write(footer)
        self._f.write(_TRAILER.pack(len(footer), MAGIC))
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self._tmp, self.path)
        return self._offset + len(footer) + _TRAILER.size

    def abort(self) -> None:
        self._f.close()
        try:
            os.unlink(self._tmp)
        except FileNotFoundError:
            pass


class ColumnReader:
    """Random access to the pages of one column of a CFile."""

    def __init__(self, meta: dict, buf: pa.Buffer, path: str):
        self.name = meta["name"]
        self.type = _TYPES[meta["type"]]
        self.type_name = meta["type"]
        self.num_rows = meta["num_rows"]
        self.page_rows = meta["page_rows"]
        self._offsets = meta["offsets"]
        self._sizes = meta["sizes"]
        self.null_counts = meta["nulls"]
        self._min = meta["min"]
        self._max = meta["max"]
        self._first = [bytes.fromhex(h) for h in meta.get("first", [])]
        self._last = [bytes.fromhex(h) for h in meta.get("last", [])]
        self._buf = buf
        self._mv = memoryview(buf)
        self.path = path  # the file it reads (errors name it; compactions list the files in use)
        self.num_pages = len(self._offsets) if self.num_rows else 0
        self._cell_readers: list = [None] * len(self._offsets)
        self._crc = meta.get("crc")
        self._verified = bytearray(len(self._offsets))
        # Ordinal index: first row of each page (pages are page_rows long except the last).
        self.page_starts = np.arange(self.num_pages, dtype=np.int64) * self.page_rows

    def page_of(self, rowid: int) -> int:
        return rowid // self.page_rows

    def page_range(self, page: int) -> tuple[int, int]:
        start = page * self.page_rows
        return start, min(start + self.page_rows, self.num_rows)

    def page_buffer(self, page: int) -> pa.Buffer:
        buf = self._buf.slice(self._offsets[page], self._sizes[page])
        if not self._verified[page]:
            self._verify(page, buf)
        return buf

    def _verify(self, page: int, buf) -> None:
        """Check a page's CRC32 the first time this reader touches it (like Kudu verifying
        a block when it enters the block cache): later reads of the page are free."""
        if self._crc is not None and zlib.crc32(buf) != self._crc[page]:
            raise errors.Corruption(
                f"{self.path}: column {self.name} page {page} at offset "
                f"{self._offsets[page]}: checksum mismatch")
        self._verified[page] = 1

    def decode(self, page: int) -> pa.Array:
        try:
            return decode_page(self.page_buffer(page), self.type)
        except Exception as e:  # noqa: BLE001 - a bad page is reported with its location
            raise errors.Corruption(
                f"{self.path}: column {self.name} page {page} cannot be decoded: {e}") from e

    def gather(self, page: int, positions: np.ndarray, ascending: bool = False) -> pa.Array:
        """The page's values at `positions` (encodings.gather_page; `ascending`: they are
        in ascending order)."""
        try:
            return gather_page(self.page_buffer(page), self.type, positions, ascending)
        except errors.Corruption as e:
            raise errors.Corruption(
                f"{self.path}: column {self.name} page {page} cannot be decoded: {e}") from e

    def encoding(self, page: int) -> Encoding:
        """The encoding page `page` was written with (its header's byte)."""
        return page_encoding(self.page_buffer(page))

    def dict_page(self, page: int):
        """(dictionary, codes, validity) of a DICT page, None for other encodings
        (encodings.dict_page)."""
        try:
            return dict_page(self.page_buffer(page), self.type)
        except errors.Corruption as e:
            raise errors.Corruption(
                f"{self.path}: column {self.name} page {page} cannot be decoded: {e}") from e

    def read_cell(self, rowid: int):
        """One physical value by rowid, read in place (the point-lookup path).

        The per-page reader (header parsed, dictionary as a list) is built on first use and
        kept: a few hundred bytes a page, far less than a decoded page.
        """
        page = rowid // self.page_rows
        f = self._cell_readers[page]
        if f is None:
            if not self._verified[page]:
                self._verify(page, self._buf.slice(self._offsets[page], self._sizes[page]))
            f = page_cell_reader(self._mv, self.type, self._offsets[page], self.type_name)
            self._cell_readers[page] = f
        return f(rowid - page * self.page_rows)

    def stats(self, page: int) -> tuple[Any, Any, int, int]:
        lo, hi = self.page_range(page)
        return (_unstat(self._min[page]), _unstat(self._max[page]), self.null_counts[page],
                hi - lo)

    # -- value index (sorted columns only) --------------------------------------------------
    def first_values(self) -> list[bytes]:
        return self._first

    def find_page(self, value: bytes) -> int:
        """The only page that may hold `value` in a sorted column, or -1."""
        i = bisect.bisect_right(self._first, value) - 1
        if i < 0 or value > self._last[i]:
            return -1
        return i

    def pages_for_sorted(self, values: np.ndarray) -> np.ndarray:
        """Vectorised find_page over a numpy S array (-1 = not in any page)."""
        if not self._first:
            return np.full(len(values), -1, dtype=np.int64)
        firsts = np.array(self._first)
        lasts = np.array(self._last)
        i = np.searchsorted(firsts, values, side="right") - 1
        ok = i >= 0
        ic = np.maximum(i, 0)
        ok &= values <= lasts[ic]
        return np.where(ok, ic, -1)


class CFileReader:
    def __init__(self, path: str):
        self.path = path
        try:
            self._mmap = pa.memory_map(path, "r")
            size = self._mmap.size()
            buf = self._mmap.read_buffer(size)
        except (OSError, pa.ArrowIOError) as e:
            raise errors.Corruption(f"{path}: cannot open: {e}") from e
        self.size = size
        if size < _TRAILER.size:
            raise errors.Corruption(f"{path}: file too short ({size} bytes) to be a CFile")
        flen, magic = _TRAILER.unpack(buf.slice(size - _TRAILER.size).to_pybytes())
        if magic != MAGIC or flen > size - _TRAILER.size:
            raise errors.Corruption(f"{path}: bad CFile trailer (magic {magic!r})")
        start = size - _TRAILER.size - flen
        try:
            footer = json.loads(buf.slice(start, flen).to_pybytes())
        except ValueError as e:
            raise errors.Corruption(f"{path}: footer at offset {start} is not valid: {e}") from e
        self.metadata = footer["metadata"]
        self.columns = {c["name"]: ColumnReader(c, buf, path) for c in footer["columns"]}

    def column(self, name: str) -> ColumnReader:
        return self.columns[name]

    def close(self) -> None:
        # The mapping is not unmapped here: Arrow arrays handed out by decode() may still
        # point into it. It is released when the last such buffer is garbage collected.
        self.columns = {}
