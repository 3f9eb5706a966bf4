"""Budgeted compaction policy: which DiskRowSets to merge next (Kudu's BudgetedCompactionPolicy).

A pure function over rowset metadata (id, on-disk size, [min key, max key]); no I/O and no
engine imports, so the maintenance scheduler can call it on every tick and tests can feed it
hand-made layouts. Mirrors `tablet/compaction_policy.cc`, `tablet/rowset_info.cc` and
`docs/design-docs/compaction-policy.md` (paper §4.10-4.11).

Cost model
----------
The *height* at a key is the number of rowsets whose [min, max] range covers it; an insert or
point read consults that many bloom filters / key indexes, so costs are linear in height. Kudu
measures key space by data, not by raw keys: the "CDF" of the tablet is built by letting every
rowset spread its size over its own key range. The *width* of a rowset is then the fraction of
all of the tablet's data whose key lies inside the rowset's [min, max].

Average height = sum of widths. Proof: draw a stored row X from the data distribution; the
number of rowsets a lookup of X's key must consult is sum_rs 1[X in rs.range], whose
expectation is sum_rs P(X in rs.range) = sum_rs width(rs) by linearity of expectation. No
interval bookkeeping is needed.

A compaction's output is a run of non-overlapping rowsets spanning the union of the inputs'
ranges, so merging a set S lowers the average height by
    quality(S) = sum_{s in S} width(s) - width([min_s s.min, max_s s.max])
(the union is measured under the *same* data distribution: compaction moves rows between files
but does not change which keys exist). Rowsets not in S but inside the union stay where they
are; if S leaves gaps holding such data the union width counts it and quality can be negative.

Key positions (the approximation)
---------------------------------
Encoded primary keys are memcomparable bytes. A key's position is the big-endian integer of its
bytes after removing the common prefix of all boundary keys, zero-padded/truncated to
`_KEY_POSITION_BYTES` (64) bytes: order-preserving (non-decreasing) and, for integer key columns,
proportional to the real key distance -- this is Kudu's `StringFractionInRange`, done with
exact Python ints against one global prefix instead of 8 bytes after a per-rowset prefix.
Within a rowset, data is assumed uniform in position, so an elementary interval between two
adjacent boundary keys receives size * (interval length / rowset span). Fallbacks:
  * a rowset whose min and max have equal positions but different bytes (keys differing only
    past the 64 compared bytes) spreads its size evenly over the boundary intervals it spans,
    i.e. by *rank* among boundary keys;
  * a single-key rowset (min == max) is a point mass at its key; closed ranges include atoms on
    their ends.
Ranking by boundary keys alone (the cheap alternative) grossly overstates tiny rowsets inside a
huge one: with a big rowset over [0, 10^6] and small ones at [10, 11] and [5000, 5001], ranks
give [10, 11] a fifth of the big rowset's data; positions give it a millionth.

Objective (selection)
---------------------
    value(rs) = width(rs) + gamma * max(0, 1 - size/target)      (small-rowset bonus)
    score(S)  = V - U            if V <= U     (no overlap: don't penalise width)
              = V - 1.003 * U    otherwise     (kSupportAdjust penalises wide overlapping sets)
    with V = sum of values over S, U = union width, subject to sum of sizes <= budget.
The best S is found as Kudu does: for every rowset A (the left-most input), take candidates
B with B.min >= A.min in increasing max-key order; after each B, the candidates are exactly the
rowsets inside [A.min, max(A.max, B.max)] and the union width U_k is known, so the problem is a
0-1 knapsack maximising V over a candidate set that grows by one item per step. The optimum is
found at (A, B) = (its left-most input, its right-most input). Sizes are weighed in units of
`size_unit_bytes` (1 MiB, Kudu's granularity), rounded *up* and at least one unit, so the byte
budget is never exceeded and tiny rowsets are not free (Kudu's kMinSizeMb). The unit is
made finer for budgets under 64 units and coarser above 4096 so the DP table stays useful and
small.

Two passes (compaction_policy.cc RunApproximation / RunExact):
  1. Bounds. For each A, the fractional-knapsack optimum over all of A's candidates (Kudu's
     BoundCalculator: a min-density heap; the candidate sets are nested, so one sweep by
     decreasing min key builds all n bounds in O(n log n)). Then, vectorised with numpy over
     blocks of 64 A's x their candidates B: V_ub(A, k) = min(prefix sum of values, that
     fractional bound), and V_ub - U_k bounds the score of every subset of the prefix (score
     <= V - U always). Columns whose union width alone exceeds the bound are cut. Prefixes
     whose whole weight fits the budget are feasible solutions and seed the best score.
  2. Exact. A's are visited by decreasing bound and the loop stops once the bound is not above
     max(best * approximation_ratio, minimum_improvement). Each survivor runs the incremental
     0-1 knapsack DP over its prefix (one vectorised max over the W+1 capacities per item,
     keeping the per-item "taken" masks), takes the prefix whose V_k penalised by U_k scores
     best and traces that one solution back. With approximation_ratio = 1 the result is
     optimal for the unit-rounded weights (checked against exhaustive search); otherwise its
     score is within the ratio of the optimum, as in Kudu. (The penalty is discontinuous at
     V == U, so the DP's penalised value can be off by 0.3% of the union width; the chosen set
     is always re-scored exactly.)

A compaction is proposed when the best score exceeds `minimum_improvement` (Kudu's test is on
the score, so several tiny disjoint rowsets are merged for the small-rowset bonus even though
that lowers the height by ~0). `pick_rowsets_to_compact` returns the *quality* = the height
reduction of the chosen set (see above), which is therefore ~0 for such merges;
`select_rowsets_to_compact` also returns the score, which is what Kudu's maintenance manager
ranks the op by. Rowsets larger than the budget are never picked (they still shape the CDF),
and a proposal always has at least two inputs.

Complexity, n rowsets, m <= 2n boundary keys, W = budget/unit (256 by default):
CDF O(n log n + n * m) (one numpy slice add per rowset); pass 1 O(n^2) numpy cells, less the
cut columns; pass 2 O(n * W) numpy work plus an O(n) Python trace per surviving A (usually a
handful). Measured: 1-2 ms for 100 rowsets, 10-35 ms for 1000, ~0.2-0.3 s for 3000.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from typing import Sequence

import numpy as np

_KEY_POSITION_BYTES = 64   # bytes of each key (after the global common prefix) that position it
_PASS1_BLOCK_ROWS = 64   # rowsets A per numpy block in pass 1
_MIN_CAPACITY_UNITS = 64   # knapsack granularity bounds (see _weight_unit)
_MAX_CAPACITY_UNITS = 4096


@dataclasses.dataclass(frozen=True)
class RowSetInfo:
    id: int
    size_bytes: int
    min_key: bytes        # encoded primary keys, compared as bytes
    max_key: bytes


@dataclasses.dataclass(frozen=True)
class CompactionPolicyConfig:
    budget_bytes: int = 256 * 2**20            # --tablet_compaction_budget_mb
    target_rowset_bytes: int = 32 * 2**20      # --budgeted_compaction_target_rowset_size
    small_rowset_tradeoff: float = 0.009       # gamma, --compaction_small_rowset_tradeoff
    support_adjust: float = 1.003              # kSupportAdjust
    minimum_improvement: float = 0.01          # --compaction_minimum_improvement
    approximation_ratio: float = 1.05          # --compaction_approximation_ratio
    size_unit_bytes: int = 2**20               # knapsack weight unit (Kudu weighs in MiB)


DEFAULT_CONFIG = CompactionPolicyConfig()


@dataclasses.dataclass(frozen=True)
class CompactionSelection:
    ids: list[int]        # sorted ids of the rowsets to merge; empty = nothing worth doing
    quality: float        # reduction in average height the merge achieves
    score: float          # the objective the policy maximised (see module docstring)


# --------------------------------------------------------------------------------------------
# CDF over the key space, weighted by data size
# --------------------------------------------------------------------------------------------

class _Cdf:
    """Data mass below / within keys, built from a set of rowsets (see "Key positions")."""

    def __init__(self, rowsets: Sequence[RowSetInfo]):
        keys = sorted({k for rs in rowsets for k in (rs.min_key, rs.max_key)})
        self.keys = keys
        m = len(keys)
        prefix = 0
        if m:
            lo, hi = keys[0], keys[-1]   # common prefix of all keys = that of min and max
            n = min(len(lo), len(hi))
            while prefix < n and lo[prefix] == hi[prefix]:
                prefix += 1
        self._prefix = prefix
        pos = [self._position(k) for k in keys]
        self._pos = pos
        index = {k: i for i, k in enumerate(keys)}
        self.lo_idx = np.fromiter((index[rs.min_key] for rs in rowsets), np.int64, len(rowsets))
        self.hi_idx = np.fromiter((index[rs.max_key] for rs in rowsets), np.int64, len(rowsets))
        # elementary interval j = (keys[j], keys[j+1]); lengths as floats (relative precision)
        lengths = np.array([float(pos[j + 1] - pos[j]) for j in range(m - 1)], np.float64)
        cont = np.zeros(max(m - 1, 0), np.float64)     # continuous mass per interval
        atoms = np.zeros(m, np.float64)
        for rs, l, r in zip(rowsets, self.lo_idx.tolist(), self.hi_idx.tolist()):
            size = float(max(rs.size_bytes, 0))
            if size == 0.0:
                continue
            if l == r:
                atoms[l] += size
                continue
            span = pos[r] - pos[l]
            if span > 0:
                cont[l:r] += lengths[l:r] * (size / float(span))
            else:                                       # collapsed positions: spread by rank
                cont[l:r] += size / (r - l)
        self.cont = cont
        cont_cum = np.zeros(m, np.float64)
        if m > 1:
            np.cumsum(cont, out=cont_cum[1:])
        atom_incl = np.cumsum(atoms)
        self.below_incl = cont_cum + atom_incl            # mass in (-inf, keys[j]]
        self.below_excl = cont_cum + atom_incl - atoms    # mass in (-inf, keys[j])
        self.total = float(self.below_incl[-1]) if m else 0.0
        self._cont_cum = cont_cum
        self._atom_incl = atom_incl

    def _position(self, key: bytes) -> int:
        tail = key[self._prefix:self._prefix + _KEY_POSITION_BYTES]
        return int.from_bytes(tail.ljust(_KEY_POSITION_BYTES, b"\x00"), "big")

    def widths(self) -> np.ndarray:
        """Width of each rowset the CDF was built from."""
        if self.total <= 0.0:
            return np.zeros(len(self.lo_idx), np.float64)
        return (self.below_incl[self.hi_idx] - self.below_excl[self.lo_idx]) / self.total

    def range_width(self, lo: int, hi: int) -> float:
        """Width of [keys[lo], keys[hi]] (boundary-key indexes)."""
        if self.total <= 0.0:
            return 0.0
        return float(self.below_incl[hi] - self.below_excl[lo]) / self.total

    def _mass_below(self, key: bytes, inclusive: bool) -> float:
        keys = self.keys
        j = bisect.bisect_left(keys, key)
        if j < len(keys) and keys[j] == key:
            return float(self.below_incl[j] if inclusive else self.below_excl[j])
        if j == 0:
            return 0.0
        if j == len(keys):
            return self.total
        j -= 1                                   # keys[j] < key < keys[j+1]
        width = self._pos[j + 1] - self._pos[j]
        frac = (self._position(key) - self._pos[j]) / width if width > 0 else 0.5
        return float(self._cont_cum[j] + self.cont[j] * frac + self._atom_incl[j])

    def key_range_width(self, min_key: bytes, max_key: bytes) -> float:
        """Width of an arbitrary closed key range under this CDF."""
        if self.total <= 0.0 or max_key < min_key:
            return 0.0
        return (self._mass_below(max_key, True) - self._mass_below(min_key, False)) / self.total


def _validate(rowsets: Sequence[RowSetInfo]) -> None:
    seen = set()
    for rs in rowsets:
        if rs.min_key > rs.max_key:
            raise ValueError(f"rowset {rs.id}: min_key > max_key")
        if rs.id in seen:
            raise ValueError(f"duplicate rowset id {rs.id}")
        seen.add(rs.id)


def average_height(rowsets: Sequence[RowSetInfo],
                   data: Sequence[RowSetInfo] | None = None) -> float:
    """Average height of `rowsets`: sum of their widths, i.e. the expected number of rowsets
    whose range covers the key of a row drawn from the tablet's data.

    `data` gives the rowsets whose sizes define the data distribution (default: `rowsets`).
    Pass the pre-compaction layout to measure a post-compaction layout under the same data
    (a merged rowset's size is not uniform over its union range). 0.0 when there is no data.
    """
    if data is None:
        _validate(rowsets)
        return float(_Cdf(rowsets).widths().sum())
    _validate(data)
    cdf = _Cdf(data)
    return float(sum(cdf.key_range_width(rs.min_key, rs.max_key) for rs in rowsets))


# --------------------------------------------------------------------------------------------
# The policy
# --------------------------------------------------------------------------------------------

def _weight_unit(config: CompactionPolicyConfig) -> int:
    unit = max(1, config.size_unit_bytes)
    budget = config.budget_bytes
    if budget // unit < _MIN_CAPACITY_UNITS:       # tiny budgets (tests): finer units
        unit = max(1, budget // _MIN_CAPACITY_UNITS)
    if budget // unit > _MAX_CAPACITY_UNITS:       # keep the DP table small
        unit = -(-budget // _MAX_CAPACITY_UNITS)
    return unit


def _penalised(v: float, u: float, adjust: float) -> float:
    return v - u if v <= u else v - adjust * u


def select_rowsets_to_compact(rowsets: Sequence[RowSetInfo],
                              config: CompactionPolicyConfig = DEFAULT_CONFIG
                              ) -> CompactionSelection:
    """The full answer: chosen ids, their height reduction and the objective score."""
    _validate(rowsets)
    nothing = CompactionSelection([], 0.0, 0.0)
    if len(rowsets) < 2 or config.budget_bytes <= 0:
        return nothing
    cdf = _Cdf(rowsets)
    if cdf.total <= 0.0:
        return nothing
    width = cdf.widths()
    size = np.array([max(rs.size_bytes, 0) for rs in rowsets], np.float64)
    value = width + config.small_rowset_tradeoff * np.maximum(
        0.0, 1.0 - size / float(config.target_rowset_bytes))
    unit = _weight_unit(config)
    cap = config.budget_bytes // unit
    weight = np.array([max(1, -(-max(rs.size_bytes, 0) // unit)) for rs in rowsets], np.int64)
    eligible = np.flatnonzero((size <= config.budget_bytes) & (weight <= cap))
    if len(eligible) < 2:
        return nothing

    lo_idx, hi_idx = cdf.lo_idx, cdf.hi_idx
    ids = np.array([rs.id for rs in rowsets], np.int64)
    below_incl, below_excl, total = cdf.below_incl, cdf.below_excl, cdf.total
    adjust = config.support_adjust

    def exact(members: Sequence[int]) -> tuple[float, float]:
        """(score, quality) of merging rowsets[members]."""
        mem = np.asarray(members, np.int64)
        u = cdf.range_width(int(lo_idx[mem].min()), int(hi_idx[mem].max()))
        return _penalised(float(value[mem].sum()), u, adjust), float(width[mem].sum()) - u

    # B order: increasing max key (ties: min key, id). A order: increasing min key.
    border = eligible[np.lexsort((ids[eligible], lo_idx[eligible], hi_idx[eligible]))]
    aorder = eligible[np.lexsort((ids[eligible], hi_idx[eligible], lo_idx[eligible]))]
    nb = len(border)
    b_lo = lo_idx[border]
    b_val, b_wt = value[border], weight[border].astype(np.float64)
    b_dens = b_val / b_wt
    b_below_hi = below_incl[hi_idx[border]]
    # Fractional-knapsack bound per A over all of its candidates (B.min >= A.min). The sets
    # are nested, so A's are visited by decreasing min key and items added to Kudu's
    # BoundCalculator: a min-density heap holding just enough items to fill the budget.
    frac_bound = np.empty(len(aorder), np.float64)
    a_lo_sorted = lo_idx[aorder]
    by_lo_desc = np.lexsort((np.arange(nb), -b_lo))
    heap: list[tuple[float, int, float, int]] = []
    cur_w, cur_v, added = 0, 0.0, 0
    for ai in range(len(aorder) - 1, -1, -1):
        while added < nb and b_lo[by_lo_desc[added]] >= a_lo_sorted[ai]:
            j = int(by_lo_desc[added])
            added += 1
            if cur_w >= cap and heap and b_dens[j] <= heap[0][0]:
                continue                              # not denser than what fills the budget
            wj = int(weight[border[j]])
            heapq.heappush(heap, (float(b_dens[j]), j, float(b_val[j]), wj))
            cur_w += wj
            cur_v += float(b_val[j])
            while cur_w - heap[0][3] > cap:           # drop items no longer needed
                _, _, v0, w0 = heapq.heappop(heap)
                cur_w -= w0
                cur_v -= v0
        excess = cur_w - cap
        frac_bound[ai] = cur_v if excess <= 0 else cur_v - excess * heap[0][0]

    best_score = -math.inf
    best_set: list[int] = []
    a_upper = np.full(len(aorder), -math.inf)
    col = np.arange(nb)
    for start in range(0, len(aorder), _PASS1_BLOCK_ROWS):
        stop = min(start + _PASS1_BLOCK_ROWS, len(aorder))
        a = aorder[start:stop]
        a_lo = lo_idx[a]
        fb = frac_bound[start:stop]
        # columns: candidates of some row of the block (b_lo >= the block's smallest min key)
        # whose union width can still be below that row's bound (a suffix in B order fails)
        slack = float(fb.max()) - min(0.0, config.minimum_improvement)
        limit = slack * total + float(below_excl[a_lo.max()])
        cols = col[(b_lo >= a_lo[0]) & (b_below_hi < limit)]
        if len(cols) < 2:
            continue
        mask = b_lo[cols][None, :] >= a_lo[:, None]
        sumv = np.cumsum(np.where(mask, b_val[cols], 0.0), axis=1)
        sumw = np.cumsum(np.where(mask, b_wt[cols], 0.0), axis=1)
        union = (np.maximum(below_incl[hi_idx[a]][:, None], b_below_hi[cols][None, :])
                 - below_excl[a_lo][:, None]) / total
        first = mask.argmax(axis=1)                   # a prefix needs >= 2 candidates
        useful = mask & (np.arange(len(cols))[None, :] > first[:, None])
        upper = np.where(useful, np.minimum(sumv, fb[:, None]) - union, -math.inf)
        a_upper[start:stop] = upper.max(axis=1)
        # whole prefixes that fit the budget are feasible: seed the best solution
        feas = np.where(useful & (sumw <= cap),
                        np.where(sumv <= union, sumv - union, sumv - adjust * union), -math.inf)
        r, c = np.unravel_index(int(np.argmax(feas)), feas.shape)
        if feas[r, c] > best_score:
            members = border[cols[:c + 1][mask[r, :c + 1]]].tolist()
            score, _ = exact(members)
            if score > best_score:
                best_score, best_set = score, members

    # pass 2: exact knapsack for A's whose bound could beat the best by the approximation ratio
    ratio = config.approximation_ratio
    for ai in np.lexsort((np.arange(len(aorder)), -a_upper)).tolist():
        cutoff = max(config.minimum_improvement,
                     best_score * ratio if best_score > 0 else best_score)
        if a_upper[ai] <= cutoff:
            break
        a = int(aorder[ai])
        cand = np.flatnonzero(b_lo >= lo_idx[a])
        c_val, c_wt = b_val[cand], weight[border[cand]]
        sumv = np.cumsum(c_val)
        maxd = np.maximum.accumulate(b_dens[cand])
        union = (np.maximum(below_incl[hi_idx[a]], b_below_hi[cand])
                 - below_excl[lo_idx[a]]) / total
        upper = np.minimum(np.minimum(sumv, maxd * cap), frac_bound[ai]) - union
        upper[:1] = -math.inf
        hot = np.flatnonzero(upper > cutoff)
        if not len(hot):
            continue
        last = int(hot[-1])
        dp = np.zeros(cap + 1, np.float64)        # dp[w] = best value with weight <= w
        keeps: list[np.ndarray] = []
        best_value = np.empty(last + 1, np.float64)  # dp[cap] after each prefix
        for k in range(last + 1):
            wt = int(c_wt[k])
            with_item = dp[:cap + 1 - wt] + c_val[k]
            keeps.append(with_item > dp[wt:])
            np.maximum(dp[wt:], with_item, out=dp[wt:])
            best_value[k] = dp[cap]
        u = union[:last + 1]
        est = np.where(best_value <= u, best_value - u, best_value - adjust * u)
        est[upper[:last + 1] <= cutoff] = -math.inf
        k = int(np.argmax(est))
        if est[k] <= best_score:
            continue
        chosen, w = [], cap                          # trace prefix k's optimum back
        for j in range(k, -1, -1):
            wj = int(c_wt[j])
            if w >= wj and keeps[j][w - wj]:
                chosen.append(int(border[cand[j]]))
                w -= wj
        if len(chosen) >= 2:
            score, _ = exact(chosen)
            if score > best_score:
                best_score, best_set = score, chosen

    if not best_set or best_score <= config.minimum_improvement:
        return nothing
    score, quality = exact(best_set)
    return CompactionSelection(sorted(int(ids[i]) for i in best_set), quality, score)


def pick_rowsets_to_compact(rowsets: Sequence[RowSetInfo],
                            config: CompactionPolicyConfig = DEFAULT_CONFIG
                            ) -> tuple[list[int], float]:
    """ids of the rowsets to merge (empty when nothing is worth it) and the quality score
    (reduction in average height). A merge is proposed when its objective score exceeds
    `minimum_improvement`; see `select_rowsets_to_compact` for the score itself."""
    sel = select_rowsets_to_compact(rowsets, config)
    return sel.ids, sel.quality
