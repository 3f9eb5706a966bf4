"""Key hashing and the blocked bloom filter of engine.cfile.bloom."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cfile.bloom import BloomFilter, hash_key, hash_keys
from engine.errors import Corruption

# keys made of few distinct bytes so embedded, leading and trailing NULs are common
key_bytes = st.binary(max_size=40) | st.lists(
    st.sampled_from([b"\x00", b"\x01", b"a", b"\xff"]), max_size=30).map(b"".join)


def random_keys(rng: np.random.Generator, n: int, max_len: int = 24) -> list[bytes]:
    lengths = rng.integers(0, max_len + 1, n)
    alphabet = np.array([0, 0, 1, 97, 255], np.uint8)  # NUL-heavy
    return [bytes(alphabet[rng.integers(0, 5, k)]) for k in lengths]


# --------------------------------------------------------------------------------------------
# hash
# --------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(key_bytes, min_size=1, max_size=20), st.integers(0, 17))
def test_scalar_hash_equals_vectorised(keys, extra_width):
    width = max(1, max(len(k) for k in keys)) + extra_width
    arr = np.array(keys, dtype=f"S{width}")
    hashes = hash_keys(arr)
    assert hashes.dtype == np.uint64 and hashes.shape == (len(keys),)
    for key, h in zip(keys, hashes):
        assert hash_key(key) == int(h)
        assert hash_keys(np.array([key]))[0] == h


def test_scalar_hash_random_keys():
    rng = np.random.default_rng(11)
    keys = random_keys(rng, 3000, max_len=70)
    hashes = hash_keys(np.array(keys))
    assert [hash_key(k) for k in keys] == [int(h) for h in hashes]


def test_hash_is_width_independent_and_ignores_trailing_nuls():
    rng = np.random.default_rng(12)
    keys = random_keys(rng, 500)
    base = hash_keys(np.array(keys, dtype="S24"))
    for width in (25, 31, 32, 33, 40, 64, 65):
        assert np.array_equal(hash_keys(np.array(keys, dtype=f"S{width}")), base)
    padded = [k + b"\x00" * 3 for k in keys]
    assert np.array_equal(hash_keys(np.array(padded, dtype="S27")), base)
    assert hash_key(b"ab\x00\x00") == hash_key(b"ab")
    assert hash_key(b"\x00\x00") == hash_key(b"") == int(hash_keys(np.array([b""]))[0])


def test_hash_distinguishes_nul_positions_and_lengths():
    keys = [b"", b"\x00a", b"a\x00a", b"\x00\x00a", b"a", b"aa", b"\x01", b"\x00\x01",
            b"a" * 8, b"a" * 8 + b"\x00b", b"a" * 16, b"a" * 7 + b"\x00" + b"a" * 8]
    hashes = hash_keys(np.array(keys))
    assert len(set(hashes.tolist())) == len(keys)


def test_hash_has_no_collisions_on_sequential_keys():
    n = 200_000
    keys = np.array([b"\x80\x00\x00\x00%s" % i.to_bytes(4, "big") for i in range(n)])
    assert len(np.unique(hash_keys(keys))) == n


def test_hash_keys_rejects_non_bytes_arrays():
    with pytest.raises(TypeError):
        hash_keys(np.array(["text"]))
    assert hash_keys(np.zeros(0, dtype="S8")).shape == (0,)


# --------------------------------------------------------------------------------------------
# filter
# --------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(key_bytes, min_size=1, max_size=300),
       st.sampled_from([0.3, 0.05, 0.01, 0.001]))
def test_no_false_negatives(keys, fp_rate):
    hashes = hash_keys(np.array(keys))
    bf = BloomFilter.build(hashes, fp_rate)
    assert bf.may_contain(hashes).all()
    assert all(bf.may_contain_one(hash_key(k)) for k in keys)
    again = BloomFilter.from_bytes(bf.to_bytes())
    assert again.may_contain(hashes).all()


@pytest.mark.parametrize("fp_rate", [0.01, 0.001])
def test_false_positive_rate_near_target(fp_rate):
    n = 100_000
    keys = np.array([b"\x80" + i.to_bytes(8, "big") for i in range(n)])
    bf = BloomFilter.build(hash_keys(keys), fp_rate)
    assert bf.may_contain(hash_keys(keys)).all()
    rng = np.random.default_rng(13)
    probes = rng.integers(0, 2**63, 300_000, dtype=np.int64).astype(np.uint64) | np.uint64(1)
    measured = bf.may_contain(hash_keys(probes.astype(">u8").view("S8"))).mean()
    assert fp_rate / 3 < measured < 2 * fp_rate, measured
    bits_per_key = bf.nbytes * 8 / n
    assert bits_per_key < 1.5 * (-np.log(fp_rate) / np.log(2) ** 2)


def test_scalar_probe_matches_vectorised():
    rng = np.random.default_rng(14)
    bf = BloomFilter.build(rng.integers(0, 2**64, 5000, dtype=np.uint64), 0.05)
    probes = rng.integers(0, 2**64, 20_000, dtype=np.uint64)
    vec = bf.may_contain(probes)
    assert 0 < vec.sum() < len(probes)
    assert [bf.may_contain_one(int(h)) for h in probes] == vec.tolist()
    assert bf.may_contain_one(probes[0]) == vec[0]  # numpy scalar accepted


def test_empty_filter_contains_nothing():
    bf = BloomFilter.build(np.zeros(0, np.uint64))
    probes = np.arange(1000, dtype=np.uint64)
    assert not bf.may_contain(probes).any()
    assert not bf.may_contain_one(12345)
    assert bf.may_contain(np.zeros(0, np.uint64)).shape == (0,)


def test_serialisation_round_trip_is_zero_copy():
    rng = np.random.default_rng(15)
    hashes = rng.integers(0, 2**64, 10_000, dtype=np.uint64)
    bf = BloomFilter.build(hashes, 0.02)
    blob = bf.to_bytes()
    probes = rng.integers(0, 2**64, 10_000, dtype=np.uint64)
    want = bf.may_contain(probes)
    for buf in (blob, memoryview(blob), bytearray(blob), pa.py_buffer(blob)):
        again = BloomFilter.from_bytes(buf)
        assert (again.n_blocks, again.k) == (bf.n_blocks, bf.k)
        assert np.array_equal(again.may_contain(probes), want)
    mutable = bytearray(blob)
    view = BloomFilter.from_bytes(mutable)
    assert np.shares_memory(view._bits, np.frombuffer(mutable, np.uint8))
    # trailing bytes (e.g. the rest of a file) are ignored
    assert np.array_equal(BloomFilter.from_bytes(blob + b"xyz").may_contain(probes), want)


def test_bad_serialised_filters_raise():
    blob = BloomFilter.build(np.arange(100, dtype=np.uint64)).to_bytes()
    with pytest.raises(Corruption):
        BloomFilter.from_bytes(blob[:10])
    with pytest.raises(Corruption):
        BloomFilter.from_bytes(b"XXXX" + blob[4:])
    with pytest.raises(Corruption):
        BloomFilter.from_bytes(blob[:-1])


def test_build_rejects_bad_fp_rate():
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError):
            BloomFilter.build(np.arange(10, dtype=np.uint64), bad)
