"""Budgeted compaction policy (engine/tablet/compaction_policy.py): hand-made layouts, the cost
model against brute force, and the knapsack against exhaustive search."""

from __future__ import annotations

import itertools
import random
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tablet.compaction_policy import (
    CompactionPolicyConfig,
    RowSetInfo,
    average_height,
    pick_rowsets_to_compact,
    select_rowsets_to_compact,
)

MiB = 2**20
DEFAULT = CompactionPolicyConfig()
PROP = settings(max_examples=150, deadline=None)


def k(i: int) -> bytes:
    """An 8-byte big-endian key: positions are proportional to i."""
    return i.to_bytes(8, "big")


def rs(id_: int, lo: int, hi: int, size: int) -> RowSetInfo:
    return RowSetInfo(id_, size, k(lo), k(hi))


# --- independent reference implementations --------------------------------------------------

def brute_width(target: RowSetInfo, data: list[RowSetInfo]) -> Fraction:
    """P(X in [target.min, target.max]) for X drawn from `data`, each rowset uniform over its
    integer key range (a point mass when min == max). Pairwise, exact, no CDF machinery."""
    a, b = int.from_bytes(target.min_key, "big"), int.from_bytes(target.max_key, "big")
    total = sum(r.size_bytes for r in data)
    if total == 0:
        return Fraction(0)
    mass = Fraction(0)
    for r in data:
        lo, hi = int.from_bytes(r.min_key, "big"), int.from_bytes(r.max_key, "big")
        if lo == hi:
            mass += r.size_bytes if a <= lo <= b else 0
        else:
            overlap = max(0, min(b, hi) - max(a, lo))
            mass += Fraction(r.size_bytes * overlap, hi - lo)
    return mass / total


def brute_height(rowsets, data=None) -> float:
    data = rowsets if data is None else data
    return float(sum(brute_width(r, data) for r in rowsets))


def merged(rowsets, ids):
    """The layout after merging `ids` into one rowset over their union range."""
    picked = [r for r in rowsets if r.id in ids]
    rest = [r for r in rowsets if r.id not in ids]
    new = RowSetInfo(max(r.id for r in rowsets) + 1, sum(r.size_bytes for r in picked),
                     min(r.min_key for r in picked), max(r.max_key for r in picked))
    return rest + [new]


def brute_score(rowsets, subset, cfg, widths=None) -> float:
    if widths is None:
        widths = {r.id: float(brute_width(r, rowsets)) for r in rowsets}
    v = sum(widths[r.id] + cfg.small_rowset_tradeoff
            * max(0.0, 1 - r.size_bytes / cfg.target_rowset_bytes) for r in subset)
    u = float(brute_width(RowSetInfo(-1, 0, min(r.min_key for r in subset),
                                     max(r.max_key for r in subset)), rowsets))
    return v - u if v <= u else v - cfg.support_adjust * u


def total_size(rowsets, ids):
    return sum(r.size_bytes for r in rowsets if r.id in ids)


# --- hand-made layouts ------------------------------------------------------------------------

def test_disjoint_sequential_rowsets_need_nothing():
    # time-series load: flushes roll at the target size, key ranges never overlap
    layout = [rs(i, i * 1000, i * 1000 + 999, 32 * MiB) for i in range(40)]
    assert average_height(layout) == pytest.approx(1.0)
    assert pick_rowsets_to_compact(layout) == ([], 0.0)
    # a small last rowset does not change that: one bonus (<= gamma) is below the threshold
    layout.append(rs(40, 40_000, 40_500, 3 * MiB))
    assert pick_rowsets_to_compact(layout) == ([], 0.0)


def test_many_tiny_disjoint_rowsets_are_merged_for_the_small_rowset_bonus():
    layout = [rs(i, i * 10, i * 10 + 9, MiB // 2) for i in range(20)]
    sel = select_rowsets_to_compact(layout)
    assert len(sel.ids) == 20                     # 10 MiB in all, far below the budget
    assert sel.quality == pytest.approx(0.0, abs=1e-12)   # the height is already 1
    assert sel.score > DEFAULT.minimum_improvement


def overlapping(n, size, seed=1):
    rng = random.Random(seed)
    return [rs(i, rng.randrange(0, 100), rng.randrange(999_900, 1_000_000), size)
            for i in range(n)]


def test_fully_overlapping_rowsets_all_picked_within_budget():
    layout = overlapping(10, 8 * MiB)
    ids, quality = pick_rowsets_to_compact(layout)
    assert ids == list(range(10))
    assert average_height(layout) == pytest.approx(10.0, abs=1e-3)
    assert quality == pytest.approx(9.0, abs=1e-3)


def test_tight_budget_picks_best_subset_within_budget():
    layout = overlapping(20, 30 * MiB)
    cfg = CompactionPolicyConfig(budget_bytes=100 * MiB)
    ids, quality = pick_rowsets_to_compact(layout, cfg)
    assert len(ids) == 3 and total_size(layout, ids) <= cfg.budget_bytes
    assert quality == pytest.approx(2.0, abs=1e-3)
    # unequal sizes: never exceed the budget, prefer many small inputs
    rng = random.Random(7)
    layout = [rs(i, rng.randrange(100), rng.randrange(999_900, 10**6), rng.randrange(1, 60) * MiB)
              for i in range(30)]
    ids, _ = pick_rowsets_to_compact(layout, cfg)
    assert len(ids) >= 2 and total_size(layout, ids) <= cfg.budget_bytes


def test_huge_rowset_overlapped_by_small_ones():
    big = rs(0, 0, 1_000_000, 1024 * MiB)
    small = [rs(i, 1000 + 10 * i, 2000 + 10 * i, 4 * MiB) for i in range(1, 6)]
    far = [rs(10 + i, 500_000 + 1000 * i, 500_000 + 1000 * i + 999, 32 * MiB) for i in range(3)]
    layout = [big] + small + far
    ids, quality = pick_rowsets_to_compact(layout)
    assert ids == [1, 2, 3, 4, 5]                 # big one exceeds the 256 MiB budget
    assert quality > DEFAULT.minimum_improvement
    # with room for it, the big one may join, but only if that scores at least as well
    cfg = CompactionPolicyConfig(budget_bytes=4096 * MiB)
    sel = select_rowsets_to_compact(layout, cfg)
    assert set(range(1, 6)) <= set(sel.ids)
    assert sel.score >= brute_score(layout, small, cfg) - 1e-9


def test_rowsets_larger_than_budget_never_picked():
    layout = overlapping(6, 300 * MiB) + [rs(100 + i, 10, 999_990, 2 * MiB) for i in range(3)]
    ids, _ = pick_rowsets_to_compact(layout)
    assert ids == [100, 101, 102]


def test_degenerate_inputs():
    assert pick_rowsets_to_compact([]) == ([], 0.0)
    assert pick_rowsets_to_compact([rs(1, 0, 10, MiB)]) == ([], 0.0)
    assert average_height([]) == 0.0
    # two copies of a single-key rowset: height 2 at that key, a merge halves it
    layout = [rs(1, 5, 5, 4 * MiB), rs(2, 5, 5, 4 * MiB)]
    assert average_height(layout) == pytest.approx(2.0)
    assert pick_rowsets_to_compact(layout) == ([1, 2], pytest.approx(1.0))
    with pytest.raises(ValueError):
        average_height([RowSetInfo(1, 1, b"b", b"a")])
    with pytest.raises(ValueError):
        pick_rowsets_to_compact([rs(1, 0, 1, 1), rs(1, 0, 1, 1)])


def test_position_not_rank_measures_tiny_rowsets_inside_a_huge_one():
    layout = [rs(0, 0, 10**6, 1000 * MiB), rs(1, 10, 11, MiB), rs(2, 5000, 5001, MiB)]
    # by rank the big rowset would put a fifth of its data in [10, 11]
    assert average_height(layout) == pytest.approx(brute_height(layout), rel=1e-9)
    assert average_height(layout) < 1.01


def test_string_keys_and_long_common_prefixes():
    pre = b"tenant-0042/" * 20
    layout = [RowSetInfo(i, 8 * MiB, pre + b"a%03d" % i, pre + b"z%03d" % i) for i in range(6)]
    ids, quality = pick_rowsets_to_compact(layout)
    assert ids == list(range(6)) and quality > 4.0


# --- properties -------------------------------------------------------------------------------

@st.composite
def layouts(draw, max_n=12, max_key=60, sizes=st.integers(0, 100)):
    n = draw(st.integers(0, max_n))
    out = []
    for i in range(n):
        a, b = draw(st.integers(0, max_key)), draw(st.integers(0, max_key))
        out.append(rs(i, min(a, b), max(a, b), draw(sizes)))
    return out


@PROP
@given(layouts(), layouts())
def test_average_height_matches_brute_force(layout, other):
    assert average_height(layout) == pytest.approx(brute_height(layout), rel=1e-9, abs=1e-12)
    if other:
        # measured under another layout's data (keys may fall between its boundary keys)
        assert average_height(layout, data=other) == pytest.approx(
            brute_height(layout, other), rel=1e-9, abs=1e-12)


MIB_SIZES = st.integers(1, 80).map(lambda m: m * MiB)
BUDGETS = st.sampled_from([64 * MiB, 100 * MiB, 256 * MiB])


@PROP
@given(layouts(max_n=16, sizes=MIB_SIZES), BUDGETS)
def test_pick_respects_budget_and_quality_is_height_reduction(layout, budget):
    cfg = CompactionPolicyConfig(budget_bytes=budget)
    sel = select_rowsets_to_compact(layout, cfg)
    if not sel.ids:
        assert sel.quality == 0.0
        return
    assert len(sel.ids) >= 2
    assert total_size(layout, sel.ids) <= budget
    assert sel.score > cfg.minimum_improvement
    after = merged(layout, set(sel.ids))
    reduction = average_height(layout) - average_height(after, data=layout)
    assert sel.quality == pytest.approx(reduction, abs=1e-9)
    assert sel.quality == pytest.approx(
        brute_height(layout) - brute_height(after, layout), abs=1e-9)


def test_quality_matches_literal_merge_when_inputs_share_a_range():
    # merging rowsets with identical ranges leaves the data distribution unchanged
    layout = [rs(i, 0, 1000, 8 * MiB) for i in range(5)] + [rs(9, 2000, 3000, 32 * MiB)]
    ids, quality = pick_rowsets_to_compact(layout)
    assert ids == [0, 1, 2, 3, 4]
    assert quality == pytest.approx(average_height(layout) - average_height(merged(layout, ids)))


@PROP
@given(layouts(max_n=10, sizes=MIB_SIZES), BUDGETS)
def test_within_approximation_ratio_of_exhaustive_search(layout, budget):
    cfg = CompactionPolicyConfig(budget_bytes=budget)
    widths = {r.id: float(brute_width(r, layout)) for r in layout}
    best = -float("inf")
    for r in range(2, len(layout) + 1):
        for subset in itertools.combinations(layout, r):
            if sum(x.size_bytes for x in subset) <= budget:
                best = max(best, brute_score(layout, subset, cfg, widths))
    sel = select_rowsets_to_compact(layout, cfg)
    if best <= cfg.minimum_improvement:
        assert sel.ids == []
        return
    assert sel.ids
    assert sel.score <= best + 1e-9
    assert sel.score * cfg.approximation_ratio >= best - 1e-9
    chosen = [x for x in layout if x.id in sel.ids]
    assert sel.score == pytest.approx(brute_score(layout, chosen, cfg), abs=1e-9)


def random_layout(n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.5:           # sequential flushes
            lo = i * 1000
            out.append(rs(i, lo, lo + 999, rng.randrange(1, 33) * MiB))
        else:                    # random-key flushes
            a, b = sorted(rng.randrange(0, n * 1000) for _ in range(2))
            out.append(rs(i, a, b, rng.randrange(1, 33) * MiB))
    return out


def test_determinism():
    layout = random_layout(80, seed=3)
    first = select_rowsets_to_compact(layout)
    assert first.ids
    for _ in range(3):
        assert select_rowsets_to_compact(layout) == first
    shuffled = list(layout)
    random.Random(0).shuffle(shuffled)
    again = select_rowsets_to_compact(shuffled)
    assert again.ids == first.ids
    assert again.quality == pytest.approx(first.quality)


@pytest.mark.parametrize("shape", ["mixed", "overlapping", "sequential"])
def test_hundred_rowsets_is_fast(shape):
    if shape == "mixed":
        layout = random_layout(100, seed=5)
    elif shape == "overlapping":
        layout = overlapping(100, 32 * MiB)
    else:
        layout = [rs(i, i * 1000, i * 1000 + 999, 32 * MiB) for i in range(100)]
    select_rowsets_to_compact(layout)            # warm up
    t0 = time.perf_counter()
    for _ in range(5):
        sel = select_rowsets_to_compact(layout)
    elapsed = (time.perf_counter() - t0) / 5
    assert elapsed < 0.1, elapsed                 # ~1-5 ms in practice; generous for CI
    assert total_size(layout, sel.ids) <= DEFAULT.budget_bytes
