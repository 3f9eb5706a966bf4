"""Bit shuffling for the BIT_SHUFFLE page encoding (engine.cfile.encodings), vectorised with numpy.

The n values of width w bytes are regrouped into w*8 bit planes: plane 8j+b holds bit b of
byte j of every value. Columns whose values share high bits (small integers, nearby
timestamps) then have long runs of equal bytes that LZ4 compresses well. The shuffle is a
byte transpose followed by an 8x8 bit-matrix transpose of every 64-bit word (Hacker's
Delight transpose8); both are their own inverse.
"""

from __future__ import annotations

import numpy as np


_M7 = np.uint64(0x00AA00AA00AA00AA)
_M14 = np.uint64(0x0000CCCC0000CCCC)
_M28 = np.uint64(0x00000000F0F0F0F0)


def transpose8(x: np.ndarray) -> None:
    """In place: each uint64, seen as an 8x8 bit matrix (byte i = row i, LSB first), transposed.

    Hacker's Delight transpose8; the transpose is an involution, so this also inverts itself.
    """
    t = np.empty_like(x)
    for shift, mask in ((7, _M7), (14, _M14), (28, _M28)):
        s = np.uint64(shift)
        np.right_shift(x, s, out=t)
        t ^= x
        t &= mask
        x ^= t
        t <<= s
        x ^= t


def bitshuffle(mat: np.ndarray) -> np.ndarray:
    """(n, w) uint8 value bytes -> (w*8 planes, ceil(n/8)) uint8: plane 8j+b holds bit b of
    byte j of every value, values in order, LSB first (engine.cfile.encodings' BIT_SHUFFLE)."""
    n, w = mat.shape
    n8 = (n + 7) >> 3
    bt = np.zeros((w, n8 * 8), np.uint8)
    bt[:, :n] = mat.T  # byte transpose: row j = byte j of every value
    x = bt.view("<u8")  # (w, n8): word g of row j = byte j of values 8g..8g+7
    transpose8(x)  # word g now holds, in its byte b, bit b of those 8 bytes
    return np.ascontiguousarray(x.view(np.uint8).reshape(w, n8, 8).transpose(0, 2, 1))


def bitunshuffle(planes: np.ndarray, n: int, w: int) -> np.ndarray:
    """Inverse of bitshuffle: flat plane bytes -> (n, w) uint8 (C-contiguous)."""
    n8 = (n + 7) >> 3
    bt = planes[: w * 8 * n8].reshape(w, 8, n8).transpose(0, 2, 1).copy()  # writable, C order
    transpose8(bt.reshape(w, n8 * 8).view("<u8"))
    return np.ascontiguousarray(bt.reshape(w, n8 * 8)[:, :n].T)
