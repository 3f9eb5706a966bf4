# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the small write's two byte formats (the engine's single-row write
path): `encode_small`, the compact WAL body of a small write op (engine/tablet/write_op.py
`encode_small_py`), and `wal_record`, one framed WAL record of a local write
(engine/consensus/log.py `wal_record_py`, whose CRC-32 is zlib's). Both formats are
persisted (the WAL) and are defined by those twins, not by this file; tests/test_native.py
compares them on generated inputs. A value or argument this kernel does not decide
exactly - any type but an exact None / bool / int / float / str / bytes value, an int
beyond int64, a string with surrogates, a wrong row length, an op type that is not an
exact int - hands the whole call to the twin registered with `fallback_small` /
`fallback_record`, whose answer (or error) is then the answer."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy


# CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320: zlib.crc32's), table-driven, so
# the kernel needs no zlib headers to build
cdef uint32_t _CRC_TABLE[256]
cdef uint32_t _c
cdef int _n, _b
for _n in range(256):
    _c = <uint32_t>_n
    for _b in range(8):
        _c = (0xEDB88320 ^ (_c >> 1)) if (_c & 1) else (_c >> 1)
    _CRC_TABLE[_n] = _c


cdef uint32_t crc32(const unsigned char* buf, Py_ssize_t n) noexcept nogil:
    """zlib.crc32(buf[:n]) (from 0)."""
    cdef uint32_t c = ~(<uint32_t>0)
    cdef Py_ssize_t i
    for i in range(n):
        c = _CRC_TABLE[(c ^ buf[i]) & 0xFF] ^ (c >> 8)
    return ~c


cdef object _encode_small_py = None
cdef object _wal_record_py = None

cdef enum:
    _MAX_VALUES = 64          # values per call decided here (a small write holds a few)
cdef uint64_t _U64_MAX = 0xFFFFFFFFFFFFFFFFULL


def fallback_small(encode_small_py):
    """Register the twin that takes every `encode_small` call this kernel does not
    decide (write_op.py registers it at import)."""
    global _encode_small_py
    _encode_small_py = encode_small_py


def fallback_record(wal_record_py):
    """Register the twin that takes every `wal_record` call this kernel does not decide
    (log.py registers it at import)."""
    global _wal_record_py
    _wal_record_py = wal_record_py


cdef inline void _le(char* p, uint64_t x, int n) noexcept nogil:
    """x as n little-endian bytes at p."""
    cdef int i
    for i in range(n):
        p[i] = <char>(x & 0xFF)
        x >>= 8


def encode_small(ops, columns, rows, head=None):
    """write_op.encode_small_py(ops, columns, rows, head): decided here when `head` is given."""
    if type(head) is not bytes or (type(ops) is not list and type(ops) is not tuple) or \
            (type(rows) is not list and type(rows) is not tuple):
        return _encode_small_py(ops, columns, rows, head)
    cdef Py_ssize_t nops = len(ops), ncols = len(columns), nrows = len(rows)
    cdef Py_ssize_t i, j, k = 0, total, size
    cdef int kinds[_MAX_VALUES]     # the value's tag (write_op.py: 0 None, 1 int, ...)
    cdef long long ints[_MAX_VALUES]
    cdef double dbl[_MAX_VALUES]
    cdef const char* ptrs[_MAX_VALUES]
    cdef Py_ssize_t lens[_MAX_VALUES]
    cdef int overflow
    cdef long long x
    cdef const char* s
    if nops > 0xFFFFFFFF or nrows * ncols > _MAX_VALUES:
        return _encode_small_py(ops, columns, rows, head)
    total = PyBytes_GET_SIZE(head) + 4 + nops
    for i in range(nops):
        o = ops[i]
        if type(o) is not int:
            return _encode_small_py(ops, columns, rows, head)
        PyLong_AsLongLongAndOverflow(o, &overflow)
        if overflow:
            return _encode_small_py(ops, columns, rows, head)
    for row in rows:
        if (type(row) is not list and type(row) is not tuple) or len(row) != ncols:
            return _encode_small_py(ops, columns, rows, head)
        for j in range(ncols):
            v = row[j]
            t = type(v)
            if v is None:
                kinds[k] = 0
                total += 1
            elif t is int:
                x = PyLong_AsLongLongAndOverflow(v, &overflow)
                if overflow:               # beyond int64: the twin's ValueError
                    return _encode_small_py(ops, columns, rows, head)
                kinds[k] = 1
                ints[k] = x
                total += 9
            elif t is float:
                kinds[k] = 2
                dbl[k] = v
                total += 9
            elif t is str:
                try:
                    s = PyUnicode_AsUTF8AndSize(v, &size)
                except UnicodeError:       # surrogates: the twin's UnicodeEncodeError
                    return _encode_small_py(ops, columns, rows, head)
                if size > 0xFFFFFFFF:
                    return _encode_small_py(ops, columns, rows, head)
                kinds[k] = 3
                ptrs[k] = s
                lens[k] = size
                total += 5 + size
            elif t is bytes:
                size = PyBytes_GET_SIZE(v)
                if size > 0xFFFFFFFF:
                    return _encode_small_py(ops, columns, rows, head)
                kinds[k] = 4
                ptrs[k] = PyBytes_AS_STRING(v)
                lens[k] = size
                total += 5 + size
            elif t is bool:
                kinds[k] = 6 if v else 5
                total += 1
            else:                          # date, datetime, Decimal, ...: the twin
                return _encode_small_py(ops, columns, rows, head)
            k += 1
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef uint64_t bits
    size = PyBytes_GET_SIZE(head)
    memcpy(p, PyBytes_AS_STRING(head), size)
    p += size
    _le(p, <uint64_t>nops, 4)
    p += 4
    for i in range(nops):
        x = PyLong_AsLongLongAndOverflow(ops[i], &overflow)
        p[0] = <char>(x & 0xFF)
        p += 1
    for i in range(k):
        p[0] = <char>kinds[i]
        p += 1
        if kinds[i] == 1:
            _le(p, <uint64_t>ints[i], 8)
            p += 8
        elif kinds[i] == 2:
            memcpy(&bits, &dbl[i], 8)
            _le(p, bits, 8)
            p += 8
        elif kinds[i] == 3 or kinds[i] == 4:
            _le(p, <uint64_t>lens[i], 4)
            memcpy(p + 4, ptrs[i], lens[i])
            p += 4 + lens[i]
    return out


cdef inline bint _u64(v):
    """Whether v is an exact int in [0, 2**64)."""
    if type(v) is not int or v < 0:
        return False
    return v <= _U64_MAX


def wal_record(index, timestamp, body):
    """log.wal_record_py(index, timestamp, body): the framed WAL record (u32 payload length,
    u32 CRC-32 of the payload, payload = term 0, index, timestamp as u64, type WRITE as u8,
    then `body`) of a local write, as one bytes object."""
    if type(body) is not bytes or not _u64(index) or not _u64(timestamp):
        return _wal_record_py(index, timestamp, body)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(body)
    if n > 0xFFFFFFFF - 25:            # a payload length beyond u32: the twin's error
        return _wal_record_py(index, timestamp, body)
    cdef uint64_t idx = PyLong_AsUnsignedLongLong(index)
    cdef uint64_t ts = PyLong_AsUnsignedLongLong(timestamp)
    out = PyBytes_FromStringAndSize(NULL, 8 + 25 + n)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef uint32_t crc
    _le(p, <uint64_t>(25 + n), 4)
    _le(p + 8, 0, 8)                   # term
    _le(p + 16, idx, 8)
    _le(p + 24, ts, 8)
    p[32] = 1                          # WRITE
    memcpy(p + 33, PyBytes_AS_STRING(body), n)
    with nogil:
        crc = crc32(<const unsigned char*>(p + 8), 25 + n)
    _le(p + 4, <uint64_t>crc, 4)
    return out
