"""RowSetTree (engine/tablet/rowset_tree.py) against brute force over random intervals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tablet.rowset_tree import RowSetTree

# Keys are short byte strings over a tiny alphabet (incl. NUL) so intervals overlap, share
# endpoints and nest often; the empty key is a legal key too. Keys are in the canonical form
# of key_encoding (never ending in a zero byte), which numpy ``S`` arrays rely on.
KEY = st.lists(st.sampled_from([0, 1, 2, 0x61, 0xFF]), max_size=3).map(
    lambda b: bytes(b).rstrip(b"\x00"))


@st.composite
def intervals(draw):
    n = draw(st.integers(0, 12))
    out = []
    for _ in range(n):
        a, b = draw(KEY), draw(KEY)
        out.append((min(a, b), max(a, b)))
    return out


def build(ivs):
    names = [f"rs{i}" for i in range(len(ivs))]
    return names, RowSetTree(names, ivs)


PROP = settings(max_examples=100, deadline=None)


@PROP
@given(intervals(), st.lists(KEY, max_size=12))
def test_containing_matches_brute_force(ivs, probes):
    names, tree = build(ivs)
    assert len(tree) == len(ivs)
    assert list(tree.rowsets) == names
    for k in probes + [lo for lo, _ in ivs] + [hi for _, hi in ivs]:
        got = tree.containing(k)
        assert len(got) == len(set(got))  # each rowset at most once
        assert sorted(got) == sorted(n for n, (lo, hi) in zip(names, ivs) if lo <= k <= hi)


@PROP
@given(intervals(), st.one_of(st.none(), KEY), st.one_of(st.none(), KEY))
def test_overlapping_matches_brute_force(ivs, lower, upper):
    names, tree = build(ivs)
    want = [n for n, (lo, hi) in zip(names, ivs)
            if (upper is None or lo < upper) and (lower is None or hi >= lower)]
    assert tree.overlapping(lower, upper) == want
    # Whatever the tree returns covers every rowset that has a key in [lower, upper).
    for n, (lo, hi) in zip(names, ivs):
        for k in (lo, hi):
            if (lower is None or k >= lower) and (upper is None or k < upper):
                assert n in want


@PROP
@given(intervals(), st.lists(KEY, max_size=25))
def test_bulk_candidates_matches_brute_force(ivs, keys):
    names, tree = build(ivs)
    sorted_keys = np.sort(np.array(keys, dtype="S3")) if keys else np.array([], dtype="S1")
    got = tree.bulk_candidates(sorted_keys)
    by_name = {}
    for rs, a, b in got:
        assert rs not in by_name
        assert 0 <= a < b <= len(sorted_keys)
        by_name[rs] = (a, b)
    for n, (lo, hi) in zip(names, ivs):
        inside = [i for i, k in enumerate(sorted_keys) if lo <= bytes(k) <= hi]
        if not inside:
            assert n not in by_name
        else:
            a, b = by_name[n]
            # the slice is contiguous and exactly the keys inside the range
            assert list(range(a, b)) == inside


def test_empty_tree():
    tree = RowSetTree([], [])
    assert len(tree) == 0
    assert tree.containing(b"x") == []
    assert tree.overlapping(None, None) == []
    assert tree.bulk_candidates(np.array([b"a"], dtype="S1")) == []


def test_bulk_candidates_empty_keys():
    names, tree = build([(b"a", b"b")])
    assert tree.bulk_candidates(np.array([], dtype="S1")) == []


def test_many_disjoint_rowsets():
    # a realistic shape: 200 key-ordered disjoint rowsets from successive flushes, plus a few
    # wide ones (out-of-order inserts)
    ivs = [(b"%06d" % (10 * i), b"%06d" % (10 * i + 9)) for i in range(200)]
    ivs += [(b"000000", b"999999"), (b"000555", b"000777")]
    names, tree = build(ivs)
    for probe in [b"000000", b"000555", b"000560", b"001999", b"002000", b"999999", b"5"]:
        want = sorted(n for n, (lo, hi) in zip(names, ivs) if lo <= probe <= hi)
        assert sorted(tree.containing(probe)) == want
