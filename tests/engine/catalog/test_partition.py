"""PartitionSchema: validation, range canonicalisation, ADD/DROP RANGE, row assignment
against a brute-force model, and pruning never dropping a partition with a match."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import errors
from engine.catalog.partition import (
    HashBucketSchema,
    PartitionSchema,
    RangePartition,
    RangePartitionExists,
    RangeSpec,
    bucket_hash,
    bucket_hashes,
)
from engine.key_encoding import encode_key, encode_keys
from engine.schema import ColumnSchema, Schema
from engine.tablet.scan_spec import ColumnPredicate as P
from engine.types import DataType as T

H = HashBucketSchema


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


SCHEMA = Schema([C("k1", T.INT16), C("k2", T.STRING), C("k3", T.INT8), C("v", T.INT32)],
                key=["k1", "k2", "k3"])


def ps_of(hash_schemas=(), range_cols=None, ranges=None, schema=SCHEMA):
    return PartitionSchema.create(schema, hash_schemas, range_cols, ranges)


# -- validation -------------------------------------------------------------------------------

def test_partition_columns_must_be_key_columns():
    with pytest.raises(errors.InvalidArgument) as e:
        ps_of([H(("v",), 3)])
    assert str(e.value) == ("Column 'v' in 'HASH (v) PARTITIONS 3' is not a key column. Only "
                            "key columns can be used in PARTITION BY.")
    assert e.value.sqlstate == "22023"
    with pytest.raises(errors.InvalidArgument, match=r"Column 'v' in 'RANGE \(v\)' is not a key"):
        ps_of(range_cols=["v"])
    with pytest.raises(errors.InvalidArgument, match="Column 'nope' in 'HASH"):
        ps_of([H(("nope",), 2)])


def test_hash_level_rules():
    with pytest.raises(errors.InvalidArgument, match="must have at least two hash buckets"):
        ps_of([H(("k1",), 1)])
    with pytest.raises(errors.InvalidArgument,
                       match="hash bucket schema components must not contain columns in common"):
        ps_of([H(("k1",), 2), H(("k1", "k2"), 2)])
    with pytest.raises(errors.InvalidArgument, match="duplicate column in hash partition"):
        ps_of([H(("k1", "k1"), 2)])
    with pytest.raises(errors.InvalidArgument, match="duplicate column in range partition"):
        ps_of(range_cols=["k1", "k1"])
    # HASH(a), HASH(b) and HASH(a, b) are fine; columns are sorted into key order
    assert ps_of([H(("k3", "k1"), 2)]).hash_schemas[0].columns == ("k1", "k3")
    assert len(ps_of([H(("k1",), 2), H(("k2",), 3)]).partitions) == 6
    # HASH PARTITIONS n (no columns) hashes every key column
    assert ps_of([H((), 4)]).hash_schemas[0].columns == ("k1", "k2", "k3")


def test_unpartitioned_and_default_range():
    ps = ps_of()
    assert len(ps.partitions) == 1 and str(ps) == "UNPARTITIONED"
    p = ps.partitions[0]
    assert (p.partition_key_start, p.partition_key_end) == (b"", b"")
    ps = ps_of(range_cols=["k1"])  # range columns but no bounds: one unbounded range
    assert [str(r) for r in ps.range_partitions] == ["UNBOUNDED"]
    assert len(ps_of(range_cols=["k1"], ranges=[]).partitions) == 0


def test_range_canonicalisation():
    ps = ps_of(range_cols=["k1"], ranges=[
        RangeSpec(10, 30, lower_inclusive=False, upper_inclusive=True),  # 10 < VALUES <= 30
        RangeSpec.value(40), RangeSpec(None, -5), RangeSpec(100, None), (50, 60)])
    assert [(r.lower, r.upper) for r in ps.range_partitions] == [
        (None, (-5,)), ((11,), (31,)), ((40,), (41,)), ((50,), (60,)), ((100,), None)]
    assert [str(r) for r in ps.range_partitions] == [
        "VALUES < -5", "11 <= VALUES < 31", "VALUE = 40", "50 <= VALUES < 60", "100 <= VALUES"]
    # strings: VALUE = 'a' is ['a', 'a\0'); an exclusive lower 'a' becomes 'a\0'
    ps = ps_of(range_cols=["k2"], ranges=[RangeSpec.value("a"), RangeSpec("b", "c", False)])
    assert [(r.lower, r.upper) for r in ps.range_partitions] == [
        (("a",), ("a\x00",)), (("b\x00",), ("c",))]
    assert str(ps.range_partitions[0]) == 'VALUE = "a"'


def test_increment_carries_and_maximum_values():
    ps = ps_of(range_cols=["k3", "k1"], ranges=[
        RangeSpec((1, 32767), (2, 5), lower_inclusive=False),  # carry: (1, max) -> (2, min)
        RangeSpec((5, 0), (127, 32767), upper_inclusive=True)])  # no successor: unbounded
    assert ps.range_partitions[0].lower == (2, -32768)
    assert ps.range_partitions[1].upper is None
    assert str(ps.range_partitions[0]) == "(2, -32768) <= VALUES < (2, 5)"
    with pytest.raises(errors.InvalidArgument,
                       match="Exclusive lower bound range partition key must not have maximum"):
        ps_of(range_cols=["k3"], ranges=[RangeSpec(127, None, lower_inclusive=False)])


def test_range_bound_errors():
    with pytest.raises(errors.InvalidArgument,
                       match="lower bound must be less than the upper bound: 5 <= VALUES < 5"):
        ps_of(range_cols=["k1"], ranges=[(5, 5)])
    with pytest.raises(errors.InvalidArgument, match=r"overlapping range partitions: first range "
                       r"partition: 0 <= VALUES < 10, second range partition: 5 <= VALUES < 20"):
        ps_of(range_cols=["k1"], ranges=[(5, 20), (0, 10)])
    with pytest.raises(errors.InvalidArgument, match=r"different than the number of partitioning "
                       r"columns: \(1 vs 2\)"):
        ps_of(range_cols=["k1", "k2"], ranges=[(1, 2)])
    with pytest.raises(errors.InvalidArgument, match="cannot be NULL"):
        ps_of(range_cols=["k1", "k2"], ranges=[((1, None), None)])
    with pytest.raises(errors.InvalidArgument, match=r"Range partition value 1.5 is not type "
                       r"compatible with partitioning column 'k1' \(type: INT16\)"):
        ps_of(range_cols=["k1"], ranges=[(1.5, 3)])
    with pytest.raises(errors.InvalidArgument, match="not type compatible"):
        ps_of(range_cols=["k3"], ranges=[(0, 1000)])  # out of INT8
    dec = Schema([C("d", T.DECIMAL, precision=9, scale=2)], key=["d"])
    with pytest.raises(errors.InvalidArgument, match="not type compatible"):
        ps_of(range_cols=["d"], ranges=[(decimal.Decimal("1.234"), None)], schema=dec)
    ps = ps_of(range_cols=["d"], ranges=[RangeSpec.value(decimal.Decimal("1.5"))], schema=dec)
    assert ps.range_partitions[0] == RangePartition((decimal.Decimal("1.50"),),
                                                    (decimal.Decimal("1.51"),))


def test_add_and_drop_range_partition():
    ps = ps_of([H(("k2",), 2)], ["k1"], [(0, 10), (20, 30)])
    assert len(ps.partitions) == 4
    ps2 = ps.add_range_partition(RangeSpec(10, 20))
    assert [str(r) for r in ps2.range_partitions] == [
        "0 <= VALUES < 10", "10 <= VALUES < 20", "20 <= VALUES < 30"]
    assert len(ps2.partitions) == 6 and len(ps.partitions) == 4  # immutable
    with pytest.raises(errors.InvalidArgument) as e:
        ps.add_range_partition(RangeSpec(5, 15))
    assert str(e.value) == "new range partition conflicts with existing one: 0 <= VALUES < 10"
    with pytest.raises(errors.InvalidArgument, match="conflicts with existing one: 20 <= VALUES"):
        ps.add_range_partition(RangeSpec(15, None))
    with pytest.raises(RangePartitionExists, match="range partition already exists"):
        ps.add_range_partition(RangeSpec(19, 29, False, True))  # canonically [20, 30)
    assert RangePartitionExists.sqlstate == "42710"
    ps3 = ps2.drop_range_partition(RangeSpec(0, 9, upper_inclusive=True))
    assert [str(r) for r in ps3.range_partitions] == ["10 <= VALUES < 20", "20 <= VALUES < 30"]
    with pytest.raises(errors.InvalidArgument, match="no range partition to drop: 0 <= VALUES < 5"):
        ps.drop_range_partition(RangeSpec(0, 5))
    with pytest.raises(errors.InvalidArgument, match="no RANGE partitioning columns"):
        ps_of([H(("k1",), 2)]).add_range_partition(RangeSpec(0, 1))


def test_partitions_order_and_keys():
    ps = ps_of([H(("k1",), 2), H(("k2",), 3)], ["k3"], [(None, 0), (0, 10), (10, None)])
    parts = ps.partitions
    assert len(parts) == 18
    assert [p.hash_buckets for p in parts[:4]] == [(0, 0), (0, 0), (0, 0), (0, 1)]
    for p in parts:
        assert ps.partition_index(p.hash_buckets, ps.range_partitions.index(p.range)) == p.index
    # Kudu widens unbounded ends over neighbouring buckets: the partitions tile the key space
    assert parts[0].partition_key_start == b""
    assert parts[-1].partition_key_end == b""
    for a, b in zip(parts, parts[1:]):
        assert a.partition_key_end == b.partition_key_start
    assert parts[2].partition_key_end == b"\x00\x00\x00\x00\x00\x00\x00\x01"
    assert parts[5].partition_key_end == b"\x00\x00\x00\x00\x00\x00\x00\x02"
    assert parts[8].partition_key_end == b"\x00\x00\x00\x01"  # carried into level 0


def test_hash_is_stable():
    """Buckets are persisted: these values must never change."""
    s = Schema([C("a", T.INT64), C("b", T.STRING)], key=["a", "b"])
    enc = encode_keys([pa.array([0, 1, -1, 42, 2 ** 40], pa.int64()),
                       pa.array([b"", b"x", b"a\x00b", b"hello", b"\xc3\xa9"])], s.key_columns)
    assert bucket_hashes(enc, 0).tolist() == [
        4861311895701932152, 18226676442274398511, 9011862444445271235, 16599376601004246443,
        12137380763868138636]
    assert bucket_hashes(enc, 7).tolist() == [
        11670017013400811468, 18275057576094545360, 12950974797920364490, 14319220787926035989,
        5390280491954744402]
    for i, key in enumerate([(0, ""), (1, "x"), (-1, "a\x00b"), (42, "hello"), (2 ** 40, "é")]):
        e = encode_key(key, s.key_columns)
        assert bucket_hash(e, 0) == bucket_hashes(enc, 0)[i]
        assert bucket_hash(e, 7) == bucket_hashes(enc, 7)[i]


def test_persistence_round_trip_and_rename():
    s = Schema([C("d", T.DATE), C("ts", T.TIMESTAMP), C("b", T.BINARY),
                C("dec", T.DECIMAL, precision=20, scale=3), C("s", T.VARCHAR, length=4)],
               key=["d", "ts", "b", "dec", "s"])
    ps = PartitionSchema.create(s, [H(("b", "s"), 3, seed=9)], ["d", "ts", "dec"], [
        RangeSpec((dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 12), decimal.Decimal("1.5")),
                  (dt.date(2021, 1, 1), dt.datetime(2020, 1, 1), 7), upper_inclusive=True),
        RangeSpec.value((dt.date(1969, 12, 31), dt.datetime(1900, 1, 1), -2))])
    d = ps.to_dict()
    import json
    assert PartitionSchema.from_dict(json.loads(json.dumps(d)), s) == ps
    s2 = s.rename_column("s", "s2")
    ps2 = ps.renamed("s", "s2", s2)
    assert ps2.hash_schemas[0].columns == ("b", "s2")
    key = {"d": dt.date(2020, 6, 1), "ts": dt.datetime(2000, 1, 1), "b": b"\x00x",
           "dec": decimal.Decimal("3.25"), "s": "abcd"}
    k2 = dict(key, s2=key.pop("s"))
    assert ps.partition_index_for_key({**key, "s": "abcd"}) == ps2.partition_index_for_key(k2)


# -- assignment against a brute-force model ------------------------------------------------------

STRS = ["", "a", "a\x00", "ab", "b", "\u00e9", "zz"]
K1 = st.integers(-32768, 32767) | st.sampled_from([-32768, -1, 0, 1, 5, 32767])
K3 = st.integers(-128, 127) | st.sampled_from([-128, 0, 127])
KEY = st.tuples(K1, st.sampled_from(STRS), K3)
HASH_CHOICES = [(), (H(("k1",), 3),), (H(("k2", "k3"), 4, seed=5),),
                (H(("k1",), 2), H(("k2",), 3)), (H((), 5),),
                # over the whole key in key order (route_key's encoding is the key's), and
                # over the whole key in another order (it is not)
                (H(("k1", "k2", "k3"), 4, seed=7),),
                (H(("k3", "k2", "k1"), 3),)]
RANGE_CHOICES = [(), ("k1",), ("k2",), ("k3", "k1"), ("k1", "k2"), ("k1", "k2", "k3")]


def _value_strategy(col):
    return {"k1": K1, "k2": st.sampled_from(STRS), "k3": K3}[col]


@st.composite
def partition_schemas(draw):
    hs = draw(st.sampled_from(HASH_CHOICES))
    rc = draw(st.sampled_from(RANGE_CHOICES))
    if not rc:
        return ps_of(hs, rc)
    bounds = draw(st.lists(st.tuples(*[_value_strategy(c) for c in rc]), min_size=0,
                           max_size=8, unique=True))
    bounds.sort()
    pts = [None] + bounds + [None]
    ranges = []
    for lo, hi in zip(pts, pts[1:]):
        if lo is None and hi is None and bounds:
            continue
        if draw(st.booleans()):  # leave some gaps: non-covering ranges
            ranges.append((lo, hi))
    return ps_of(hs, rc, ranges)


def _model_partition(ps: PartitionSchema, key: tuple) -> int:
    """Brute force: scalar hash per level, ranges by Python tuple comparison, linear search."""
    row = dict(zip(["k1", "k2", "k3"], key))
    buckets = []
    for hs in ps.hash_schemas:
        cols = [SCHEMA.column(c) for c in hs.columns]
        e = encode_key([row[c] for c in hs.columns], cols)
        buckets.append(bucket_hash(e, hs.seed) % hs.num_buckets)
    rk = tuple(row[c] for c in ps.range_schema.columns)
    for ri, r in enumerate(ps.range_partitions):
        if (r.lower is None or r.lower <= rk) and (r.upper is None or rk < r.upper):
            return ps.partition_index(buckets, ri)
    return -1


def _rows_table(keys):
    return pa.table({"k1": pa.array([k[0] for k in keys], pa.int16()),
                     "k2": pa.array([k[1] for k in keys], pa.string()),
                     "k3": pa.array([k[2] for k in keys], pa.int8())})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partition_schemas(), st.lists(KEY, min_size=1, max_size=60))
def test_assignment_matches_model(ps, keys):
    t = _rows_table(keys)
    phys, bad = ps.physical_columns(t)
    assert not bad
    got = ps.partition_indexes(phys, t.num_rows)
    want = [_model_partition(ps, k) for k in keys]
    assert got.tolist() == want
    for k, p in zip(keys, want):
        row = dict(zip(["k1", "k2", "k3"], k))
        assert ps.partition_index_for_key(row) == p
        # the compiled point router (Table.lookup, small writes): values in key order
        assert ps.partition_index_for_key_values(
            tuple(row[c.name] for c in ps.key_columns)) == p
        # the router's by-product: the whole key's encoding when a level is over the whole
        # key in key order (Tablet.lookup takes it instead of encoding the key again)
        idx, enc = ps.route_key(tuple(row[c.name] for c in ps.key_columns))
        assert idx == p
        whole = [c.name for c in ps.key_columns]
        if any(list(hs.columns) == whole for hs in ps.hash_schemas) or \
                list(ps.range_schema.columns) == whole:
            assert enc == encode_key(k, ps.key_columns)
        else:
            assert enc is None
        if p >= 0:
            part = ps.partitions[p]
            pk = ps.partition_key_for(row)
            assert part.partition_key_start <= pk
            assert part.partition_key_end == b"" or pk < part.partition_key_end


def _pred_strategy():
    col = st.sampled_from(["k1", "k2", "k3", "v"])

    @st.composite
    def pred(draw):
        c = draw(col)
        vals = {"k1": K1 | st.sampled_from([40000, -40000, 2.5]),
                "k3": K3 | st.sampled_from([200, -1.5, 3.0]),
                "k2": st.sampled_from(STRS + ["a\x00\x00", "b\x00"]),
                "v": st.integers(-5, 5)}[c]
        kind = draw(st.sampled_from(["eq", "range", "in", "not_null"]))
        if kind == "eq":
            return P.equal(c, draw(vals))
        if kind == "in":
            return P.in_list(c, draw(st.lists(vals, min_size=0, max_size=4)))
        if kind == "not_null":
            return P.is_not_null(c)
        lo, hi = draw(st.none() | vals), draw(st.none() | vals)
        return P.range(c, lo, hi, draw(st.booleans()), draw(st.booleans()))
    return pred()


def _matches(p, row) -> bool:
    v = row[p.column]
    if p.kind == "is_not_null":
        return True
    if p.kind == "in":
        return any(v == x for x in p.values)
    if p.lower is not None and not (v >= p.lower if p.lower_inclusive else v > p.lower):
        return False
    if p.upper is not None and not (v <= p.upper if p.upper_inclusive else v < p.upper):
        return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partition_schemas(), st.lists(KEY, min_size=1, max_size=40),
       st.lists(_pred_strategy(), min_size=1, max_size=3))
def test_pruning_never_drops_a_matching_partition(ps, keys, preds):
    kept = set(ps.prune(preds))
    assert kept <= set(range(len(ps.partitions)))
    for k in keys:
        row = dict(zip(["k1", "k2", "k3"], k), v=0)
        if all(_matches(p, row) for p in preds):
            p = _model_partition(ps, k)
            if p >= 0:
                assert p in kept, (k, [str(x) for x in preds])


def test_pruning_examples():
    ps = ps_of([H(("k2",), 4)], ["k1"], [(0, 10), (10, 20), (20, 30)])
    every = list(range(12))
    assert ps.prune([]) == every
    eq = ps.prune([P.equal("k2", "a")])
    assert len(eq) == 3 and len({ps.partitions[i].hash_buckets for i in eq}) == 1
    assert [ps.partitions[i].range.lower for i in ps.prune([P.range("k1", 12, 25)])][:2] == [
        (10,), (20,)]
    assert len(ps.prune([P.range("k1", 12, 25)])) == 8
    assert len(ps.prune([P.equal("k2", "a"), P.equal("k1", 15)])) == 1
    assert len(ps.prune([P.in_list("k2", ["a", "b", "zz"]), P.less("k1", 10)])) <= 3
    assert ps.prune([P.equal("k1", 15), P.equal("k1", 16)]) == []  # contradiction
    assert ps.prune([P.is_null("k1")]) == []  # key columns are NOT NULL
    assert ps.prune([P.equal("k1", 99)]) == []  # no range covers it
    assert ps.prune([P.equal("v", 3)]) == every  # not a key column
    assert ps.prune([P.range("k1", 9.5, 10.5)]) == ps.prune([P.equal("k1", 10)])


def test_physical_columns_report_bad_keys():
    ps = ps_of([H(("k1",), 2)], ["k3"], [(None, None)])
    t = pa.table({"k1": pa.array([1, None, 3], pa.int64()), "k2": ["a", "b", "c"],
                  "k3": pa.array([1, 2, 300], pa.int64())})
    phys, bad = ps.physical_columns(t)
    assert sorted(bad) == [1, 2]
    assert bad[1][0] == "NOT_NULL" and 'column "k1"' in bad[1][1]
    assert bad[2][0] == "INVALID" and "k3" in bad[2][1]


def test_varchar_key_routed_by_truncated_value():
    s = Schema([C("s", T.VARCHAR, length=3)], key=["s"])
    ps = PartitionSchema.create(s, [H(("s",), 7)], ["s"], [(None, "abd")])
    phys, bad = ps.physical_columns(pa.table({"s": ["abcdef", "abc"]}))
    idx = ps.partition_indexes(phys, 2)
    assert not bad and idx[0] == idx[1] >= 0  # 'abcdef' is stored (and routed) as 'abc'
