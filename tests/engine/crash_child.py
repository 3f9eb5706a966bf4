"""Crash-test child: writes random batches to a tablet forever, until the parent kills it.

    python -m tests.engine.crash_child DIR SEED [NEXT_BATCH]
    python tests/engine/crash_child.py DIR SEED [NEXT_BATCH]

Creates the tablet in DIR (schema: k INT64 key, v INT64 NULL, s STRING NULL) or opens it
(replaying its WAL), then loops: batch n = NEXT_BATCH, NEXT_BATCH + 1, ... Each batch is a
multi-row `Tablet.write` of random INSERT / UPSERT / UPDATE / DELETE rows (new keys,
re-inserts of deleted keys, live keys, keys that fail with ALREADY_PRESENT / NOT_FOUND, the
same key several times in one batch), 1..200 rows, sometimes 5000. Between batches it
randomly calls `flush_mrs()` / `flush_dms()`.

Protocol on stdout (one line each, flushed at once):

    READY <next_batch> <live_rows> <current_timestamp>   after the tablet is open
    BEGIN <n> <json>     before batch n is written: {"ops": [int OpType...], "cols": {"k":
                         [...], "v": [...], "s": [...]}} (v / s may be missing: a batch sets
                         only the columns it names)
    ACK <n> <timestamp> <num_applied>    after `write` returned (the write is durable)
    FLUSH_BEGIN mrs|dms / FLUSH_END mrs|dms <count>

The parent reconstructs every batch from its BEGIN line and replays it against a model. A
BEGIN line cut short (killed while printing) means the write had not started.

The randomness of batch n comes from Random((SEED, n)): a restarted child that is told the
same next batch number over the same tablet state makes the same choices.
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


def make_batch(rng: random.Random, live: KeySet, next_key: int) -> tuple[dict, int]:
    """One random batch over the current live keys; returns (batch, new next_key).

    `live` is updated to the expected live set after the batch (Kudu semantics), so the
    next batch keeps targeting existing keys.
    """
    r = rng.random()
    if r < 0.03:
        n = 5000
    elif r < 0.5:
        n = rng.randint(1, 10)
    else:
        n = rng.randint(1, 200)
    cols_choice = rng.random()
    names = ["k"] + (["v", "s"] if cols_choice < 0.6 else ["v"] if cols_choice < 0.8
                     else ["s"] if cols_choice < 0.97 else [])
    crowded = len(live) > MAX_LIVE
    weights = {"new": 1 if crowded else 6, "reinsert": 1, "dup_insert": 0.3,
               "upsert_live": 2, "upsert_new": 1, "update": 3, "update_missing": 0.3,
               "delete": 8 if crowded else 2, "delete_missing": 0.3, "repeat": 1}
    kinds, wts = zip(*weights.items())
    ops, keys = [], []
    for _ in range(n):
        kind = rng.choices(kinds, wts)[0]
        if kind == "repeat" and keys:
            k = rng.choice(keys)  # the same key again in this batch
            op = rng.choice(list(OPS.values()))
        elif kind in ("new", "upsert_new"):
            k = next_key
            next_key += 1
            op = OPS["INSERT"] if kind == "new" else OPS["UPSERT"]
        elif kind == "reinsert" and next_key:
            k = rng.randrange(next_key)
            op = OPS["INSERT"] if rng.random() < 0.7 else OPS["UPSERT"]
        elif kind in ("update_missing", "delete_missing"):
            k = next_key + rng.randrange(1, 1000) if rng.random() < 0.5 else (
                rng.randrange(next_key) if next_key else 0)
            op = OPS["UPDATE"] if kind == "update_missing" else OPS["DELETE"]
        elif len(live):
            k = live.choice(rng)
            op = {"dup_insert": OPS["INSERT"], "upsert_live": OPS["UPSERT"],
                  "update": OPS["UPDATE"], "delete": OPS["DELETE"]}.get(kind, OPS["UPDATE"])
        else:
            k = next_key
            next_key += 1
            op = OPS["INSERT"]
        ops.append(op)
        keys.append(k)
        # track liveness (errors leave it unchanged)
        if op == OPS["DELETE"]:
            live.remove(k)
        elif op in (OPS["INSERT"], OPS["UPSERT"]):
            live.add(k)
    cols = {"k": keys}
    for c in names[1:]:
        cols[c] = [_value(rng, c) for _ in range(n)]
    return {"ops": ops, "cols": cols}, next_key


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    path, seed = argv[0], int(argv[1])
    n = int(argv[2]) if len(argv) > 2 else 0
    t = open_or_create(path)
    keys = t.scan_table(["k"]).column("k").to_pylist()
    live = KeySet(keys)
    # Keys below next_key may have existed (re-inserts); a restart derives it from what is
    # live plus a per-seed floor so deleted keys are reused too.
    next_key = max(keys, default=-1) + 1
    emit(f"READY {n} {len(keys)} {t.current_timestamp()}")
    while True:
        rng = random.Random(f"{seed}-{n}")
        batch, next_key = make_batch(rng, live, next_key)
        emit(f"BEGIN {n} {json.dumps(batch, separators=(',', ':'))}")
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
