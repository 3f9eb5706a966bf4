"""Self-describing column pages: encode one Arrow array of a *physical* type into bytes and back.

A page is the unit the cfile writer emits per column and the unit a scan decodes. Everything a
reader needs is in the page itself except the Arrow type, which the caller passes (the cfile
footer knows the column type); the page records a type tag so a mismatch is caught, not
misread.

Physical types
--------------
int8/16/32/64, float32/float64, bool, binary and fixed_size_binary(16) (DECIMAL128). Logical
types (string, date32, timestamp, decimal) are mapped to these by `engine.types.to_physical`
before encoding; any other type raises ValueError. Inputs may hold nulls and may be slices
(nonzero offset); a page holds fewer than 2**31 rows (the cfile writer cuts ~64K-row pages).

Page layout (all integers little-endian)
----------------------------------------
::

    header  24 bytes  struct "<BBBBIIII4x":
                      magic 0xC1, encoding, compression, type tag,
                      row count, null count, body size (uncompressed), stored body size
    body    stored-size bytes; LZ4 block (no size prefix) of the body when compression == LZ4
      validity  ceil(n/8) bytes, LSB-first Arrow bitmap, padded to 8 -- only if null count > 0
      values    the encoding's section (below)

Every section starts at an 8-byte multiple from the start of the page, so values of an
uncompressed page are aligned whenever the page itself is (the cfile writer should place pages
at 8-aligned file offsets; unaligned pages still decode, just through numpy's slow path).

Value sections (n = row count, w = value width in bytes, "pad" = zero-pad to 8)
    PLAIN        fixed width: n*w raw values; bool: ceil(n/8) Arrow bitmap bytes;
                 binary: (n+1) int32 offsets starting at 0, pad, data bytes, pad.
    FOR          "<qB7x" (min, delta width d in {1,2,4,8}), then n uint<8d> deltas v - min
                 (computed in the unsigned type of the column's width, so it wraps correctly
                 for any int64 range).
    RLE          "<I4x" run count r, r run values (w bytes each; bool as uint8 0/1), pad,
                 r uint32 *cumulative run ends* (not lengths: gather is one searchsorted, and
                 decode needs only np.diff over r values), pad.
    DICT         "<IB3x" (dictionary size k, code width c in {1,2,4}), the dictionary as a PLAIN
                 binary section with k rows, then n uint<8c> codes, pad.
    BIT_SHUFFLE  the n values (zero-padded to a multiple of 8 rows) bit-transposed: for every
                 byte j < w and bit b < 8, a plane of n/8 bytes whose byte g holds bit b of byte
                 j of values 8g..8g+7 (LSB = value 8g; engine.cfile.bitshuffle). Like Kudu,
                 always LZ4-compressed (whatever `compression` says), unless LZ4 does not
                 shrink it (see below).

Invariants
----------
* Every slot has a valid value: null slots are filled before encoding (integers and bools with
  the previous non-null value -- a forward fill -- so runs and the FOR range are not
  disturbed; floats and fixed_size_binary with zeros; binary keeps whatever bytes the input
  had under the null). Decoding is therefore one pass with no null special-casing.
* decode_page returns exactly the requested physical type. An uncompressed PLAIN page decodes
  zero-copy: the result's buffers are slices of `buf` (which the result keeps alive). This is
  the full-scan hot path. FOR decode is one astype + one in-place add; RLE one np.repeat (short runs: a
  running sum of the run-start differences, `_rle_expand`);
  DICT one Arrow take of the dictionary -- or, when all dictionary entries have the same
  length (flag/status columns), a numpy fixed-width row gather plus arange offsets, ~4x
  faster than Arrow's variable-length take.
* gather_page(buf, typ, pos) == decode_page(buf, typ).take(pos) and touches only the selected
  slots for PLAIN (zero-copy view, then take), FOR (deltas[pos]), DICT (codes[pos], then take)
  and RLE (searchsorted on the run ends). BIT_SHUFFLE and any LZ4 page decompress/decode the
  whole body first. Positions outside [0, n) raise IndexError.
* The header records the encoding and compression actually used: AUTO resolves to a concrete
  encoding, PREFIX resolves to PLAIN, and LZ4 (also BIT_SHUFFLE's LZ4) is dropped -- recorded as
  NONE -- when it does not make the body smaller, so incompressible pages stay zero-copy.

AUTO (per page, from cheap estimates; ties prefer the faster-to-decode encoding)
    integers      the smallest of PLAIN, FOR (from min/max) and RLE (from the run count
                  count_nonzero(v[1:] != v[:-1]) + 1).
    bool          RLE if its size (from the run count) is below the bitmap's, else PLAIN.
    binary        DICT if distinct values <= n/2 and dictionary bytes <= half the data bytes,
                  else PLAIN. Pages of >= 2048 rows are first probed with a strided sample of
                  ~1024 rows: if >= 99% of it is distinct, the page is taken as high-cardinality
                  and the full hash build is skipped (it costs more than the rest of the flush
                  for comment-like columns).
    floats, fixed_size_binary(16)  PLAIN.

Encodings allowed per type (anything else raises ValueError)
    integers: PLAIN FOR RLE BIT_SHUFFLE   floats, fsb(16): PLAIN BIT_SHUFFLE
    bool: PLAIN RLE                        binary: PLAIN DICT PREFIX(-> PLAIN)

Deliberately not done
---------------------
* PREFIX (front coding) is not implemented: it is inherently sequential to decode, so a binary
  page asked for PREFIX is written as PLAIN (page_encoding reports PLAIN); no NotImplementedError,
  so schemas that name PREFIX_ENCODING (Kudu's choice for sorted key columns) still work.
* No per-page min/max statistics, checksums or compression other than LZ4 -- the cfile layer
  owns statistics and checksums.
* No partial decompression: an LZ4 page is decompressed whole even for a 1-row gather.
* Null slots cost the same as values (no sparse/definition-level encoding).
* Dictionaries are per page, never shared across pages.
* Decoders bound-check every section against the body (Corruption), but do not validate the
  contents of binary offsets or dictionary codes beyond what numpy/Arrow indexing checks:
  detecting flipped bits is the job of the cfile layer's checksums.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

import lz4.block
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.cfile.bitshuffle import bitshuffle as _bitshuffle
from engine.cfile.bitshuffle import bitunshuffle as _bitunshuffle
from engine.errors import Corruption

__all__ = [
    "Encoding",
    "Compression",
    "encode_page",
    "decode_page",
    "gather_page",
    "page_encoding",
    "HEADER_SIZE",
]


class Encoding(enum.IntEnum):
    """Kudu's EncodingType numbers, plus FOR (frame of reference)."""

    AUTO = 0
    PLAIN = 1
    PREFIX = 2
    RLE = 4
    DICT = 5
    BIT_SHUFFLE = 6
    FOR = 7


class Compression(enum.IntEnum):
    NONE = 0
    LZ4 = 1


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------

_INT, _FLOAT, _BOOL, _BINARY, _FSB = range(5)

# type tag -> (arrow type, kind, numpy dtype of one value or None, value width in bytes)
_TAGS: dict[int, tuple[pa.DataType, int, np.dtype | None, int]] = {
    1: (pa.int8(), _INT, np.dtype("<i1"), 1),
    2: (pa.int16(), _INT, np.dtype("<i2"), 2),
    3: (pa.int32(), _INT, np.dtype("<i4"), 4),
    4: (pa.int64(), _INT, np.dtype("<i8"), 8),
    5: (pa.float32(), _FLOAT, np.dtype("<f4"), 4),
    6: (pa.float64(), _FLOAT, np.dtype("<f8"), 8),
    7: (pa.bool_(), _BOOL, None, 0),
    8: (pa.binary(), _BINARY, None, 0),
    9: (pa.binary(16), _FSB, np.dtype("V16"), 16),
}
_TAG_OF: dict[pa.DataType, int] = {t[0]: tag for tag, t in _TAGS.items()}

_UNSIGNED = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}

_ALLOWED: dict[int, frozenset[Encoding]] = {
    _INT: frozenset({Encoding.PLAIN, Encoding.FOR, Encoding.RLE, Encoding.BIT_SHUFFLE}),
    _FLOAT: frozenset({Encoding.PLAIN, Encoding.BIT_SHUFFLE}),
    _FSB: frozenset({Encoding.PLAIN, Encoding.BIT_SHUFFLE}),
    _BOOL: frozenset({Encoding.PLAIN, Encoding.RLE}),
    _BINARY: frozenset({Encoding.PLAIN, Encoding.DICT, Encoding.PREFIX}),
}


def _tag_of(typ: pa.DataType) -> int:
    try:
        return _TAG_OF[typ]
    except (KeyError, TypeError):
        raise ValueError(
            f"{typ} is not a physical page type (int8..int64, float, double, bool, binary, "
            "fixed_size_binary(16))"
        ) from None


# --------------------------------------------------------------------------------------------
# Page header and body assembly
# --------------------------------------------------------------------------------------------

_MAGIC = 0xC1
_HEADER = struct.Struct("<BBBBIIII4x")
HEADER_SIZE = _HEADER.size  # 24
_FOR_HDR = struct.Struct("<qB7x")
_RLE_HDR = struct.Struct("<I4x")
_DICT_HDR = struct.Struct("<IB3x")
_ZEROS = bytes(8)
_MAX_ROWS = 2**31 - 1


def _pad8(x: int) -> int:
    return (x + 7) & ~7


class _Body:
    """Body pieces (bytes-like, C-contiguous) joined once at the end; tracks 8-alignment."""

    __slots__ = ("pieces", "size")

    def __init__(self) -> None:
        self.pieces: list = []
        self.size = 0

    def add(self, piece) -> None:
        nbytes = memoryview(piece).nbytes
        if nbytes:
            self.pieces.append(piece)
            self.size += nbytes

    def align(self) -> None:
        r = (-self.size) & 7
        if r:
            self.pieces.append(_ZEROS[:r])
            self.size += r


def _finish(enc: Encoding, comp: Compression, tag: int, n: int, nulls: int, body: _Body) -> bytes:
    if comp == Compression.LZ4 and body.size:
        raw = b"".join(body.pieces)
        packed = lz4.block.compress(raw, store_size=False)
        if len(packed) < len(raw):
            hdr = _HEADER.pack(_MAGIC, enc, Compression.LZ4, tag, n, nulls, len(raw), len(packed))
            return b"".join((hdr, packed))
        hdr = _HEADER.pack(_MAGIC, enc, Compression.NONE, tag, n, nulls, len(raw), len(raw))
        return b"".join((hdr, raw))
    hdr = _HEADER.pack(_MAGIC, enc, Compression.NONE, tag, n, nulls, body.size, body.size)
    return b"".join((hdr, *body.pieces))


# --------------------------------------------------------------------------------------------
# Input extraction helpers (all vectorised)
# --------------------------------------------------------------------------------------------


def _bits(buf: pa.Buffer | None, offset: int, n: int) -> np.ndarray:
    """Bits [offset, offset+n) of an LSB-first bitmap, unpacked to uint8 0/1."""
    if buf is None:
        return np.zeros(n, np.uint8)
    raw = np.frombuffer(buf, np.uint8)
    start = offset >> 3
    return np.unpackbits(raw[start:(offset + n + 7) >> 3], bitorder="little")[
        offset & 7:(offset & 7) + n
    ]


def _bitmap(buf: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Bits [offset, offset+n) of a bitmap re-based to bit 0, trailing bits zeroed (a copy)."""
    if offset & 7:
        return np.packbits(_bits(buf, offset, n), bitorder="little")
    raw = np.frombuffer(buf, np.uint8)
    out = raw[offset >> 3:(offset >> 3) + ((n + 7) >> 3)].copy()
    if n & 7:
        out[-1] &= (1 << (n & 7)) - 1
    return out


def _fixed_values(arr: pa.Array, dtype: np.dtype) -> np.ndarray:
    """Zero-copy numpy view of a fixed-width array's values (slots under nulls included)."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, dtype)
    return np.frombuffer(buf, dtype, count=n, offset=arr.offset * dtype.itemsize)


def _ffill(v: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Replace null slots by the previous valid value (leading nulls by the first one)."""
    n = len(v)
    present = np.flatnonzero(valid)
    if len(present) == 0:
        return np.zeros(n, v.dtype)
    if 10 * (n - len(present)) > n:  # dense nulls: one running-max scan (~3-5 ns/row)
        idx = np.where(valid, np.arange(n, dtype=np.intp), 0)
        np.maximum.accumulate(idx, out=idx)
        np.maximum(idx, present[0], out=idx)
        return v[idx]
    # sparse nulls: find the last valid slot before each null by binary search, which costs
    # O(nulls * log n) instead of a scalar scan of every row
    missing = np.flatnonzero(~valid)
    before = np.searchsorted(present, missing)
    before -= 1
    np.maximum(before, 0, out=before)
    out = v.copy()
    out[missing] = v[present[before]]
    return out


def _runs(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(run values, cumulative run ends as uint32)."""
    n = len(v)
    if n == 0:
        return v[:0], np.zeros(0, np.uint32)
    change = np.flatnonzero(v[1:] != v[:-1])
    ends = np.empty(len(change) + 1, np.uint32)
    ends[:-1] = change
    ends[:-1] += 1
    ends[-1] = n
    return v[ends - 1], ends


def _uwidth(span: int) -> int:
    """Bytes of the narrowest unsigned type holding 0..span."""
    if span < 1 << 8:
        return 1
    if span < 1 << 16:
        return 2
    if span < 1 << 32:
        return 4
    return 8


def _rle_size(runs: int, w: int) -> int:
    return _RLE_HDR.size + _pad8(runs * w) + _pad8(runs * 4)


# --------------------------------------------------------------------------------------------
# Encoders (each appends its value section to `body` and returns the encoding it used)
# --------------------------------------------------------------------------------------------


def _put_fixed(body: _Body, v: np.ndarray) -> None:
    body.add(np.ascontiguousarray(v))
    body.align()


def _put_bitshuffle(body: _Body, v: np.ndarray, w: int) -> None:
    body.add(_bitshuffle(np.ascontiguousarray(v).view(np.uint8).reshape(len(v), w)))
    body.align()


def _put_rle(body: _Body, values: np.ndarray, ends: np.ndarray) -> None:
    body.add(_RLE_HDR.pack(len(ends)))
    body.add(np.ascontiguousarray(values))
    body.align()
    body.add(ends)
    body.align()


def _encode_int(arr: pa.Array, tag: int, enc: Encoding, valid: np.ndarray | None,
                body: _Body) -> Encoding:
    _, _, dtype, w = _TAGS[tag]
    v = _fixed_values(arr, dtype)
    if valid is not None:
        v = _ffill(v, valid)
    n = len(v)
    lo, dw = 0, 1
    if n and enc in (Encoding.AUTO, Encoding.FOR):
        lo = int(v.min())
        dw = _uwidth(int(v.max()) - lo)
    if enc == Encoding.AUTO:
        enc = Encoding.PLAIN
        if n:
            best = n * w
            if _FOR_HDR.size + _pad8(n * dw) < best:
                enc, best = Encoding.FOR, _FOR_HDR.size + _pad8(n * dw)
            runs = int(np.count_nonzero(v[1:] != v[:-1])) + 1
            if _rle_size(runs, w) < best:
                enc = Encoding.RLE
    if enc == Encoding.PLAIN:
        _put_fixed(body, v)
    elif enc == Encoding.FOR:
        ut = _UNSIGNED[w]
        deltas = np.empty(n, _UNSIGNED[dw])
        # wrapping subtraction in the column-width unsigned type, narrowed on the fly
        np.subtract(v.view(ut), np.array(lo, dtype).view(ut), out=deltas, casting="unsafe")
        body.add(_FOR_HDR.pack(lo, dw))
        _put_fixed(body, deltas)
    elif enc == Encoding.RLE:
        _put_rle(body, *_runs(v))
    else:  # BIT_SHUFFLE
        _put_bitshuffle(body, v, w)
    return enc


def _encode_float(arr: pa.Array, tag: int, enc: Encoding, valid: np.ndarray | None,
                  body: _Body) -> Encoding:
    _, _, dtype, w = _TAGS[tag]
    v = _fixed_values(arr, dtype)
    if valid is not None:
        v = np.where(valid, v, dtype.type(0))
    if enc == Encoding.BIT_SHUFFLE:
        _put_bitshuffle(body, v, w)
        return enc
    _put_fixed(body, v)
    return Encoding.PLAIN


def _encode_fsb(arr: pa.Array, enc: Encoding, valid: np.ndarray | None, body: _Body) -> Encoding:
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        mat = np.zeros((n, 16), np.uint8)
    else:
        mat = np.frombuffer(buf, np.uint8, count=n * 16, offset=arr.offset * 16).reshape(n, 16)
    if valid is not None:
        mat = np.where(valid[:, None], mat, np.uint8(0))
    if enc == Encoding.BIT_SHUFFLE:
        body.add(_bitshuffle(mat))
        body.align()
        return enc
    _put_fixed(body, mat)
    return Encoding.PLAIN


def _encode_bool(arr: pa.Array, enc: Encoding, valid: np.ndarray | None, body: _Body) -> Encoding:
    n = len(arr)
    v = _bits(arr.buffers()[1], arr.offset, n)
    if valid is not None:
        v = _ffill(v, valid)
    if enc == Encoding.AUTO:
        enc = Encoding.PLAIN
        if n:
            runs = int(np.count_nonzero(v[1:] != v[:-1])) + 1
            if _rle_size(runs, 1) < _pad8((n + 7) >> 3):
                enc = Encoding.RLE
    if enc == Encoding.RLE:
        _put_rle(body, *_runs(v))
    else:
        _put_fixed(body, np.packbits(v, bitorder="little"))
    return enc


def _put_plain_binary(body: _Body, arr: pa.Array) -> None:
    """(n+1) int32 offsets re-based to 0, pad, data, pad."""
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        body.add(np.zeros(n + 1, np.int32))
        body.align()
        return
    offs = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=arr.offset * 4)
    start, end = int(offs[0]), int(offs[-1])
    body.add(offs - np.int32(start) if start else offs)
    body.align()
    if end > start:
        body.add(bufs[2].slice(start, end - start))
        body.align()


def _sample_mostly_distinct(arr: pa.Array) -> bool:
    n = len(arr)
    if n < 2048:
        return False
    sample = arr.take(pa.array(np.arange(0, n, n // 1024, dtype=np.int64)))
    return pc.count_distinct(sample).as_py() >= 0.99 * (len(sample) - sample.null_count)


def _binary_data_bytes(arr: pa.Array) -> int:
    n = len(arr)
    if n == 0 or arr.buffers()[1] is None:
        return 0
    offs = np.frombuffer(arr.buffers()[1], np.int32, count=n + 1, offset=arr.offset * 4)
    return int(offs[-1]) - int(offs[0])


def _encode_binary(arr: pa.Array, enc: Encoding, valid: np.ndarray | None,
                   body: _Body) -> Encoding:
    n = len(arr)
    denc = None
    if enc == Encoding.AUTO:
        enc = Encoding.PLAIN
        if n and not _sample_mostly_distinct(arr):
            denc = pc.dictionary_encode(arr)
            dic = denc.dictionary
            if 2 * len(dic) <= n and 2 * _binary_data_bytes(dic) <= _binary_data_bytes(arr):
                enc = Encoding.DICT
    if enc != Encoding.DICT:  # PLAIN, or PREFIX which is written as PLAIN
        _put_plain_binary(body, arr)
        return Encoding.PLAIN
    if denc is None:
        denc = pc.dictionary_encode(arr)
    dic = denc.dictionary
    idx = denc.indices
    if len(dic) == 0:  # empty or all-null page: codes must still index something
        dic = pa.array([b""], pa.binary())
    codes = _fixed_values(idx, np.dtype("<i4"))
    if valid is not None:
        codes = np.where(valid, codes, np.int32(0))
    cw = _uwidth(len(dic) - 1)
    body.add(_DICT_HDR.pack(len(dic), cw))
    _put_plain_binary(body, dic)
    _put_fixed(body, codes.astype(_UNSIGNED[cw]))
    return Encoding.DICT


# --------------------------------------------------------------------------------------------
# Public encode
# --------------------------------------------------------------------------------------------


def encode_page(arr: pa.Array, encoding: Encoding = Encoding.AUTO,
                compression: Compression = Compression.NONE) -> bytes:
    """Encode one physical-typed array (nulls and slices allowed) as a self-describing page."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    tag = _tag_of(arr.type)
    kind = _TAGS[tag][1]
    encoding = Encoding(encoding)
    compression = Compression(compression)
    if encoding != Encoding.AUTO and encoding not in _ALLOWED[kind]:
        raise ValueError(f"encoding {encoding.name} does not apply to {arr.type}")
    n = len(arr)
    if n > _MAX_ROWS:
        raise ValueError(f"page of {n} rows exceeds {_MAX_ROWS}")
    nulls = arr.null_count
    body = _Body()
    valid = None
    if nulls:
        vbits = _bitmap(arr.buffers()[0], arr.offset, n)
        body.add(vbits)
        body.align()
        valid = np.unpackbits(vbits, count=n, bitorder="little").view(np.bool_)
    if kind == _INT:
        enc = _encode_int(arr, tag, encoding, valid, body)
    elif kind == _FLOAT:
        enc = _encode_float(arr, tag, encoding, valid, body)
    elif kind == _BINARY:
        enc = _encode_binary(arr, encoding, valid, body)
    elif kind == _BOOL:
        enc = _encode_bool(arr, encoding, valid, body)
    else:
        enc = _encode_fsb(arr, encoding, valid, body)
    if enc == Encoding.BIT_SHUFFLE:
        compression = Compression.LZ4
    return _finish(enc, compression, tag, n, nulls, body)


# --------------------------------------------------------------------------------------------
# Decode
# --------------------------------------------------------------------------------------------


class _Page(NamedTuple):
    encoding: Encoding
    tag: int
    n: int
    nulls: int
    body: pa.Buffer
    validity: pa.Buffer | None
    voff: int  # offset of the value section in body


def _as_buffer(buf) -> pa.Buffer:
    return buf if isinstance(buf, pa.Buffer) else pa.py_buffer(buf)


def _open(buf, typ: pa.DataType | None) -> _Page:
    buf = _as_buffer(buf)
    if buf.size < HEADER_SIZE:
        raise Corruption(f"page of {buf.size} bytes is shorter than its header")
    magic, enc, comp, tag, n, nulls, raw, stored = _HEADER.unpack_from(buf, 0)
    if magic != _MAGIC or tag not in _TAGS or comp > Compression.LZ4 or nulls > n:
        raise Corruption("bad page header")
    try:
        enc = Encoding(enc)
    except ValueError:
        raise Corruption(f"unknown page encoding {enc}") from None
    if enc == Encoding.AUTO or enc == Encoding.PREFIX or enc not in _ALLOWED[_TAGS[tag][1]]:
        raise Corruption(f"encoding {enc.name} on a {_TAGS[tag][0]} page")
    if typ is not None and _tag_of(typ) != tag:
        raise ValueError(f"page holds {_TAGS[tag][0]}, asked to decode it as {typ}")
    if buf.size < HEADER_SIZE + stored:
        raise Corruption(f"page truncated: {buf.size} < {HEADER_SIZE + stored} bytes")
    if comp == Compression.LZ4:
        try:
            body = pa.py_buffer(
                lz4.block.decompress(buf.slice(HEADER_SIZE, stored), uncompressed_size=raw))
        except lz4.block.LZ4BlockError as e:
            raise Corruption(f"bad LZ4 page body: {e}") from None
        if body.size != raw:
            raise Corruption("LZ4 page body has the wrong size")
    else:
        body = buf.slice(HEADER_SIZE, raw)
    if nulls:
        nb = (n + 7) >> 3
        validity, voff = body.slice(0, nb), _pad8(nb)
    else:
        validity, voff = None, 0
    return _Page(enc, tag, n, nulls, body, validity, voff)


def _array(typ: pa.DataType, n: int, validity: pa.Buffer | None, nulls: int, *bufs) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [validity if nulls else None, *bufs], null_count=nulls)


def _np(buf: pa.Buffer, dtype, count: int, offset: int) -> np.ndarray:
    if offset + count * np.dtype(dtype).itemsize > buf.size:
        raise Corruption("page section runs past the body")
    return np.frombuffer(buf, dtype, count=count, offset=offset)


def _for_parts(p: _Page) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """(deltas, min as a 0-d unsigned array, unsigned dtype of the column width)."""
    dtype, w = _TAGS[p.tag][2], _TAGS[p.tag][3]
    lo, dw = _FOR_HDR.unpack_from(p.body, p.voff)
    if dw not in _UNSIGNED:
        raise Corruption(f"bad FOR delta width {dw}")
    ut = _UNSIGNED[w]
    deltas = _np(p.body, _UNSIGNED[dw], p.n, p.voff + _FOR_HDR.size)
    return deltas, np.array(lo, np.int64).astype(dtype).view(ut), ut


def _rle_parts(p: _Page, vdtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    (runs,) = _RLE_HDR.unpack_from(p.body, p.voff)
    off = p.voff + _RLE_HDR.size
    values = _np(p.body, vdtype, runs, off)
    ends = _np(p.body, np.uint32, runs, off + _pad8(runs * vdtype.itemsize))
    if (runs and int(ends[-1]) != p.n) or (not runs and p.n) or np.any(ends[1:] < ends[:-1]):
        raise Corruption("RLE runs do not cover the page")
    return values, ends


SHORT_RUNS = 10      # mean run length below which _rle_expand adds deltas instead of repeating


def _rle_expand(values: np.ndarray, ends: np.ndarray, n: int) -> np.ndarray:
    """The n slots of RLE runs (`values`, cumulative `ends`). Runs shorter than SHORT_RUNS
    on average (a key column's few rows per value: lineitem's l_orderkey, 4) are expanded
    by writing each run's difference from the previous value at its start and a running
    sum: ~1.6x less CPU than np.repeat, whose per-run copies dominate short runs; longer
    runs keep np.repeat. Integer wraparound in the differences and the sum (both in the
    values' own width) cancels, so the result is exact for every integer width (and for
    booleans' 0/1 bytes)."""
    runs = len(values)
    if not runs or n >= SHORT_RUNS * runs or ends[0] == 0 or \
            not np.all(ends[1:] != ends[:-1]):
        # (an empty run - which no encoder writes, but a page may hold - would put two
        # differences at one slot)
        return np.repeat(values, np.diff(ends, prepend=np.uint32(0)))
    out = np.zeros(n, dtype=values.dtype)
    out[0] = values[0]
    steps = np.empty(runs - 1, dtype=values.dtype)
    np.subtract(values[1:], values[:-1], out=steps)
    out[ends[:-1]] = steps
    return np.cumsum(out, dtype=values.dtype, out=out)


def _binary_section(body: pa.Buffer, off: int, n: int) -> tuple[pa.Array, int]:
    """A PLAIN binary section at `off` as a zero-copy array, and the offset just past it."""
    osize = (n + 1) * 4
    if off + osize > body.size:
        raise Corruption("binary offsets run past the body")
    (dlen,) = struct.unpack_from("<i", body, off + n * 4)
    doff = off + _pad8(osize)
    if dlen < 0 or doff + dlen > body.size:
        raise Corruption("binary data runs past the body")
    arr = pa.Array.from_buffers(pa.binary(), n, [None, body.slice(off, osize),
                                                 body.slice(doff, dlen)], null_count=0)
    return arr, doff + _pad8(dlen)


def _dict_parts(p: _Page) -> tuple[pa.Array, np.ndarray]:
    k, cw = _DICT_HDR.unpack_from(p.body, p.voff)
    if cw not in (1, 2, 4):
        raise Corruption(f"bad dictionary code width {cw}")
    dictionary, off = _binary_section(p.body, p.voff + _DICT_HDR.size, k)
    return dictionary, _np(p.body, _UNSIGNED[cw], p.n, off)


def _dict_take(dictionary: pa.Array, codes: np.ndarray, validity: pa.Buffer | None,
               nulls: int) -> pa.Array:
    """dictionary.take(codes) with the given validity, as a binary array.

    When every dictionary entry has the same length L (flag and status columns) the result
    is built with numpy: data = one fixed-width gather of L-byte rows, offsets = arange * L.
    That is several times faster than Arrow's variable-length take.
    """
    n = len(codes)
    k = len(dictionary)
    offs = np.frombuffer(dictionary.buffers()[1], np.int32, count=k + 1)
    width = int(offs[1] - offs[0]) if k else 0
    if k and n * width < _MAX_ROWS and not np.any(np.diff(offs) != width):
        if width == 0:
            offsets, data = np.zeros(n + 1, np.int32), np.zeros(0, np.uint8)
        else:
            offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
            rows = np.frombuffer(dictionary.buffers()[2], np.uint8, count=k * width,
                                 offset=int(offs[0]))
            if width in _UNSIGNED:
                data = rows.view(_UNSIGNED[width])[codes]
            else:
                data = np.take(rows.view(np.dtype(f"V{width}")), codes)
        return _array(pa.binary(), n, validity, nulls, pa.py_buffer(offsets), pa.py_buffer(data))
    return dictionary.take(_array(pa.from_numpy_dtype(codes.dtype), n, validity, nulls,
                                  pa.py_buffer(codes)))


def _decode(p: _Page) -> pa.Array:
    typ, kind, dtype, w = _TAGS[p.tag]
    n, enc, body = p.n, p.encoding, p.body
    if enc == Encoding.PLAIN:
        if kind == _BINARY:
            arr, _ = _binary_section(body, p.voff, n)
            return _array(typ, n, p.validity, p.nulls, *arr.buffers()[1:])
        size = (n + 7) >> 3 if kind == _BOOL else n * w
        if p.voff + size > body.size:
            raise Corruption("page values run past the body")
        return _array(typ, n, p.validity, p.nulls, body.slice(p.voff, size))
    if enc == Encoding.FOR:
        deltas, ulo, ut = _for_parts(p)
        out = deltas.astype(ut)
        out += ulo
        return _array(typ, n, p.validity, p.nulls, pa.py_buffer(out))
    if enc == Encoding.RLE:
        values, ends = _rle_parts(p, np.dtype(np.uint8) if kind == _BOOL else dtype)
        out = _rle_expand(values, ends, n)
        if kind == _BOOL:
            out = np.packbits(out, bitorder="little")
        return _array(typ, n, p.validity, p.nulls, pa.py_buffer(out))
    if enc == Encoding.DICT:
        dictionary, codes = _dict_parts(p)
        return _dict_take(dictionary, codes, p.validity, p.nulls)
    # BIT_SHUFFLE
    n8 = (n + 7) >> 3
    planes = _np(body, np.uint8, w * 8 * n8, p.voff)
    return _array(typ, n, p.validity, p.nulls, pa.py_buffer(_bitunshuffle(planes, n, w)))


def decode_page(buf, typ: pa.DataType) -> pa.Array:
    """Decode a whole page as `typ` (its physical type). Uncompressed PLAIN is zero-copy."""
    return _decode(_open(buf, typ))


def dict_page(buf, typ: pa.DataType) -> tuple[pa.Array, np.ndarray, np.ndarray | None] | None:
    """A DICT page's (dictionary, codes, validity as a numpy bool array or None when the
    page has no nulls), without decoding its values; None for any other encoding. A scan
    predicate is evaluated once per dictionary entry and gathered by code (Kudu's
    dictionary-coded predicate evaluation): a status column's k entries instead of its n
    strings. The code under a NULL slot is arbitrary: callers mask it with `validity`."""
    p = _open(buf, typ)
    if p.encoding != Encoding.DICT:
        return None
    dictionary, codes = _dict_parts(p)
    if dictionary.type != typ:
        dictionary = dictionary.view(typ)
    return dictionary, codes, _bits(p.validity, 0, p.n).view(bool) if p.nulls else None


def page_encoding(buf) -> Encoding:
    """The encoding the page actually used (never AUTO or PREFIX)."""
    buf = _as_buffer(buf)
    if buf.size < HEADER_SIZE:
        raise Corruption(f"page of {buf.size} bytes is shorter than its header")
    magic, enc = struct.unpack_from("<BB", buf, 0)
    if magic != _MAGIC:
        raise Corruption("bad page header")
    try:
        return Encoding(enc)
    except ValueError:
        raise Corruption(f"unknown page encoding {enc}") from None


# --------------------------------------------------------------------------------------------
# Gather
# --------------------------------------------------------------------------------------------


def _gather_validity(p: _Page, pos: np.ndarray) -> tuple[pa.Buffer | None, int]:
    if not p.nulls:
        return None, 0
    vb = np.frombuffer(p.validity, np.uint8)
    bits = vb[pos >> 3]
    bits >>= (pos & 7).astype(np.uint8)
    bits &= np.uint8(1)
    nulls = len(pos) - int(np.count_nonzero(bits))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(bits, bitorder="little")), nulls


def gather_page(buf, typ: pa.DataType, positions: np.ndarray, ascending: bool = False
                ) -> pa.Array:
    """decode_page(buf, typ).take(positions), touching only the selected slots when the
    encoding allows random access (PLAIN, FOR, RLE, DICT on an uncompressed page).
    `ascending`: the caller's word that the positions are in ascending order (a scan's
    selection), so that the first and the last bound them: no pass over them to check."""
    p = _open(buf, typ)
    pos = np.asarray(positions, dtype=np.int64)
    if pos.ndim != 1:
        raise ValueError("positions must be one-dimensional")
    m = len(pos)
    if m:
        lo, hi = (pos[0], pos[-1]) if ascending else (pos.min(), pos.max())
        if int(lo) < 0 or int(hi) >= p.n:
            raise IndexError(f"positions outside [0, {p.n})")
    kind = _TAGS[p.tag][1]
    enc = p.encoding
    if enc == Encoding.FOR:
        deltas, ulo, ut = _for_parts(p)
        out = deltas[pos].astype(ut)
        out += ulo
        validity, nulls = _gather_validity(p, pos)
        return _array(typ, m, validity, nulls, pa.py_buffer(out))
    if enc == Encoding.RLE:
        values, ends = _rle_parts(p, np.dtype(np.uint8) if kind == _BOOL else _TAGS[p.tag][2])
        out = values[np.searchsorted(ends, pos, side="right")]
        if kind == _BOOL:
            out = np.packbits(out, bitorder="little")
        validity, nulls = _gather_validity(p, pos)
        return _array(typ, m, validity, nulls, pa.py_buffer(out))
    if enc == Encoding.DICT:
        dictionary, codes = _dict_parts(p)
        validity, nulls = _gather_validity(p, pos)
        return _dict_take(dictionary, codes[pos], validity, nulls)
    # PLAIN (zero-copy view when uncompressed, so the take is random access) and BIT_SHUFFLE.
    return _decode(p).take(pa.array(pos))
