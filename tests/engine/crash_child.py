"""Crash-test child: writes random batches to a tablet forever, until the parent kills it.

    python -m tests.engine.crash_child DIR SEED [NEXT_BATCH [PROFILE]]
    python tests/engine/crash_child.py DIR SEED [NEXT_BATCH [PROFILE]]

Creates the tablet in DIR (schema: k INT64 key, v INT64 NULL, s STRING NULL) or opens it
(replaying its WAL), then loops: batch n = NEXT_BATCH, NEXT_BATCH + 1, ... Each batch is a
multi-row `Tablet.write` of random INSERT / UPSERT / UPDATE / DELETE rows (new keys,
re-inserts of deleted keys, live keys, keys that fail with ALREADY_PRESENT / NOT_FOUND, the
same key several times in one batch), 1..200 rows, sometimes 5000. Between batches it
randomly calls `flush_mrs()` / `flush_dms()`. PROFILE "full" (default) does all of that;
"fresh" never inserts or upserts a key an earlier batch used (see `make_batch`). A suffix
"+compact" ("full+compact", "fresh+compact") adds rowset compactions, major delta
compactions and UNDO GC between batches (announced as FLUSH_BEGIN / FLUSH_END too);
"+rowsets" adds rowset compactions only. "+alter" adds ALTER TABLE between batches
(`Tablet.alter_schema`, announced as FLUSH_BEGIN alter / FLUSH_END alter): it adds a column
x BIGINT NOT NULL DEFAULT 7 when there is none, else drops it; batches never name x, so
every row must read x = 7 whenever the column exists (the parent checks that). "+small"
writes batches of 1..4 rows with `Tablet.write_small` (the small-write path and its
compact WAL records, engine/tablet/small_write.py; a batch repeating a key goes the
general way).

Protocol on stdout (one line each, flushed at once):

    READY <next_batch> <live_rows> <current_timestamp>   after the tablet is open
    BEGIN <n> <json>     before batch n is written: {"ops": [int OpType...], "cols": {"k":
                         [...], "v": [...], "s": [...]}} (v / s may be missing: a batch sets
                         only the columns it names)
    ACK <n> <timestamp> <num_applied>    after `write` returned (the write is durable)
    FLUSH_BEGIN <what> / FLUSH_END <what> <count>   around flushes and compactions

The parent reconstructs every batch from its BEGIN line and replays it against a model. A
BEGIN line cut short (killed while printing) means the write had not started.

The randomness of batch n comes from Random(f"{SEED}-{n}"), so a restarted child that is
told the same next batch number over the same tablet state makes the same choices (except
re-inserts: their candidates are the keys this process deleted). New keys of batch n are
n * KEY_STRIDE + j, fresh whatever happened before.
"""

from __future__ import annotations

import json
import os
import random
import sys

if __package__ in (None, ""):  # run by path: make `engine` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from engine.clock import HybridClock  # noqa: E402
from engine.schema import ColumnSchema, Schema  # noqa: E402
from engine.tablet import OpType, Tablet, TabletConfig  # noqa: E402
from engine.types import DataType  # noqa: E402

SCHEMA = Schema([ColumnSchema("k", DataType.INT64),
                 ColumnSchema("v", DataType.INT64, nullable=True),
                 ColumnSchema("s", DataType.STRING, nullable=True)], key=["k"])

CONFIG = TabletConfig(page_rows=64, drs_target_bytes=32 << 10, fsync=True,
                      wal_sync="commit", wal_segment_bytes=64 << 10,
                      block_cache_bytes=8 << 20)

# Above this many live keys the generator favours deletes, so long runs stay small.
MAX_LIVE = 20000
KEY_STRIDE = 10000  # batch n creates keys n * KEY_STRIDE + j (a batch has <= 5000 rows)

OPS = {"INSERT": int(OpType.INSERT), "UPSERT": int(OpType.UPSERT),
       "UPDATE": int(OpType.UPDATE), "DELETE": int(OpType.DELETE)}


def open_or_create(path: str) -> Tablet:
    if os.path.exists(os.path.join(path, "tablet-meta.json")):
        return Tablet.open(path, config=CONFIG, clock=HybridClock())
    return Tablet.create(path, SCHEMA, config=CONFIG, clock=HybridClock())


class KeySet:
    """Live keys with O(1) random choice, add and remove."""

    def __init__(self, keys):
        self.items = sorted(keys)
        self.pos = {k: i for i, k in enumerate(self.items)}

    def __len__(self):
        return len(self.items)

    def __contains__(self, k):
        return k in self.pos

    def add(self, k):
        if k not in self.pos:
            self.pos[k] = len(self.items)
            self.items.append(k)

    def remove(self, k):
        i = self.pos.pop(k, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def choice(self, rng):
        return self.items[rng.randrange(len(self.items))]


def _value(rng: random.Random, col: str):
    if rng.random() < 0.1:
        return None
    if col == "v":
        return rng.choice([rng.randrange(-1000, 1000), rng.getrandbits(63) - (1 << 62)])
    n = rng.choice([0, 1, 5, 20, 100])
    return "".join(rng.choice("abcdefghijxyz\u00e9\u4e2d") for _ in range(n))


def make_batch(rng: random.Random, n: int, live: KeySet, dead: KeySet, profile: str,
               small: bool = False) -> dict:
    """Batch n over the current live keys (Kudu semantics decide each row's outcome).

    New keys of batch n are n * KEY_STRIDE + j, so keys are fresh across restarts without
    any state. `live` / `dead` are updated to the live set after the batch, so the next batch
    targets existing keys. Profile "fresh" never INSERTs / UPSERTs a key an earlier batch
    used (no re-inserts, no ALREADY_PRESENT, no upsert-as-update).
    """
    r = rng.random()
    if small:
        rows = rng.randint(1, 4)
    elif r < 0.03:
        rows = 5000
    elif r < 0.5:
        rows = rng.randint(1, 10)
    else:
        rows = rng.randint(1, 200)
    cols_choice = rng.random()
    names = ["k"] + (["v", "s"] if cols_choice < 0.6 else ["v"] if cols_choice < 0.8
                     else ["s"] if cols_choice < 0.97 else [])
    crowded = len(live) > MAX_LIVE
    full = profile == "full"
    weights = {"new": 1 if crowded else 6, "upsert_new": 1, "update": 3,
               "update_missing": 0.3, "delete": 8 if crowded else 2, "delete_missing": 0.3,
               "repeat": 1}
    if full:
        weights.update({"reinsert": 1, "dup_insert": 0.3, "upsert_live": 2})
    kinds, wts = zip(*weights.items())
    base = n * KEY_STRIDE
    ops, keys, fresh = [], [], []
    for _ in range(rows):
        kind = rng.choices(kinds, wts)[0]
        if kind == "repeat" and keys:  # the same key again in this batch
            if full or not fresh or rng.random() < 0.5:
                k = rng.choice(keys)
                op = rng.choice(list(OPS.values()) if full else [OPS["UPDATE"], OPS["DELETE"]])
            else:
                k = rng.choice(fresh)
                op = rng.choice(list(OPS.values()))
        elif kind in ("new", "upsert_new") or (kind == "repeat" and not keys):
            k = base + len(fresh)
            fresh.append(k)
            op = OPS["UPSERT"] if kind == "upsert_new" else OPS["INSERT"]
        elif kind == "reinsert" and len(dead):
            k = dead.choice(rng)
            op = OPS["INSERT"] if rng.random() < 0.7 else OPS["UPSERT"]
        elif kind in ("update_missing", "delete_missing") or not len(live):
            k = rng.randrange(base + KEY_STRIDE)  # mostly never used: NOT_FOUND
            op = OPS["DELETE"] if kind == "delete_missing" else OPS["UPDATE"]
        else:
            k = live.choice(rng)
            op = {"dup_insert": OPS["INSERT"], "upsert_live": OPS["UPSERT"],
                  "delete": OPS["DELETE"]}.get(kind, OPS["UPDATE"])
        ops.append(op)
        keys.append(k)
        if op == OPS["DELETE"]:  # liveness after this row (errors leave it unchanged)
            if k in live:
                live.remove(k)
                dead.add(k)
        elif op in (OPS["INSERT"], OPS["UPSERT"]):
            live.add(k)
            dead.remove(k)
    cols = {"k": keys}
    for c in names[1:]:
        cols[c] = [_value(rng, c) for _ in range(rows)]
    return {"ops": ops, "cols": cols}


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    path, seed = argv[0], int(argv[1])
    n = int(argv[2]) if len(argv) > 2 else 0
    profile = argv[3] if len(argv) > 3 else "full"
    profile, _, extra = profile.partition("+")
    if profile not in ("full", "fresh") or extra not in ("", "compact", "rowsets", "alter",
                                                            "small"):
        raise SystemExit(f"unknown profile {argv[3]!r}")
    small = extra == "small"
    compact = "" if small else extra
    t = open_or_create(path)
    keys = t.scan_table(["k"]).column("k").to_pylist()
    live = KeySet(keys)
    dead = KeySet([])  # keys this process deleted: candidates for re-inserts
    emit(f"READY {n} {len(keys)} {t.current_timestamp()}")
    while True:
        rng = random.Random(f"{seed}-{n}")
        batch = make_batch(rng, n, live, dead, profile, small)
        emit(f"BEGIN {n} {json.dumps(batch, separators=(',', ':'))}")
        if small:
            cols = batch["cols"]
            res = t.write_small(batch["ops"], list(cols), list(zip(*cols.values())))
        else:
            res = t.write(batch["ops"], batch["cols"])
        emit(f"ACK {n} {res.timestamp} {res.num_applied}")
        n += 1
        r = rng.random()
        if r < 0.06:
            emit("FLUSH_BEGIN mrs")
            c = t.flush_mrs()
            emit(f"FLUSH_END mrs {c}")
        elif r < 0.12:
            emit("FLUSH_BEGIN dms")
            c = t.flush_dms()
            emit(f"FLUSH_END dms {c}")
        elif compact == "alter" and r < 0.18:
            alter(t)
        elif compact and r < 0.16:
            maintain(t, rng, rowsets_only=compact == "rowsets")


def alter(t: Tablet) -> None:
    """Profile "+alter": add column x (NOT NULL DEFAULT 7) if absent, else drop it."""
    if t.schema.has_column("x"):
        new = t.schema.drop_column("x")
    else:
        new = t.schema.add_column(ColumnSchema("x", DataType.INT64, nullable=False, default=7))
    emit("FLUSH_BEGIN alter")
    v = t.alter_schema(new)
    emit(f"FLUSH_END alter {v}")


def maintain(t: Tablet, rng: random.Random, rowsets_only: bool) -> None:
    """Profile "+compact": a rowset compaction (2..6 rowsets), a major delta compaction of
    every rowset, or UNDO GC — whichever the engine has. "+rowsets": rowset compactions
    only."""
    r = 0.0 if rowsets_only else rng.random()
    if r < 0.6 and hasattr(t, "compact_rowsets") and t.num_rowsets() >= 2:
        infos = sorted(t.rowsets_info(), key=lambda i: i["min_key"])
        m = rng.randint(2, min(6, len(infos)))
        a = rng.randrange(len(infos) - m + 1)
        ids = [i["id"] for i in infos[a:a + m]]  # neighbours by key range: they overlap
        emit("FLUSH_BEGIN compact_rowsets")
        c = t.compact_rowsets(ids)
        emit(f"FLUSH_END compact_rowsets {c}")
    elif r < 0.9 and hasattr(t, "compact_deltas"):
        emit("FLUSH_BEGIN compact_deltas")
        c = t.compact_deltas()
        emit(f"FLUSH_END compact_deltas {c}")
    elif hasattr(t, "gc_undo_deltas"):
        emit("FLUSH_BEGIN gc_undo")
        c = t.gc_undo_deltas()
        emit(f"FLUSH_END gc_undo {c}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
