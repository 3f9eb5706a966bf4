# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the wire codec's per-message kernels (wire/protocol.py): the frame
scanner `scan` and the Bind decoder `decode_bind`. Same answers as the pure-Python
functions, which specify them (`scan_py`, `decode_bind_py`); input this file does not take
with certainty - any framing or decoding error, a buffer type other than bytes or
bytearray - is handed to the twin registered with `fallback(scan_py, decode_bind_py)`, so
the errors (ProtocolViolation, its message, SQLSTATE and kind) are the twin's own.
The same holds for the encoders added since: `data_row` (one row's DataRow message; twin
wire/datarows.py `data_row_py`) and `numeric_column` (binary NUMERIC parameters; twin
wire/params.py `numeric_column_py`), which hand every value they do not decide to the
Python encoder or decoder of that value, and `batch_replies` (a pipelined batch's replies;
twin wire/protocol.py `batch_replies_py`).
tests/test_native.py compares each with its twin on generated and damaged input."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp

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
    out = _bind(p, start, end)
    return _bind_py(buf, start, end) if out is None else out


cdef object _bind(const unsigned char* p, Py_ssize_t start, Py_ssize_t end):
    """decode_bind of a well-formed Bind body p[start:end]; None for anything else."""
    cdef const unsigned char* z
    cdef Py_ssize_t z1, z2, pos, nv, j, ln
    cdef list values
    z = <const unsigned char*>memchr(p + start, 0, end - start)
    if z == NULL:
        return None
    z1 = z - p
    z = <const unsigned char*>memchr(p + z1 + 1, 0, end - z1 - 1)
    if z == NULL:
        return None
    z2 = z - p
    try:
        portal = _name(p, start, z1)
        stmt = _name(p, z1 + 1, z2)
    except UnicodeDecodeError:
        return None
    pos = z2 + 1
    pf = _int16s(p, &pos, end)
    if pf is None:
        return None
    if pos + 2 > end:
        return None
    nv = _i16(p + pos)
    pos += 2
    if nv < 0:
        return None
    values = [None] * nv
    for j in range(nv):
        if pos + 4 > end:
            return None
        ln = _i32(p + pos)
        pos += 4
        if ln == -1:
            continue
        if ln < 0 or pos + ln > end:
            return None
        values[j] = PyBytes_FromStringAndSize(<const char*>(p + pos), ln)
        pos += ln
    rf = _int16s(p, &pos, end)
    if rf is None or pos != end:
        return None
    return (portal, stmt, pf, tuple(values), rf)


cdef object _run_py = None


def fallback_run(scan_run_py):
    """The twin of `scan_run`, which takes over wherever this one would not decide."""
    global _run_py
    _run_py = scan_run_py


cdef inline bint _at(const unsigned char* p, Py_ssize_t size, Py_ssize_t q, bytes frame):
    """`frame` lies at q."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(frame)
    return q + n <= size and memcmp(p + q, PyBytes_AS_STRING(frame), n) == 0


def scan_run(buf, Py_ssize_t p, fields, Py_ssize_t bind_end, str portal, str statement,
             bytes parse, bytes describe, bytes execute, Py_ssize_t base, list items,
             Py_ssize_t limit, Py_ssize_t max_message=_DEFAULT_MAX):
    """protocol.scan_run: the items of a pipelined run (see the twin). Frames that do
    not scan or decode cleanly are handed, from where they lie, to the twin."""
    cdef Py_ssize_t size, q, n, start
    cdef const unsigned char* b = _ptr(buf, &size)
    if b == NULL or p < 0 or bind_end < 0 or p > size or bind_end > size:
        return _run_py(buf, p, fields, bind_end, portal, statement, parse, describe,
                       execute, base, items, limit, max_message)
    cdef Py_ssize_t np_ = PyBytes_GET_SIZE(parse)
    cdef Py_ssize_t nd = PyBytes_GET_SIZE(describe)
    cdef Py_ssize_t ne = PyBytes_GET_SIZE(execute)
    while len(items) < limit:
        if fields is None:
            q = p
            if np_ and _at(b, size, q, parse):
                q += np_
            if size - q < 5:
                return False
            n = _i32(b + q + 1)
            if n < 4 or n > max_message or not _known[b[q]]:
                return _run_py(buf, p, None, 0, portal, statement, parse, describe,
                               execute, base, items, limit, max_message)
            if size - q < n + 1:
                return False
            if b[q] != 66:
                return True
            start = q + 5
            bind_end = q + 1 + n
            fields = _bind(b, start, bind_end)
            if fields is None:
                return _run_py(buf, p, None, 0, portal, statement, parse, describe,
                               execute, base, items, limit, max_message)
            if fields[0] != portal or fields[1] != statement:
                return True
        q = bind_end
        if _at(b, size, q, describe):
            q += nd
        if size < q + ne + 4:
            return False
        if not _at(b, size, q, execute):
            return True
        q += ne + 4
        items.append((q - base, fields))
        p = q
        fields = None
    return True


# -- the DataRow of one row of Python values (twin: wire/datarows.py `data_row_py`) ----------
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.float cimport PyFloat_AS_DOUBLE
from libc.string cimport memcpy

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL

# column codes (wire/datarows.py `value_code`): what this kernel encodes itself when the
# value has exactly the expected Python type; everything else is the column's encoder's
DEF _MAX_COLS = 64
cdef object _data_row_py = None


def fallback_data_row(data_row_py):
    """The twin that takes rows this kernel does not (more than 64 columns)."""
    global _data_row_py
    _data_row_py = data_row_py


cdef inline void _put32(unsigned char* p, long long v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


def data_row(row, columns, codes, encoders):
    """datarows.data_row_py: the DataRow message of `row` ({column: Python value}),
    `columns` in order, each value by its code or, when the code does not apply to the
    value's exact type, by its column's encoder (whose errors are then the twin's)."""
    cdef Py_ssize_t n = len(columns)
    if n > _MAX_COLS:
        return _data_row_py(row, columns, codes, encoders)
    cdef const char* ptrs[_MAX_COLS]
    cdef Py_ssize_t lens[_MAX_COLS]
    cdef long long ints[_MAX_COLS]
    cdef int kinds[_MAX_COLS]      # 0 bytes at ptrs, 1 int (big-endian, lens bytes), 2 double
    cdef double dbl[_MAX_COLS]
    cdef Py_ssize_t i, total = 7, size
    cdef int code, overflow
    cdef long long x
    cdef const char* s
    keep = []
    for i in range(n):
        v = row[columns[i]]
        kinds[i] = 0
        if v is None:
            lens[i] = -1
            total += 4
            continue
        code = codes[i]
        if code == 1 and type(v) is str:
            try:
                s = PyUnicode_AsUTF8AndSize(v, &size)
            except UnicodeError:
                s = NULL           # surrogates: the encoder raises its own error
            if s != NULL:
                ptrs[i] = s
                lens[i] = size
                total += 4 + size
                continue
        elif 2 <= code <= 4 and type(v) is int:
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow == 0 and (code == 2 or (code == 3 and -2147483648 <= x <= 2147483647)
                                  or (code == 4 and -32768 <= x <= 32767)):
                kinds[i] = 1
                ints[i] = x
                lens[i] = 8 if code == 2 else (4 if code == 3 else 2)
                total += 4 + lens[i]
                continue
        elif code == 5 and type(v) is float:
            kinds[i] = 2
            dbl[i] = PyFloat_AS_DOUBLE(v)
            lens[i] = 8
            total += 12
            continue
        b = encoders[i](v)
        if b is None:
            lens[i] = -1
            total += 4
            continue
        if type(b) is not bytes:
            b = bytes(b)
        keep.append(b)
        ptrs[i] = PyBytes_AS_STRING(b)
        lens[i] = PyBytes_GET_SIZE(b)
        total += 4 + lens[i]
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
    cdef unsigned long long u
    cdef int k
    p[0] = 68              # 'D'
    _put32(p + 1, total - 1)
    p[5] = (n >> 8) & 0xFF
    p[6] = n & 0xFF
    p += 7
    for i in range(n):
        size = lens[i]
        _put32(p, size)
        p += 4
        if size <= 0:
            continue
        if kinds[i] == 0:
            memcpy(p, ptrs[i], size)
        else:
            if kinds[i] == 1:
                u = <unsigned long long>ints[i]
            else:
                memcpy(&u, &dbl[i], 8)
            for k in range(size):
                p[k] = (u >> (8 * (size - 1 - k))) & 0xFF
        p += size
    return out


# -- a column of binary NUMERIC parameters (twin: wire/params.py `numeric_column_py`) -------
cdef object _numeric_one = None       # params.numeric_from_binary: the cases handed over
cdef object _Decimal = None


def fallback_numeric(numeric_from_binary, decimal_type):
    """The twin's per-value decoder (which takes every value this kernel does not decide,
    so errors are its own) and the Decimal type."""
    global _numeric_one, _Decimal
    _numeric_one, _Decimal = numeric_from_binary, decimal_type


def numeric_column(raw, list out):
    """params.numeric_column_py: each of `raw` (binary NUMERIC values, None for NULL)
    decoded and appended to `out`, in order; a value that fails raises its error with
    the values before it appended. The common case (at most 8 base-10000 digits, a
    positive or negative sign, the padding of the last digit all zeros: the twin's own
    fast case) is built here as the twin builds it, from the coefficient's text and
    exponent; every other value is the twin's."""
    cdef Py_ssize_t size, i, nd, shift, ln
    cdef const unsigned char* p
    cdef int ndigits, weight, sign, dscale, d, k
    cdef char text[128]
    cdef bint ok
    for v in raw:
        if v is None:
            out.append(None)
            continue
        ok = False
        if type(v) is bytes:
            size = PyBytes_GET_SIZE(v)
            p = <const unsigned char*>PyBytes_AS_STRING(v)
            if size >= 8:
                ndigits = _i16(p)
                weight = _i16(p + 2)
                sign = (p[4] << 8) | p[5]
                dscale = _i16(p + 6)
                shift = (weight - ndigits + 1) * 4 + dscale
                ok = 0 <= ndigits <= 8 and size == 8 + 2 * ndigits and -4 < shift <= 60 \
                    and (sign == 0 or sign == 0x4000)
                if ok:
                    ln = 0
                    if sign:
                        text[ln] = 45     # '-'
                        ln += 1
                    text[ln] = 48         # '0': the coefficient, leading zeros allowed
                    ln += 1
                    for i in range(ndigits):
                        d = (p[8 + 2 * i] << 8) | p[9 + 2 * i]
                        if d > 9999:
                            ok = False
                            break
                        for k in range(3, -1, -1):
                            text[ln + k] = 48 + d % 10
                            d //= 10
                        ln += 4
                    if ok and shift < 0 and ndigits == 0:
                        ok = False          # no digit to drop the padding from: the twin
                    if ok and shift < 0:    # the last digit's padding must be zeros
                        for k in range(-shift):
                            if text[ln - 1 - k] != 48:
                                ok = False
                        ln += shift
                    if ok:
                        for k in range(shift if shift > 0 else 0):
                            text[ln] = 48
                            ln += 1
                        text[ln] = 69     # 'E'
                        ln += 1
                        ln += _put_int(text + ln, -dscale)
                        out.append(_Decimal(PyUnicode_DecodeUTF8(text, ln, NULL)))
        if not ok:
            out.append(_numeric_one(v))


cdef inline Py_ssize_t _put_int(char* p, int v) noexcept nogil:
    cdef char tmp[12]
    cdef Py_ssize_t n = 0, i, neg = 0
    cdef unsigned int u
    if v < 0:
        p[0] = 45
        neg = 1
        u = <unsigned int>(-(<long long>v))
    else:
        u = <unsigned int>v
    while True:
        tmp[n] = 48 + u % 10
        n += 1
        u //= 10
        if u == 0:
            break
    for i in range(n):
        p[neg + i] = tmp[n - 1 - i]
    return neg + n


# -- the replies of a pipelined batch's applied items (twin: wire/protocol.py
# `batch_replies_py`) -------------------------------------------------------------------------
cdef object _replies_py = None


def fallback_replies(batch_replies_py):
    """The twin that takes spans this kernel does not (another buffer type, a frame that
    does not lie within the span)."""
    global _replies_py
    _replies_py = batch_replies_py


def batch_replies(buf, Py_ssize_t p, Py_ssize_t end, bytes parse_complete,
                  bytes bind_complete, bytes no_data, bytes done):
    """protocol.batch_replies_py: one reply per frame of buf[p:end] (Parse, Bind,
    Describe, anything else: `done`), in order, as one bytes object."""
    cdef Py_ssize_t size, q, n, total = 0
    cdef const unsigned char* b = _ptr(buf, &size)
    if b == NULL or p < 0 or end > size or p > end:
        return _replies_py(buf, p, end, parse_complete, bind_complete, no_data, done)
    cdef Py_ssize_t lp = PyBytes_GET_SIZE(parse_complete)
    cdef Py_ssize_t lb = PyBytes_GET_SIZE(bind_complete)
    cdef Py_ssize_t ln = PyBytes_GET_SIZE(no_data)
    cdef Py_ssize_t ld = PyBytes_GET_SIZE(done)
    q = p
    while q < end:                  # the sizes first, and every frame within the span
        if end - q < 5:
            return _replies_py(buf, p, end, parse_complete, bind_complete, no_data, done)
        n = _i32(b + q + 1)
        if n < 4 or end - q - 1 < n:
            return _replies_py(buf, p, end, parse_complete, bind_complete, no_data, done)
        total += lp if b[q] == 80 else (lb if b[q] == 66 else (ln if b[q] == 68 else ld))
        q += 1 + n
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* o = PyBytes_AS_STRING(out)
    cdef const char* sp = PyBytes_AS_STRING(parse_complete)
    cdef const char* sb = PyBytes_AS_STRING(bind_complete)
    cdef const char* sn = PyBytes_AS_STRING(no_data)
    cdef const char* sd = PyBytes_AS_STRING(done)
    q = p
    while q < end:
        if b[q] == 80:
            memcpy(o, sp, lp)
            o += lp
        elif b[q] == 66:
            memcpy(o, sb, lb)
            o += lb
        elif b[q] == 68:
            memcpy(o, sn, ln)
            o += ln
        else:
            memcpy(o, sd, ld)
            o += ld
        q += 1 + _i32(b + q + 1)
    return out
