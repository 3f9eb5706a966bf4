# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the scalar key hashing of engine/cfile/bloom.py and
engine/catalog/partition.py (the point-lookup path): `hash_key`, `bucket_hash` and
`bloom_probe`; and `find_sorted`, a key's position in a sorted array of fixed-width keys
(engine/key_encoding.py, the MemRowSet's and DiskRowSet's point probes). Bit for bit the
pure-Python functions' results (tests/test_native.py compares them on random keys); the
persisted formats (bloom filters in DiskRowSets, hash
buckets in partition metadata) are defined by those, not by this file."""

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_STRIDES, PyBuffer_Release, PyObject_GetBuffer
from libc.string cimport memcmp, memcpy, strlen

cdef uint64_t _SEED = 0x9E3779B97F4A7C15ULL
cdef uint64_t _K_LEN = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t _K_WORD = 0x87C37B91114253D5ULL
cdef uint64_t _F1 = 0xFF51AFD7ED558CCDULL
cdef uint64_t _F2 = 0xC4CEB9FE1A85EC53ULL
cdef uint64_t _GOLDEN = 0x9E3779B97F4A7C15ULL
cdef int _BLOCK_BITS = 512

# c_i of the enhanced double hashing (engine/cfile/bloom.py _OFFSETS), i < 16
cdef uint32_t _OFFSETS[16]
cdef int _i
for _i in range(16):
    _OFFSETS[_i] = <uint32_t>((((_i * _i * _i - _i) // 6) * 0x9E3779B9) & 0xFFFFFFFF)


cdef inline uint64_t fmix64(uint64_t h) noexcept nogil:
    h ^= h >> 33
    h *= _F1
    h ^= h >> 33
    h *= _F2
    h ^= h >> 33
    return h


cdef uint64_t _hash(const uint8_t* key, Py_ssize_t n) noexcept nogil:
    while n > 0 and key[n - 1] == 0:        # trailing NULs are not part of the key
        n -= 1
    cdef uint64_t h = _SEED ^ (<uint64_t>n * _K_LEN)
    cdef uint64_t word
    cdef Py_ssize_t pos = 0, take, j
    while pos < n:
        word = 0
        take = n - pos if n - pos < 8 else 8
        for j in range(take):               # little-endian word, zero-padded
            word |= (<uint64_t>key[pos + j]) << (8 * j)
        h = fmix64(h ^ (word * _K_WORD))
        pos += 8
    return fmix64(h + _K_LEN)


cdef uint64_t _hash_object(key) except? 0:
    cdef const uint8_t[:] view
    if isinstance(key, bytes):              # bytes and numpy.bytes_: no buffer protocol
        return _hash(<const uint8_t*><const char*>key, len(<bytes>key))
    view = key
    if view.shape[0] == 0:
        return _hash(NULL, 0)
    return _hash(&view[0], view.shape[0])


def hash_key(key) -> int:
    """The hash of one encoded key (bytes-like); equals bloom.hash_key."""
    return _hash_object(key)


def bucket_hash(key, seed=0) -> int:
    """The bucket hash of one canonical encoded key; equals partition.bucket_hash."""
    cdef uint64_t h = _hash_object(key)
    cdef uint64_t word
    if seed:
        word = ((seed + 1) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF   # any int seed
        h = fmix64(h ^ fmix64(word))
    return h


def bloom_probe(const uint8_t[:] bits, uint64_t n_blocks, int k, uint64_t h) -> bool:
    """BloomFilter.may_contain_one: False means the hash's key is certainly absent."""
    cdef uint64_t base = (((h >> 32) * n_blocks) >> 32) * _BLOCK_BITS
    cdef uint64_t h1 = h & 0xFFFFFFFFULL
    cdef uint64_t h2 = (h * _GOLDEN) >> 32
    cdef uint64_t b
    cdef int i
    for i in range(k):
        b = base + ((<uint32_t>(h1 + <uint64_t>i * h2 + _OFFSETS[i])) >> 23)
        if not (bits[b >> 3] >> (b & 7)) & 1:
            return False
    return True


cdef object _find_sorted_py = None


def fallback_find(find_sorted_py):
    """Register the twin (engine/key_encoding.py) that takes every `find_sorted` call this
    kernel does not decide: a key that is not bytes, keys that are not a one-dimensional
    contiguous array of fixed-width bytes."""
    global _find_sorted_py
    _find_sorted_py = find_sorted_py


def find_sorted(keys, key) -> int:
    """key_encoding.find_sorted_py: the position of `key` (encoded, bytes) in `keys`, a
    sorted numpy array of fixed-width bytes (dtype S<w>: NUL-padded), or -1 - the first
    position numpy's `searchsorted` gives if the value there is `key`. A key longer than
    w or ending in NUL equals no value (numpy reads values without their padding)."""
    cdef Py_buffer view
    cdef Py_ssize_t n, w, lo, hi, mid, count, j
    cdef const uint8_t* base
    cdef const uint8_t* k
    cdef const uint8_t* e
    cdef int c
    if type(key) is not bytes:
        return _find_sorted_py(keys, key)
    try:
        PyObject_GetBuffer(keys, &view, PyBUF_STRIDES | PyBUF_FORMAT)
    except (BufferError, TypeError, ValueError):
        return _find_sorted_py(keys, key)
    try:
        w = view.itemsize
        if view.ndim != 1 or view.format == NULL or w <= 0 or view.strides[0] != w or \
                view.format[0] == 0 or view.format[strlen(view.format) - 1] != 115:   # 's'
            return _find_sorted_py(keys, key)
        n = len(<bytes>key)
        k = <const uint8_t*><const char*>key
        if n > w or (n > 0 and k[n - 1] == 0):
            return -1
        base = <const uint8_t*>view.buf
        count = view.shape[0]
        lo = 0
        hi = count
        while lo < hi:                  # the first value >= key (NUL-padded to w)
            mid = (lo + hi) >> 1
            e = base + mid * w
            c = memcmp(e, k, n)
            if c == 0:
                for j in range(n, w):
                    if e[j] != 0:
                        c = 1
                        break
            if c < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo == count:
            return -1
        e = base + lo * w
        if memcmp(e, k, n) != 0:
            return -1
        for j in range(n, w):
            if e[j] != 0:
                return -1
        return lo
    finally:
        PyBuffer_Release(&view)
