"""Scalar random access to one cell of an encoded page: the point-lookup path.

A point lookup needs one value from each of several pages. Decoding whole pages (tens of
thousands of rows) for that would dominate, and caching decoded pages costs memory equal to
the table. Instead `page_cell_reader` parses a page's header once and returns a function
that reads one value in place with `struct.unpack_from`, following the page layout
documented in `encodings.py`: PLAIN, FOR and DICT are O(1), RLE is a binary search over the
run ends. LZ4-compressed and BIT_SHUFFLE pages have no random access: they are decoded once
into a list (the rare case of a point lookup on a compressed column).

Values are returned in their *physical* form (int, float, bool, bytes, None).
"""

from __future__ import annotations

import bisect
import struct

import numpy as np
import pyarrow as pa

from engine.cfile.encodings import Encoding, gather_page

_HDR = struct.Struct("<BBBBIIII4x")
_FOR_HDR = struct.Struct("<qB7x")
_RLE_HDR = struct.Struct("<I4x")
_DICT_HDR = struct.Struct("<IB3x")
_OFFS = struct.Struct("<ii")
_I32 = struct.Struct("<i")
_UNSIGNED = {1: struct.Struct("<B"), 2: struct.Struct("<H"), 4: struct.Struct("<I"),
             8: struct.Struct("<Q")}
_FIXED = {  # physical type id -> (struct, width)
    "int8": (struct.Struct("<b"), 1), "int16": (struct.Struct("<h"), 2),
    "int32": (struct.Struct("<i"), 4), "int64": (struct.Struct("<q"), 8),
    "float": (struct.Struct("<f"), 4), "double": (struct.Struct("<d"), 8),
}


def _pad8(x: int) -> int:
    return (x + 7) & ~7


def page_cell_reader(page, typ: pa.DataType, base: int = 0, name: str | None = None):
    """A function pos -> physical value for one page, with the header parsed once.

    Point lookups call it for one cell of each projected column; building it costs one
    header parse (and, for DICT/RLE pages, turning the small dictionary or run table into
    Python lists), after which a cell is one `unpack_from` and a little arithmetic.
    """
    name = name or str(typ)
    _, enc, comp, _, n, nulls, raw, stored = _HDR.unpack_from(page, base)
    if comp or enc == Encoding.BIT_SHUFFLE:
        buf = pa.py_buffer(page)[base: base + _HDR.size + stored]
        values = gather_page(buf, typ, np.arange(n, dtype=np.int64)).to_pylist()
        return values.__getitem__
    voff = base + _HDR.size
    if nulls:
        vbase = voff
        voff += _pad8((n + 7) >> 3)

        def with_nulls(inner):
            def f(pos):
                if not (page[vbase + (pos >> 3)] >> (pos & 7)) & 1:
                    return None
                return inner(pos)
            return f
    else:
        def with_nulls(inner):
            return inner
    mv = memoryview(page)
    if enc == Encoding.PLAIN:
        if name == "binary":
            doff = voff + _pad8((n + 1) * 4)

            def plain_bin(pos):
                o1, o2 = _OFFS.unpack_from(page, voff + 4 * pos)
                return bytes(mv[doff + o1: doff + o2])
            return with_nulls(plain_bin)
        if name == "bool":
            return with_nulls(lambda pos: bool((page[voff + (pos >> 3)] >> (pos & 7)) & 1))
        if name == "fixed_size_binary[16]":
            return with_nulls(lambda pos: bytes(mv[voff + 16 * pos: voff + 16 * pos + 16]))
        s, w = _FIXED[name]
        unpack = s.unpack_from
        return with_nulls(lambda pos: unpack(page, voff + w * pos)[0])
    if enc == Encoding.FOR:
        lo, dw = _FOR_HDR.unpack_from(page, voff)
        doff = voff + _FOR_HDR.size
        unpack = _UNSIGNED[dw].unpack_from
        bits = 8 * _FIXED[name][1]
        mask, sign, full = (1 << bits) - 1, 1 << (bits - 1), 1 << bits

        def for_cell(pos):
            v = (lo + unpack(page, doff + dw * pos)[0]) & mask
            return v - full if v >= sign else v
        return with_nulls(for_cell)
    if enc == Encoding.RLE:
        (runs,) = _RLE_HDR.unpack_from(page, voff)
        vals = voff + _RLE_HDR.size
        vw = 1 if name == "bool" else _FIXED[name][1]
        ends_off = vals + _pad8(runs * vw)
        ends = list(mv[ends_off: ends_off + 4 * runs].cast("I"))
        s = _UNSIGNED[1] if name == "bool" else _FIXED[name][0]
        # One Python step per *run* (not per row), once per page: the table is then cached.
        values = [s.unpack_from(page, vals + vw * i)[0] for i in range(runs)]
        if name == "bool":
            values = [bool(v) for v in values]
        return with_nulls(lambda pos: values[bisect.bisect_right(ends, pos)])
    if enc == Encoding.DICT:
        k, cw = _DICT_HDR.unpack_from(page, voff)
        offs = voff + _DICT_HDR.size
        (dlen,) = _I32.unpack_from(page, offs + 4 * k)
        data = offs + _pad8((k + 1) * 4)
        codes = data + _pad8(dlen)
        bounds = list(mv[offs: offs + 4 * (k + 1)].cast("i"))
        dictionary = [bytes(mv[data + bounds[i]: data + bounds[i + 1]]) for i in range(k)]
        unpack = _UNSIGNED[cw].unpack_from
        return with_nulls(lambda pos: dictionary[unpack(page, codes + cw * pos)[0]])
    buf = pa.py_buffer(page)[base: base + _HDR.size + stored]
    values = gather_page(buf, typ, np.arange(n, dtype=np.int64)).to_pylist()
    return values.__getitem__
