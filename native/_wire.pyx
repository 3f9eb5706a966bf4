# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the wire codec's per-message kernels (wire/protocol.py): the frame
scanner `scan` and the Bind decoder `decode_bind`. Same answers as the pure-Python
functions, which specify them (`scan_py`, `decode_bind_py`); input this file does not take
with certainty - any framing or decoding error, a buffer type other than bytes or
bytearray - is handed to the twin registered with `fallback(scan_py, decode_bind_py)`, so
the errors (ProtocolViolation, its message, SQLSTATE and kind) are the twin's own.
tests/test_native.py compares both on generated and damaged frames."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr

cdef object _scan_py = None
cdef object _bind_py = None
cdef Py_ssize_t _MAX_STARTUP = 10000
cdef Py_ssize_t _DEFAULT_MAX = (1 << 30) - 1
STARTUP = -1
# frontend message types after startup: Q P B D C E S H X d c f p F
cdef bytes _KNOWN = b"QPBDCESHXdcfpF"
cdef bint _known[256]
cdef int _i
for _i in range(256):
    _known[_i] = 0
for _i in range(len(_KNOWN)):
    _known[_KNOWN[_i]] = 1


def fallback(scan_py, decode_bind_py):
    """The twins that take the cases this file hands over (errors, other buffers)."""
    global _scan_py, _bind_py
    _scan_py, _bind_py = scan_py, decode_bind_py


cdef inline const unsigned char* _ptr(object buf, Py_ssize_t* size):
    if type(buf) is bytes:
        size[0] = PyBytes_GET_SIZE(buf)
        return <const unsigned char*>PyBytes_AS_STRING(buf)
    if type(buf) is bytearray:
        size[0] = PyByteArray_GET_SIZE(buf)
        return <const unsigned char*>PyByteArray_AS_STRING(buf)
    return NULL


cdef inline int _i32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) |
                 (<unsigned int>p[2] << 8) | <unsigned int>p[3])


cdef inline int _i16(const unsigned char* p) noexcept nogil:
    return <short>((<unsigned int>p[0] << 8) | <unsigned int>p[1])


def scan(buf, Py_ssize_t pos, bint startup, Py_ssize_t max_message=_DEFAULT_MAX):
    """protocol.scan: (kind, body start, end), None until complete; errors: the twin."""
    cdef Py_ssize_t size
    cdef const unsigned char* p = _ptr(buf, &size)
    if p == NULL or pos < 0 or pos > size:
        return _scan_py(buf, pos, startup, max_message)
    cdef Py_ssize_t have = size - pos
    cdef Py_ssize_t n
    if startup:
        if have < 4:
            return None
        n = _i32(p + pos)
        if n < 8 or n > _MAX_STARTUP:
            return _scan_py(buf, pos, startup, max_message)
        if have < n:
            return None
        return (STARTUP, pos + 4, pos + n)
    if have < 5:
        return None
    n = _i32(p + pos + 1)
    if n < 4 or n > max_message or not _known[p[pos]]:
        return _scan_py(buf, pos, startup, max_message)
    if have < n + 1:
        return None
    return (p[pos], pos + 5, pos + 1 + n)


cdef inline object _name(const unsigned char* p, Py_ssize_t a, Py_ssize_t b):
    if a == b:
        return ""
    return PyUnicode_DecodeUTF8(<const char*>(p + a), b - a, NULL)


cdef object _int16s(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end):
    """A Bind's int16 count and that many int16s at pos[0] (its format codes), as a tuple,
    pos[0] moved past them; None for a malformed list (the twin then reports it)."""
    cdef Py_ssize_t q = pos[0], n, j
    if q + 2 > end:
        return None
    n = _i16(p + q)
    q += 2
    if n < 0 or q + 2 * n > end:
        return None
    out = tuple([_i16(p + q + 2 * j) for j in range(n)])
    pos[0] = q + 2 * n
    return out


def decode_bind(buf, Py_ssize_t start, Py_ssize_t end):
    """protocol.decode_bind: (portal, statement, parameter formats, values, result
    formats); anything irregular (an error, another buffer type): the twin."""
    cdef Py_ssize_t size
    cdef const unsigned char* p = _ptr(buf, &size)
    if p == NULL or start < 0 or end > size or start > end:
        return _bind_py(buf, start, end)
    cdef const unsigned char* z
    cdef Py_ssize_t z1, z2, pos, nv, j, ln
    cdef list values
    z = <const unsigned char*>memchr(p + start, 0, end - start)
    if z == NULL:
        return _bind_py(buf, start, end)
    z1 = z - p
    z = <const unsigned char*>memchr(p + z1 + 1, 0, end - z1 - 1)
    if z == NULL:
        return _bind_py(buf, start, end)
    z2 = z - p
    try:
        portal = _name(p, start, z1)
        stmt = _name(p, z1 + 1, z2)
    except UnicodeDecodeError:
        return _bind_py(buf, start, end)
    pos = z2 + 1
    pf = _int16s(p, &pos, end)
    if pf is None:
        return _bind_py(buf, start, end)
    if pos + 2 > end:
        return _bind_py(buf, start, end)
    nv = _i16(p + pos)
    pos += 2
    if nv < 0:
        return _bind_py(buf, start, end)
    values = [None] * nv
    for j in range(nv):
        if pos + 4 > end:
            return _bind_py(buf, start, end)
        ln = _i32(p + pos)
        pos += 4
        if ln == -1:
            continue
        if ln < 0 or pos + ln > end:
            return _bind_py(buf, start, end)
        values[j] = PyBytes_FromStringAndSize(<const char*>(p + pos), ln)
        pos += ln
    rf = _int16s(p, &pos, end)
    if rf is None or pos != end:
        return _bind_py(buf, start, end)
    return (portal, stmt, pf, tuple(values), rf)
