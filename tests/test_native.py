"""The compiled core against its pure-Python twins (native/__init__.py).

Each kernel is compared with the twin that specifies it on generated inputs (random keys of
every length around the 8-byte word boundaries, trailing NULs, seeds, real bloom filters
of several shapes), and chosen test files are run again in a subprocess with
KUDUSQL_PURE_PYTHON=1, so both implementations stay tested. When the extension is not
built the comparisons are skipped, unless KUDUSQL_REQUIRE_NATIVE=1 (`make test`) makes
that an error: a broken build must not hide behind the fallback."""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest

import native
from engine.catalog.partition import bucket_hash_py, bucket_hashes
from engine.cfile.bloom import BloomFilter, hash_key_py, hash_keys

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def kernels():
    if os.environ.get("KUDUSQL_REQUIRE_NATIVE", "") not in ("", "0"):
        mod = native.load("_hashing")
        assert mod is not None, "KUDUSQL_REQUIRE_NATIVE=1 but KUDUSQL_PURE_PYTHON is set"
        return mod
    mod = native.load("_hashing")
    if mod is None:
        pytest.skip("the compiled core is not built (pip install -e . builds it)")
    return mod


def _keys(rng: random.Random, n: int) -> list[bytes]:
    out = [b"", b"\x00", b"\x00" * 9, b"\xff" * 8, b"\xff" * 17]
    for _ in range(n):
        k = bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
                  for _ in range(rng.choice([0, 1, 7, 8, 9, 15, 16, 17, rng.randrange(64)])))
        if rng.random() < 0.2:
            k += b"\x00" * rng.randrange(1, 10)           # trailing NULs are not the key
        out.append(k)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_hash_key_matches_its_twin(kernels, seed):
    rng = random.Random(seed)
    keys = _keys(rng, 3000)
    for k in keys:
        want = hash_key_py(k)
        assert kernels.hash_key(k) == want, k
        assert kernels.hash_key(bytearray(k)) == want
        assert kernels.hash_key(memoryview(k)) == want
        assert kernels.hash_key(np.bytes_(k)) == want
    # and the vectorised hash of the same keys (the bloom filters' persisted form)
    arr = np.array(keys, dtype=f"S{max(len(k) for k in keys) or 1}")
    assert [kernels.hash_key(k) for k in keys] == hash_keys(arr).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_bucket_hash_matches_its_twin(kernels, seed):
    rng = random.Random(100 + seed)
    keys = _keys(rng, 2000)
    for k in keys:
        s = rng.choice([0, 1, 7, 2 ** 31, 2 ** 32 - 1, 2 ** 64 + 5, -3])
        assert kernels.bucket_hash(k, s) == bucket_hash_py(k, s), (k, s)
    arr = np.array([k.rstrip(b"\x00") for k in keys], dtype="S64")
    assert [kernels.bucket_hash(k, 5) for k in keys] == bucket_hashes(arr, 5).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_bloom_probe_matches_its_twin(kernels, seed):
    rng = random.Random(200 + seed)
    present = _keys(rng, rng.choice([10, 500, 5000]))
    arr = np.array(present, dtype="S64")
    f = BloomFilter.build(hash_keys(arr), fp_rate=rng.choice([0.5, 0.01, 0.0001]))
    again = BloomFilter.from_bytes(f.to_bytes())          # the zero-copy form DiskRowSets use
    probes = [hash_key_py(k) for k in present + _keys(rng, 3000)] + \
        [rng.getrandbits(64) for _ in range(3000)] + [0, 2 ** 64 - 1]
    for h in probes:
        want = f.may_contain_one_py(h)
        assert kernels.bloom_probe(f._mv, f.n_blocks, f.k, h) == want
        assert again.may_contain_one(h) == want
    assert all(f.may_contain_one(hash_key_py(k)) for k in present)   # no false negatives


def test_the_checks_bite(kernels):
    """A twin that differs in one bit is caught (the comparisons above are not vacuous)."""
    k = b"kudusql-key"
    assert kernels.hash_key(k) != hash_key_py(k) ^ 1
    assert kernels.bucket_hash(k, 3) != bucket_hash_py(k, 4)


def test_pure_python_twins_pass_the_key_and_partition_tests():
    """The same engine tests with the compiled core switched off."""
    if native.pure_python():
        pytest.skip("already running the pure-Python twins")
    files = ["tests/engine/test_bloom.py", "tests/engine/catalog/test_partition.py",
             "tests/engine/catalog/test_table.py", "tests/sql/test_point_reads.py"]
    files = [f for f in files if (ROOT / f).exists()]
    env = {**os.environ, "KUDUSQL_PURE_PYTHON": "1", "KUDUSQL_REQUIRE_NATIVE": "0"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        *files], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
