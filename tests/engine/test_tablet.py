"""The Tablet API (docs/engine-api.md): writes, per-row errors, scans, lookups, diff scans,
persistence.

Scans are checked against a Python model over a schema holding every column type, in every
storage state a row can be in: MemRowSet only; flushed to several DiskRowSets; mutated in
DeltaMemStores with new rows in a fresh MemRowSet; DeltaMemStores flushed to REDO files.
Small pages (page_rows=8) and small rowsets make every scan cross page and rowset borders.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random

import numpy as np
import pyarrow as pa
import pytest

from engine import errors
from engine.clock import HybridClock, LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate, OpType, ScanStats, Tablet, TabletConfig
from engine.types import DataType

P = ColumnPredicate
SMALL = TabletConfig(page_rows=8, drs_target_bytes=4096, fsync=False)


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


def _dec(u, s):
    return decimal.Decimal(f"{u}E-{s}")


def all_types_schema() -> Schema:
    return Schema([
        C("k1", DataType.STRING), C("k2", DataType.INT32),
        C("i8", DataType.INT8), C("i16", DataType.INT16), C("i32", DataType.INT32),
        C("i64", DataType.INT64), C("f", DataType.FLOAT), C("d", DataType.DOUBLE),
        C("b", DataType.BOOL), C("dec9", DataType.DECIMAL, precision=9, scale=2),
        C("dec18", DataType.DECIMAL, precision=18, scale=4),
        C("dec38", DataType.DECIMAL, precision=38, scale=6),
        C("s", DataType.STRING), C("vc", DataType.VARCHAR, length=5), C("bin", DataType.BINARY),
        C("dt", DataType.DATE), C("ts", DataType.TIMESTAMP),
    ], key=["k1", "k2"])


K1 = ["", "a", "a\x00", "ab", "b", "\u00e9", "\u4e2d"]
STRS = ["", "a", "a\x00b", "zz", "\u00e9\u20ac", "x" * 9, "\U0001f600!", "abcdefgh"]


def rand_value(rng: random.Random, name: str):
    if rng.random() < 0.15:
        return None
    match name:
        case "i8":
            return rng.choice([-128, 127, 0, rng.randint(-128, 127)])
        case "i16":
            return rng.randint(-2 ** 15, 2 ** 15 - 1)
        case "i32":
            return rng.choice([-2 ** 31, 2 ** 31 - 1, rng.randint(-100, 100)])
        case "i64":
            return rng.choice([-2 ** 63, 2 ** 63 - 1, rng.randint(-10 ** 12, 10 ** 12)])
        case "f":
            return rng.randint(-40, 40) / 4  # exactly representable in float32
        case "d":
            return rng.randint(-10 ** 6, 10 ** 6) / 1024
        case "b":
            return rng.random() < 0.5
        case "dec9":
            return _dec(rng.choice([10 ** 9 - 1, -(10 ** 9 - 1), rng.randint(-999, 999)]), 2)
        case "dec18":
            return _dec(rng.choice([10 ** 18 - 1, -(10 ** 18 - 1), rng.randint(-10 ** 9, 10 ** 9)]),
                        4)
        case "dec38":
            return _dec(rng.choice([10 ** 38 - 1, -(10 ** 38 - 1), rng.randint(-10 ** 30, 10 ** 30),
                                    rng.randint(-50, 50)]), 6)
        case "s" | "vc":
            return rng.choice(STRS)
        case "bin":
            return rng.choice([b"", b"\x00", b"\xff\x00", b"ab", bytes([rng.randint(0, 255)])])
        case "dt":
            return rng.choice([dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(1, 1, 1),
                               dt.date(2024, 2, 29), dt.date(9999, 12, 31)])
        case "ts":
            return rng.choice([dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                               dt.datetime(1970, 1, 1), dt.datetime(2024, 5, 6, 7, 8, 9, 10),
                               dt.datetime(1, 1, 1)])
    raise AssertionError(name)


def stored(name: str, v):
    """The value a scan returns for an input value (VARCHAR(5) truncates)."""
    if name == "vc" and v is not None:
        return v[:5]
    return v


class Model:
    """key tuple -> row dict, plus the state after every op (for time travel)."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.rows: dict[tuple, dict] = {}
        self.history: list[tuple[int, dict]] = []
        self.touched: dict[int, set] = {}  # op timestamp -> keys it changed

    def key(self, row):
        return tuple(row[k] for k in self.schema.key_names)

    def commit(self, ts, keys):
        self.touched[ts] = set(keys)
        self.history.append((ts, {k: dict(v) for k, v in self.rows.items()}))

    def at(self, ts):
        state = {}
        for t, s in self.history:
            if t <= ts:
                state = s
        return state


def table_of(schema: Schema, rows: list[dict], names: list[str] | None = None) -> pa.Table:
    names = names or schema.names
    return pa.table({n: pa.array([r.get(n) for r in rows], type=schema.column(n).arrow_type)
                     for n in names})


def sort_rows(rows, schema):
    return sorted(rows, key=lambda r: tuple(r[k] for k in schema.key_names))


def scan_rows(t: Tablet, **kw):
    return sort_rows(t.scan_table(**kw).to_pylist(), t.schema)


# -- predicate brute force ---------------------------------------------------------------------


def matches(p: ColumnPredicate, v) -> bool:
    if p.kind == "is_null":
        return v is None
    if p.kind == "is_not_null":
        return v is not None
    if v is None:
        return False
    if p.kind == "in":
        return v in p.values
    if p.lower is not None and (v < p.lower or (v == p.lower and not p.lower_inclusive)):
        return False
    if p.upper is not None and (v > p.upper or (v == p.upper and not p.upper_inclusive)):
        return False
    return True


def predicates_for(rng: random.Random, name: str, values: list) -> list[ColumnPredicate]:
    vals = [v for v in values if v is not None]
    if not vals:
        return [P.is_null(name), P.is_not_null(name)]
    a, b = sorted([rng.choice(vals), rng.choice(vals)])
    lo, hi = min(vals), max(vals)
    return [
        P.equal(name, a), P.less(name, b), P.less_equal(name, b), P.greater(name, a),
        P.greater_equal(name, a), P.range(name, a, b), P.range(name, a, b, False, True),
        P.range(name, lo, hi, True, True), P.equal(name, lo), P.greater(name, hi),
        P.in_list(name, [a, b, None]), P.in_list(name, []), P.is_null(name),
        P.is_not_null(name),
    ]


# -- the shared all-types fixture --------------------------------------------------------------


def _random_row(rng, key):
    row = {"k1": key[0], "k2": key[1]}
    for c in all_types_schema().columns[2:]:
        row[c.name] = rand_value(rng, c.name)
    return row


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    """(tablet, model, label) in the four storage states; built once for the module."""
    rng = random.Random(1234)
    schema = all_types_schema()
    t = Tablet.create(str(tmp_path_factory.mktemp("all")), schema, SMALL, LogicalClock())
    m = Model(schema)
    keys = list({(rng.choice(K1), rng.randint(-3, 60)) for _ in range(140)})
    rng.shuffle(keys)
    out = []

    def insert(rows):
        r = t.insert(table_of(schema, rows))
        assert r.row_errors == [] and r.num_applied == len(rows)
        for row in rows:
            m.rows[m.key(row)] = {n: stored(n, v) for n, v in row.items()}
        m.commit(r.timestamp, [m.key(row) for row in rows])

    def snapshot(label):
        out.append((label, {k: dict(v) for k, v in m.rows.items()}, list(m.history)))

    for i in range(0, 100, 25):
        insert([_random_row(rng, k) for k in keys[i:i + 25]])
    snapshot("mrs")
    t.flush_mrs()
    assert t.num_rowsets() >= 3
    snapshot("flushed")
    # updates of a few columns, deletes and reinserts of flushed rows, new rows in the MRS
    live = sorted(m.rows)
    upd = rng.sample(live, 30)
    cols = ["i8", "dec38", "vc", "ts", "f"]
    rows = [{"k1": k[0], "k2": k[1], **{c: rand_value(rng, c) for c in cols}} for k in upd]
    r = t.update(table_of(schema, rows, ["k1", "k2"] + cols))
    assert r.row_errors == []
    for row in rows:
        m.rows[m.key(row)].update({c: stored(c, row[c]) for c in cols})
    m.commit(r.timestamp, upd)
    dels = rng.sample(live, 15)
    r = t.delete(table_of(schema, [{"k1": k[0], "k2": k[1]} for k in dels], ["k1", "k2"]))
    assert r.row_errors == [] and r.num_applied == 15
    for k in dels:
        del m.rows[k]
    m.commit(r.timestamp, dels)
    insert([_random_row(rng, k) for k in dels[:6]] + [_random_row(rng, k) for k in keys[100:]])
    snapshot("dms+mrs")
    assert t.flush_dms() > 0
    snapshot("redo files")
    t.flush_mrs()
    rows = [{"k1": k[0], "k2": k[1], "s": rand_value(rng, "s"), "i64": rand_value(rng, "i64")}
            for k in rng.sample(sorted(m.rows), 20)]
    r = t.update(table_of(schema, rows, ["k1", "k2", "s", "i64"]))
    assert r.row_errors == []
    for row in rows:
        m.rows[m.key(row)].update({"s": row["s"], "i64": row["i64"]})
    m.commit(r.timestamp, [m.key(row) for row in rows])
    snapshot("all flushed + dms")
    return t, m, out


STATE_LABELS = ["mrs", "flushed", "dms+mrs", "redo files", "all flushed + dms"]


def _state(states, label):
    t, m, out = states
    for lab, rows, hist in out:
        if lab == label:
            return t, rows, hist
    raise KeyError(label)


def _current(states, label):
    """Only the last state is the tablet's current one; earlier ones are read by time travel."""
    t, rows, hist = _state(states, label)
    return t, rows, (None if label == STATE_LABELS[-1] else hist[-1][0])


@pytest.mark.parametrize("label", STATE_LABELS)
def test_full_scan_every_state(states, label):
    t, rows, snap = _current(states, label)
    got = scan_rows(t, snapshot=snap)
    assert got == sort_rows(rows.values(), t.schema)
    assert t.count_rows(snapshot=snap) == len(rows)


@pytest.mark.parametrize("label", STATE_LABELS)
def test_every_predicate_kind_on_every_type(states, label):
    """Each (column, predicate kind) pair runs in at least one storage state (the kinds rotate
    over the states to keep the test fast); lazy=False is compared on a third of them (the
    full lazy/non-lazy comparison is test_conjunctions_and_projection)."""
    t, rows, snap = _current(states, label)
    rng = random.Random(label)
    all_rows = list(rows.values())
    si = STATE_LABELS.index(label)
    for ci, c in enumerate(t.schema.columns):
        preds = predicates_for(rng, c.name, [r[c.name] for r in all_rows])
        picked = [preds[(si * 3 + ci + j) % len(preds)] for j in range(3)]
        other = t.schema.columns[(ci + 5) % len(t.schema.columns)].name
        proj = list(dict.fromkeys(["k1", "k2", c.name, other]))
        for j, p in enumerate(picked):
            want = sort_rows([{n: r[n] for n in proj} for r in all_rows
                              if matches(p, r[c.name])], t.schema)
            for lazy in ((True, False) if j == 0 and label != "mrs" else (True,)):
                got = scan_rows(t, columns=proj, predicates=[p], snapshot=snap, lazy=lazy)
                assert got == want, (str(p), lazy)


@pytest.mark.parametrize("label", ["mrs", "dms+mrs", "all flushed + dms"])
def test_conjunctions_and_projection(states, label):
    t, rows, snap = _current(states, label)
    rng = random.Random(7)
    all_rows = list(rows.values())
    names = [c.name for c in t.schema.columns]
    for _ in range(25):
        cols = rng.sample(names, 3)
        preds = []
        for c in cols[:2]:
            preds.append(rng.choice(predicates_for(rng, c, [r[c] for r in all_rows])))
        proj = rng.sample(names, rng.randint(1, 4))
        want = [r for r in all_rows if all(matches(p, r[p.column]) for p in preds)]
        for lazy in (True, False):
            tbl = t.scan_table(columns=proj, predicates=preds, snapshot=snap, lazy=lazy)
            assert tbl.schema.names == proj
            assert tbl.schema == t.schema.arrow_schema(proj)
            got = sorted(map(repr, tbl.to_pylist()))
            assert got == sorted(repr({c: r[c] for c in proj}) for r in want)


def test_projection_order_and_count_only(states):
    t, rows, _ = _current(states, STATE_LABELS[-1])
    tbl = t.scan_table(columns=["ts", "k2", "dec38", "k1"])
    assert tbl.schema.names == ["ts", "k2", "dec38", "k1"]
    assert tbl.schema.field("ts").type == pa.timestamp("us")
    assert tbl.schema.field("dec38").type == pa.decimal128(38, 6)
    assert tbl.num_rows == len(rows)
    assert sum(b.num_rows for b in t.scan(columns=[])) == len(rows)
    batches = list(t.scan(columns=["k1"]))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    with pytest.raises(errors.ColumnNotFound):
        t.scan_table(columns=["k1", "nope"])
    with pytest.raises(errors.ColumnNotFound):
        t.scan_table(predicates=[P.equal("nope", 1)])


@pytest.mark.parametrize("label", STATE_LABELS)
def test_key_bounds(states, label):
    t, rows, snap = _current(states, label)
    keys = sorted(rows)
    rng = random.Random(label + "kb")
    bounds = [None] + [(k1,) for k1 in K1 + ["a\x00\x00", "zz"]] + rng.sample(keys, 6) + [
        ("a", 5), ("", -100), ("\u4e2d", 10 ** 6)]
    for _ in range(40):
        lo, hi = rng.choice(bounds), rng.choice(bounds)
        want = [r for r in sort_rows(rows.values(), t.schema)
                if (lo is None or (r["k1"], r["k2"])[:len(lo)] >= lo)
                and (hi is None or (r["k1"], r["k2"])[:len(hi)] < hi)]
        got = scan_rows(t, lower_key=lo, upper_key=hi, snapshot=snap)
        assert got == want, (lo, hi)


@pytest.mark.parametrize("label", ["mrs", "all flushed + dms"])
def test_key_column_predicates_narrow_correctly(states, label):
    t, rows, snap = _current(states, label)
    all_rows = list(rows.values())
    cases = [
        [P.equal("k1", "a")], [P.equal("k1", "a"), P.range("k2", 3, 20)],
        [P.equal("k1", "a\x00"), P.greater("k2", 10)], [P.in_list("k1", ["", "b", "zz"])],
        [P.equal("k1", "ab"), P.in_list("k2", [1, 2, 3, 40])], [P.less("k1", "a")],
        [P.greater_equal("k1", "a\x00")], [P.equal("k2", 5)],
        [P.equal("k1", "b"), P.equal("k2", 7)], [P.range("k1", "a", "b", False, True)],
        [P.equal("k1", "\u4e2d"), P.less_equal("k2", -1)],
    ]
    for preds in cases:
        want = sort_rows([r for r in all_rows if all(matches(p, r[p.column]) for p in preds)],
                         t.schema)
        assert scan_rows(t, predicates=preds, snapshot=snap) == want, [str(p) for p in preds]


@pytest.mark.parametrize("label", ["mrs", "all flushed + dms"])
def test_random_key_predicate_conjunctions(states, label):
    """Key-prefix narrowing (scan_spec.key_bounds) must never drop a matching row, whatever
    the mix of equality / range / IN predicates on the composite key, including literals
    between, below and above the stored keys and out of the INT32 range."""
    t, rows, snap = _current(states, label)
    rng = random.Random(label + "kp")
    all_rows = list(rows.values())
    k1s = K1 + ["a\x00\x00", "aa", "c", "\u00e9\u00e9"]
    k2s = [-7, -3, -1, 0, 1, 5, 17, 60, 61, 2 ** 31 - 1, -2 ** 31, 10 ** 12, -10 ** 12, 2.5]

    def rand_pred(name, pool):
        a, b = sorted(rng.sample(pool, 2))
        return rng.choice([
            P.equal(name, a), P.less(name, b), P.less_equal(name, b), P.greater(name, a),
            P.greater_equal(name, a), P.range(name, a, b, rng.random() < 0.5,
                                              rng.random() < 0.5),
            P.in_list(name, rng.sample(pool, 3))])

    for _ in range(40):
        preds = [rand_pred("k1", k1s) for _ in range(rng.randint(0, 2))]
        preds += [rand_pred("k2", k2s) for _ in range(rng.randint(0, 2))]
        want = sort_rows([r for r in all_rows if all(matches(p, r[p.column]) for p in preds)],
                         t.schema)
        got = scan_rows(t, columns=list(t.schema.names), predicates=preds, snapshot=snap)
        assert got == want, [str(p) for p in preds]


@pytest.mark.parametrize("label", STATE_LABELS)
def test_lookup(states, label):
    t, rows, snap = _current(states, label)
    for k, row in list(rows.items())[:60]:
        assert t.lookup(k, snapshot=snap) == row  # incl. 38-digit DECIMAL(38) values
        assert t.lookup(k, columns=["vc", "k2"], snapshot=snap) == {"vc": row["vc"],
                                                                    "k2": row["k2"]}
    for k in [("zz", 1), ("a", 10 ** 6), ("", -2 ** 31)]:
        assert t.lookup(k, snapshot=snap) is None


def test_time_travel_every_op(states):
    t, m, out = states
    for ts, state in m.history:
        assert scan_rows(t, snapshot=ts) == sort_rows(state.values(), t.schema)
    first = m.history[0][0]
    assert scan_rows(t, snapshot=first - 1) == []


def test_diff_scan_against_model(states):
    t, m, _ = states
    hist = [(0, {})] + m.history
    key_names = t.schema.key_names
    for i in range(len(hist)):
        for j in range(i, len(hist)):
            s, e = hist[i][0], hist[j][0]
            got = t.diff_scan(s, e)
            assert got.schema.names[-1] == "is_deleted"
            got_rows = {tuple(r[k] for k in key_names): r for r in got.to_pylist()}
            assert len(got_rows) == got.num_rows  # one row per key
            changed = set()
            for ts, _ in hist[i + 1:j + 1]:
                changed |= m.touched[ts]
            want = {}
            s_state, e_state = hist[i][1], hist[j][1]
            for k in changed:
                if k in e_state:
                    want[k] = dict(e_state[k], is_deleted=False)
                elif k in s_state:
                    want[k] = True
            assert set(got_rows) == set(want), (s, e)
            for k, w in want.items():
                if w is True:
                    assert got_rows[k]["is_deleted"] is True
                    # non-key values: the row's last live values
                    last = next(st[k] for _, st in reversed(hist[i:j + 1]) if k in st)
                    assert got_rows[k] == dict(last, is_deleted=True)
                else:
                    assert got_rows[k] == w


# -- writes: per-row errors --------------------------------------------------------------------


def simple(tmp_path, config=SMALL, clock=None, **extra_cols):
    schema = Schema([C("k", DataType.INT32), C("v", DataType.INT8),
                     C("s", DataType.VARCHAR, length=3), C("d", DataType.DECIMAL, precision=5,
                                                            scale=2),
                     C("nn", DataType.INT64, nullable=False, default=42),
                     C("dflt", DataType.STRING, default="zz")], key=["k"])
    return Tablet.create(str(tmp_path / "t"), schema, config, clock or LogicalClock())


def test_row_errors_codes_indexes_keys(tmp_path):
    t = simple(tmp_path)
    r = t.insert({"k": [1, 2, 3], "v": [1, 2, 3]})
    assert r.ok and r.num_applied == 3
    r = t.insert({"k": [4, 2, 5, None, 6, 7], "v": [4, 5, 300, 1, -129, 7]})
    assert [(e.index, e.code, e.key) for e in r.row_errors] == [
        (1, "ALREADY_PRESENT", (2,)), (2, "INVALID", (5,)), (3, "NOT_NULL", (None,)),
        (4, "INVALID", (6,))]
    assert r.num_applied == 2  # rows after failing ones still applied
    assert {e.code: e.sqlstate for e in r.row_errors} == {
        "ALREADY_PRESENT": "23505", "INVALID": "22P02", "NOT_NULL": "23502"}
    assert all(e.message for e in r.row_errors)
    assert sorted(x["k"] for x in t.scan_table(columns=["k"]).to_pylist()) == [1, 2, 3, 4, 7]
    assert t.lookup((2,))["v"] == 2  # the failed duplicate did not overwrite
    r = t.update({"k": [1, 99, 3], "v": [10, 11, 12]})
    assert [(e.index, e.code, e.key) for e in r.row_errors] == [(1, "NOT_FOUND", (99,))]
    assert r.num_applied == 2 and t.lookup((3,))["v"] == 12
    r = t.delete({"k": [98, 1]})
    assert [(e.index, e.code) for e in r.row_errors] == [(0, "NOT_FOUND")]
    assert t.lookup((1,)) is None
    r = t.delete({"k": [1]})  # already deleted
    assert r.row_errors[0].code == "NOT_FOUND" and r.num_applied == 0
    # NOT NULL column set to NULL explicitly
    r = t.insert({"k": [50, 51], "nn": [None, 5]})
    assert [(e.index, e.code) for e in r.row_errors] == [(0, "NOT_NULL")]
    r = t.update({"k": [51], "nn": pa.array([None], pa.int64())})
    assert [(e.index, e.code) for e in r.row_errors] == [(0, "NOT_NULL")]
    assert t.lookup((51,))["nn"] == 5


def test_invalid_values(tmp_path):
    t = simple(tmp_path)
    r = t.insert(pa.table({"k": [1, 2, 3, 4, 5],
                           "d": pa.array([_dec(12345, 2), _dec(-99999, 2), _dec(123456, 2),
                                          _dec(1, 2), None], pa.decimal128(7, 2))}))
    assert [(e.index, e.code) for e in r.row_errors] == [(2, "INVALID")]  # 1234.56 > DECIMAL(5,2)
    assert t.lookup((1,))["d"] == _dec(12345, 2)
    r = t.insert(pa.table({"k": [6, 7], "d": pa.array([_dec(12345, 3), _dec(1, 1)],
                                                      pa.decimal128(8, 3))}))
    # 12.345 does not fit scale 2 (Kudu refuses rather than rounds); 0.100 does
    assert [(e.index, e.code) for e in r.row_errors] == [(0, "INVALID")]
    assert t.lookup((7,))["d"] == _dec(10, 2)
    r = t.insert({"k": [8, 9], "v": ["x", "1"]})  # strings are not INT8 values
    assert [(e.index, e.code, e.key) for e in r.row_errors] == [(0, "INVALID", (8,)),
                                                                (1, "INVALID", (9,))]
    r = t.insert({"k": [2 ** 31, 10]})
    assert [(e.index, e.code) for e in r.row_errors] == [(0, "INVALID")]
    assert t.lookup((10,)) is not None


def test_unknown_column_and_missing_key(tmp_path):
    t = simple(tmp_path)
    with pytest.raises(errors.ColumnNotFound):
        t.insert({"k": [1], "nope": [1]})
    with pytest.raises(errors.ColumnNotFound):
        t.update({"k": [1], "K": [1]})  # names are case-sensitive
    with pytest.raises(errors.InvalidArgument):
        t.insert({"v": [1]})
    with pytest.raises(errors.InvalidArgument):
        t.write([OpType.INSERT], {"k": [1, 2]})  # one op type for two rows
    assert t.count_rows() == 0


def test_defaults_and_varchar_truncation(tmp_path):
    t = simple(tmp_path)
    r = t.insert({"k": [1, 2], "s": ["abcdef", "\u00e9\u20ac\u4e2d\U0001f600"]})
    assert r.ok
    assert t.lookup((1,)) == {"k": 1, "v": None, "s": "abc", "d": None, "nn": 42, "dflt": "zz"}
    # truncation counts characters, not bytes
    assert t.lookup((2,))["s"] == "\u00e9\u20ac\u4e2d"
    t.update({"k": [1], "s": ["wxyz"]})
    assert t.lookup((1,))["s"] == "wxy"
    t.upsert({"k": [3], "v": [1]})
    assert t.lookup((3,)) == {"k": 3, "v": 1, "s": None, "d": None, "nn": 42, "dflt": "zz"}
    # a reinsert after delete takes the defaults again, not the old values
    t.update({"k": [3], "dflt": ["x"], "nn": [1]})
    t.delete({"k": [3]})
    t.insert({"k": [3]})
    assert t.lookup((3,)) == {"k": 3, "v": None, "s": None, "d": None, "nn": 42, "dflt": "zz"}
    t.flush_mrs()
    t.delete({"k": [3]})
    t.insert({"k": [3], "v": [9]})
    assert t.lookup((3,)) == {"k": 3, "v": 9, "s": None, "d": None, "nn": 42, "dflt": "zz"}


def test_upsert(tmp_path):
    t = simple(tmp_path)
    t.insert({"k": [1], "v": [1], "s": ["a"]})
    r = t.upsert({"k": [1, 2], "v": [5, 6]})
    assert r.ok and r.num_applied == 2
    # upsert of a live row sets only the given columns
    assert t.lookup((1,)) == {"k": 1, "v": 5, "s": "a", "d": None, "nn": 42, "dflt": "zz"}
    assert t.lookup((2,))["v"] == 6
    t.flush_mrs()
    t.upsert({"k": [1, 3], "s": ["b", "c"]})
    assert t.lookup((1,))["s"] == "b" and t.lookup((1,))["v"] == 5
    assert t.lookup((3,))["s"] == "c"


def test_updating_key_columns_is_impossible(tmp_path):
    t = simple(tmp_path)
    t.insert({"k": [1, 2], "v": [1, 2]})
    # An UPDATE row only names its key: there is no way to say "change k from 1 to 5".
    r = t.update({"k": [5], "v": [9]})
    assert r.row_errors[0].code == "NOT_FOUND"
    r = t.update({"k": [1]})  # key only: nothing to set, the row is unchanged
    assert r.ok
    assert sorted((x["k"], x["v"]) for x in t.scan_table(columns=["k", "v"]).to_pylist()) == [
        (1, 1), (2, 2)]


def test_batch_order_for_repeated_keys(tmp_path):
    t = simple(tmp_path)
    ops = [OpType.INSERT, OpType.UPDATE, OpType.INSERT, OpType.DELETE, OpType.UPDATE,
           OpType.INSERT, OpType.UPSERT, OpType.INSERT, OpType.DELETE]
    rows = {"k": [1, 1, 1, 1, 1, 1, 1, 2, 2], "v": [1, 2, 3, 4, 5, 6, 7, 8, 9]}
    r = t.write(ops, rows)
    assert [(e.index, e.code) for e in r.row_errors] == [(2, "ALREADY_PRESENT"),
                                                         (4, "NOT_FOUND")]
    assert r.num_applied == 7
    assert t.lookup((1,))["v"] == 7
    assert t.lookup((2,)) is None
    # one op, one timestamp: nothing before the op, the final state at it
    assert t.lookup((1,), snapshot=r.timestamp - 1) is None
    assert t.count_rows(snapshot=r.timestamp) == 1
    # ops as a numpy array, over flushed data
    t.flush_mrs()
    r = t.write(np.array([OpType.UPDATE, OpType.DELETE, OpType.INSERT, OpType.UPDATE],
                         dtype=np.int8), {"k": [1, 1, 1, 1], "v": [10, 11, 12, 13]})
    assert r.ok and r.num_applied == 4
    assert t.lookup((1,))["v"] == 13
    assert t.count_rows() == 1
    assert scan_rows(t, columns=["k", "v"]) == [{"k": 1, "v": 13}]


def test_input_formats(tmp_path):
    t = simple(tmp_path)
    t.insert({"k": [1]})
    t.insert(pa.table({"k": pa.array([2], pa.int32())}))
    t.insert(pa.record_batch({"k": pa.array([3], pa.int64())}))
    t.insert([{"k": 4, "v": 1}])
    assert t.count_rows() == 4
    with pytest.raises(errors.InvalidArgument):
        t.insert("k=5")
    r = t.insert({"k": []})
    assert r.num_applied == 0 and r.ok


def test_timestamps_increase_and_current_timestamp(tmp_path):
    t = simple(tmp_path, clock=HybridClock())
    last = 0
    for i in range(5):
        r = t.insert({"k": [i]})
        assert r.timestamp > last
        assert t.current_timestamp() >= r.timestamp
        last = r.timestamp
    # a time-travel read into the future makes later writes land after it (repeatable)
    future = last + 10 ** 9
    assert t.count_rows(snapshot=future) == 5
    r = t.insert({"k": [100]})
    assert r.timestamp > future
    assert t.count_rows(snapshot=future) == 5


# -- scans: zone maps, lazy, flush invariance --------------------------------------------------


def test_zone_maps_skip_blocks_of_a_sorted_column(tmp_path):
    schema = Schema([C("k", DataType.INT64), C("v", DataType.INT64), C("w", DataType.STRING)],
                    key=["k"])
    cfg = TabletConfig(page_rows=16, fsync=False)
    t = Tablet.create(str(tmp_path / "z"), schema, cfg, LogicalClock())
    n = 640
    t.insert({"k": list(range(n)), "v": [2 * i for i in range(n)],
              "w": [f"w{i}" for i in range(n)]})
    t.flush_mrs()
    assert t.num_rowsets() == 1
    pages = n // 16
    for lazy in (True, False):
        stats = ScanStats()
        got = t.scan_table(columns=["k", "w"], predicates=[P.less("v", 40)], lazy=lazy,
                           stats=stats)
        assert sorted(got.column("k").to_pylist()) == list(range(20))
        assert stats.blocks_skipped_zone_map == pages - 2
        assert stats.rows_returned == 20
        stats = ScanStats()
        got = t.scan_table(predicates=[P.range("v", 600, 640)], lazy=lazy, stats=stats)
        assert sorted(got.column("k").to_pylist()) == list(range(300, 320))
        assert stats.blocks_skipped_zone_map == pages - 2
    # a value patched by a REDO makes its block unskippable: still found
    t.update({"k": [5], "v": [10 ** 6]})
    got = t.scan_table(columns=["k"], predicates=[P.greater("v", 10 ** 5)])
    assert got.column("k").to_pylist() == [5]
    stats = ScanStats()
    got = t.scan_table(columns=["k"], predicates=[P.equal("v", 10)], stats=stats)
    assert got.column("k").to_pylist() == []  # k=5 no longer has v=10
    # key-bounded scans read only the rows in range
    stats = ScanStats()
    got = t.scan_table(columns=["k"], lower_key=(100,), upper_key=(116,), stats=stats)
    assert sorted(got.column("k").to_pylist()) == list(range(100, 116))
    assert stats.rows_scanned == 16


def test_scan_identical_before_and_after_flushes(tmp_path):
    rng = random.Random(5)
    schema = all_types_schema()
    t = Tablet.create(str(tmp_path / "f"), schema, SMALL, LogicalClock())
    keys = list({(rng.choice(K1), rng.randint(0, 30)) for _ in range(80)})
    t.insert(table_of(schema, [_random_row(rng, k) for k in keys]))
    t.update(table_of(schema, [{"k1": k[0], "k2": k[1], "i32": 7, "s": None} for k in keys[:20]],
                      ["k1", "k2", "i32", "s"]))
    t.delete(table_of(schema, [{"k1": k[0], "k2": k[1]} for k in keys[20:30]], ["k1", "k2"]))
    preds = [[], [P.equal("i32", 7)], [P.is_null("s")], [P.greater("dec38", _dec(0, 6))],
             [P.less("dt", dt.date(2000, 1, 1)), P.is_not_null("bin")]]
    ts = t.current_timestamp()

    def all_scans():
        return [scan_rows(t, predicates=p, lazy=lz) for p in preds for lz in (True, False)] + [
            scan_rows(t, predicates=p, snapshot=ts - 1) for p in preds]

    before = all_scans()
    assert t.flush_mrs() == len(keys)
    assert all_scans() == before
    t.update(table_of(schema, [{"k1": k[0], "k2": k[1], "f": 0.5} for k in keys[30:40]],
                      ["k1", "k2", "f"]))
    before = all_scans()
    assert t.flush_dms() == 10
    assert all_scans() == before
    assert t.flush_dms() == 0
    assert t.flush_mrs() == 0


# -- lifecycle ---------------------------------------------------------------------------------


def test_open_after_close_restores_flushed_data(tmp_path):
    schema = Schema([C("k", DataType.INT32), C("v", DataType.STRING)], key=["k"])
    path = str(tmp_path / "p")
    t = Tablet.create(path, schema, SMALL, LogicalClock())
    with pytest.raises(errors.AlreadyPresent):
        Tablet.create(path, schema, SMALL, LogicalClock())
    r1 = t.insert({"k": list(range(50)), "v": [str(i) for i in range(50)]})
    t.flush_mrs()
    r2 = t.update({"k": [1, 2], "v": ["x", "y"]})
    t.delete({"k": [3]})
    t.flush_dms()
    last = t.current_timestamp()
    t.close()
    t2 = Tablet.open(path, SMALL, LogicalClock())
    assert t2.schema == schema
    assert t2.num_rowsets() == t.num_rowsets()
    rows = {r["k"]: r["v"] for r in t2.scan_table().to_pylist()}
    assert len(rows) == 49 and rows[1] == "x" and rows[2] == "y" and 3 not in rows
    assert t2.current_timestamp() >= last
    # time travel to before the reopen still works
    assert t2.lookup((1,), snapshot=r1.timestamp) == {"k": 1, "v": "1"}
    assert t2.lookup((3,), snapshot=r2.timestamp) == {"k": 3, "v": "3"}
    # the (fresh) clock continues after the persisted timestamps
    r = t2.insert({"k": [100], "v": ["new"]})
    assert r.timestamp > last
    assert t2.insert({"k": [3], "v": ["again"]}).ok
    assert t2.lookup((3,)) == {"k": 3, "v": "again"}
    t2.flush_mrs()
    t2.close()
    t3 = Tablet.open(path, SMALL)  # default (hybrid) clock
    assert t3.count_rows() == 51
    assert t3.insert({"k": [101]}).timestamp > r.timestamp
    with pytest.raises(errors.NotFound):
        Tablet.open(str(tmp_path / "missing"), SMALL)


def test_open_corrupt_metadata(tmp_path):
    schema = Schema([C("k", DataType.INT32)], key=["k"])
    path = str(tmp_path / "c")
    Tablet.create(path, schema, SMALL, LogicalClock()).close()
    with open(f"{path}/tablet-meta.json", "w") as f:
        f.write("{not json")
    with pytest.raises(errors.Corruption) as ei:
        Tablet.open(path, SMALL)
    assert path in str(ei.value)


# -- engine bugs -------------------------------------------------------------------------------


def test_delete_ignores_non_key_values(tmp_path):
    t = simple(tmp_path)
    t.insert({"k": [1]})
    r = t.delete({"k": [1], "v": [1000]})
    assert r.ok and r.num_applied == 1
    assert t.lookup((1,)) is None


def test_out_of_range_predicate_literal(tmp_path):
    t = simple(tmp_path)
    t.insert({"k": [1, 2], "v": [1, -5]})
    try:
        assert t.scan_table(predicates=[P.equal("v", 1000)]).num_rows == 0
        assert t.scan_table(predicates=[P.less("v", 1000)]).num_rows == 2
    except errors.InvalidArgument:
        pass


def test_decimal38_key_with_38_digits(tmp_path):
    schema = Schema([C("k", DataType.DECIMAL, precision=38, scale=0), C("v", DataType.INT32)],
                    key=["k"])
    t = Tablet.create(str(tmp_path / "d"), schema, SMALL, LogicalClock())
    big = _dec(12345678901234567890123456789012345678, 0)
    assert t.insert(pa.table({"k": pa.array([big], pa.decimal128(38, 0)), "v": [1]})).ok
    assert t.lookup((big,)) == {"k": big, "v": 1}
    assert t.scan_table(predicates=[P.equal("k", big)]).num_rows == 1
    assert t.scan_table(lower_key=(big,)).num_rows == 1


def test_scan_table_empty_projection(tmp_path):
    t = simple(tmp_path)
    t.insert({"k": [1, 2, 3]})
    tbl = t.scan_table(columns=[])
    assert tbl.num_rows == 3 and tbl.num_columns == 0


def test_lookup_decimal38_value_with_38_digits(tmp_path):
    schema = Schema([C("k", DataType.INT32), C("d", DataType.DECIMAL, precision=38, scale=6)],
                    key=["k"])
    t = Tablet.create(str(tmp_path / "l"), schema, SMALL, LogicalClock())
    v = _dec(-(10 ** 38 - 1), 6)
    t.insert(pa.table({"k": [1], "d": pa.array([v], pa.decimal128(38, 6))}))
    assert t.scan_table().to_pylist() == [{"k": 1, "d": v}]
    assert t.lookup((1,)) == {"k": 1, "d": v}


def test_create_with_decimal_default(tmp_path):
    schema = Schema([C("k", DataType.INT32),
                     C("d", DataType.DECIMAL, precision=9, scale=2, default=_dec(150, 2))],
                    key=["k"])
    t = Tablet.create(str(tmp_path / "dd"), schema, SMALL, LogicalClock())
    t.insert({"k": [1]})
    assert t.lookup((1,)) == {"k": 1, "d": _dec(150, 2)}


@pytest.mark.parametrize("precision", [9, 38])
def test_decimal_predicate_literal_with_more_digits_than_scale(tmp_path, precision):
    schema = Schema([C("k", DataType.INT32),
                     C("d", DataType.DECIMAL, precision=precision, scale=2)], key=["k"])
    t = Tablet.create(str(tmp_path / "dp"), schema, SMALL, LogicalClock())
    t.insert(pa.table({"k": [1, 2], "d": pa.array([_dec(123, 2), _dec(124, 2)],
                                                  pa.decimal128(precision, 2))}))
    D_ = decimal.Decimal

    def ks(p):
        return sorted(r["k"] for r in t.scan_table(predicates=[p]).to_pylist())

    assert ks(P.equal("d", D_("1.234"))) == []
    assert ks(P.less("d", D_("1.234"))) == [1]
    assert ks(P.greater("d", D_("1.235"))) == [2]
    assert ks(P.less_equal("d", D_("1.225"))) == []
    assert ks(P.in_list("d", [D_("1.231")])) == []


@pytest.mark.parametrize("kind", ["binary", "dictionary"])
def test_varchar_truncation_for_other_input_types(tmp_path, kind):
    t = simple(tmp_path)  # s is VARCHAR(3)
    arr = (pa.array([b"abcdef"], pa.binary()) if kind == "binary"
           else pa.array(["abcdef"]).dictionary_encode())
    assert t.insert(pa.table({"k": [1], "s": arr})).ok
    assert t.lookup((1,))["s"] == "abc"


def test_nanosecond_timestamp_input_is_truncated_to_micros(tmp_path):
    schema = Schema([C("k", DataType.INT32), C("ts", DataType.TIMESTAMP)], key=["k"])
    t = Tablet.create(str(tmp_path / "ns"), schema, SMALL, LogicalClock())
    r = t.insert(pa.table({"k": [1, 2], "ts": pa.array([1_000, 1_999], pa.timestamp("ns"))}))
    # Kudu stores microseconds: nanosecond input is truncated, never an error.
    assert r.ok and r.num_applied == 2
    got = t.scan_table().sort_by("k").column("ts").cast(pa.int64()).to_pylist()
    assert got == [1, 1]
