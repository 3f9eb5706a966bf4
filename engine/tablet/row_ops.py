"""RowOps: applying one write op's row operations to a tablet's rowsets.

`Tablet.apply` converts an op's rows to physical values, takes its timestamp and, under
the tablet's write lock, hands them to `RowOps(components, ...).apply(...)`, which decides
each row's outcome and changes the stores:

    INSERT   key not live anywhere: a new MemRowSet row (or a REINSERT of the active
             MemRowSet's dead row of that key); live: ALREADY_PRESENT
    UPDATE   key live: an UPDATE delta in the store that holds the live version (active
             MemRowSet, a MemRowSet being flushed, or a DiskRowSet's DeltaMemStore);
             not live: NOT_FOUND
    DELETE   the same with a DELETE delta
    UPSERT   INSERT if the key is not live, else UPDATE of the given columns

Vectorised in *rounds*: round r holds the r-th occurrence of each key in the op, so within
a round keys are distinct and the round is located with vectorised lookups (the MemRowSet
key index, the rowset tree, bloom filters and key-index pages for all its rows at once),
while rows that touch the same key still apply in batch order. Consecutive UPDATEs of one
key collapse to the last one first (a skewed batch would otherwise cost a round per repeat
of its hottest key). Rows already rejected (`bad`: values that did not convert, NULLs in
NOT NULL columns) are skipped; each row's error is recorded in `bad` by its batch index.
Every row is applied on its own (Kudu: a batch is not atomic).

Replay (`replay_index` given: WAL replay, or a committed entry of a replicated log): rows
whose effects flushed files already hold are skipped (an insert if the op's index <=
`mrs_flushed_index`, a DiskRowSet mutation if <= that rowset's `flushed_index`), and a
DiskRowSet row counts as live if its *history* says it was live just before the op
(`locate`): flushed rowsets may already hold the op's future (tablet_bootstrap.py).

A RowOps is built per op over the components captured under the write lock: it holds no
state of its own between ops and changes nothing but the stores it is given.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.cfile.bloom import hash_keys
from engine.convert import default_array
from engine.key_encoding import encode_keys
from engine.schema import ColumnSchema, Schema
from engine.tablet.delta import DeltaBatch, MutationKind
from engine.tablet.tablet_metadata import TabletComponents
from engine.tablet.write_op import OpType, RowErrorCode


class RowOps:
    """One op's row operations against one set of components (see the module docstring)."""

    def __init__(self, comps: TabletComponents, schema: Schema,
                 key_cols: list[ColumnSchema], non_key: list[ColumnSchema],
                 mrs_flushed_index: int):
        self.comps = comps
        self.schema = schema
        self.key_cols = key_cols
        self.non_key = non_key
        self.mrs_flushed_index = mrs_flushed_index

    def apply(self, ops: np.ndarray, phys: dict[int, pa.Array], ts: int, bad: dict,
               replay_index: int | None = None, read_ts: np.ndarray | None = None) -> int:
        """Apply the op's rows (module docstring); `read_ts`: each row's read
        precondition (row_check.py; -1: none), or None when no row has one."""
        n = len(ops)
        if n == 0:
            return 0
        key_phys = [phys[c.id] for c in self.key_cols]
        ok = np.ones(n, dtype=bool)
        if bad:
            ok[list(bad)] = False
            # keys of bad rows may be null; encode a harmless placeholder for them
            key_phys = [a.fill_null(pa.scalar(0 if not pa.types.is_binary(a.type) else b"",
                                              type=a.type)) if a.null_count else a
                        for a in key_phys]
        keys = encode_keys(key_phys, self.key_cols)
        rows = np.flatnonzero(ok)
        order = rows[np.argsort(keys[rows], kind="stable")]  # by key, then batch order
        sk = keys[order]
        same = sk[1:] == sk[:-1]
        # Consecutive UPDATEs of one key: only the last changes anything (they set the same
        # columns and an UPDATE never changes whether a row is live), so the others take
        # its outcome instead of costing a round each (a Zipf-skewed batch would need one
        # round per repeat of its hottest key). Same op, same timestamp: no reader can see
        # the intermediate values anyway.
        is_upd = ops[order] == OpType.UPDATE
        chain = same & is_upd[:-1] & is_upd[1:]
        if read_ts is not None:
            # rows with a read precondition never collapse: the second of two checked
            # UPDATEs of one key (two statements a coalesced write joined) must see the
            # first as a change (`_check_reads`), not replace it
            checked = read_ts[order] >= 0
            chain &= ~(checked[:-1] | checked[1:])
        superseded, follows = np.empty(0, np.int64), np.empty(0, np.int64)
        if chain.any():
            m = len(order)
            pos = np.arange(m)
            boundary = np.ones(m, dtype=bool)
            boundary[:-1] = ~chain
            last_pos = np.minimum.accumulate(np.where(boundary, pos, m)[::-1])[::-1]
            sup = np.flatnonzero(~boundary)
            superseded, follows = order[sup], order[last_pos[sup]]
            keep = boundary
            order, sk = order[keep], sk[keep]
            same = sk[1:] == sk[:-1]
        # Round r = the r-th occurrence of a key in this batch (stable sort keeps order).
        m = len(order)
        new_group = np.ones(m, dtype=bool)
        new_group[1:] = ~same
        group_start = np.maximum.accumulate(np.where(new_group, np.arange(m), 0))
        rank = np.arange(m) - group_start
        applied = 0
        # keys an earlier round of this op changed, and how (row_check.py UPDATED / GONE;
        # only kept for read preconditions, filled by `_apply_round`)
        written: dict | None = {} if read_ts is not None and m and rank.max() > 0 else None
        for r in range(int(rank.max()) + 1 if m else 0):
            idx = np.sort(order[rank == r])
            if len(idx):
                applied += self._apply_round(idx, ops[idx], keys[idx], phys, ts, r, bad,
                                             replay_index, read_ts, written)
        if not bad:
            return applied + len(superseded)
        for s_row, f_row in zip(superseded.tolist(), follows.tolist()):  # error path only:
            if f_row in bad:  # copying per-row outcomes, the data work was done above
                bad[s_row] = bad[f_row]
            else:
                applied += 1
        return applied

    def locate(self, keys: np.ndarray, comps: TabletComponents,
               replay: tuple[int, int, int] | None = None):
        """Where each key is live: (kind, which, rowid) + active-MRS rowid of dead keys.

        kind: 0 = not live anywhere, 1 = active MRS, 2 = a frozen MRS, 3 = a DiskRowSet.

        WAL replay of op (index i, timestamp t, round r) must see the state op i saw, but
        flushed rowsets may already hold the future (a later DELETE in a REDO file, a later
        re-insertion flushed into another rowset). So during replay a DiskRowSet row counts
        as live if its history says it was live just before round r of the op at t (every
        op before i has been replayed or is durable), and among several such candidates one
        whose
        flushed_index < i wins: that rowset still needs op i (a durable candidate means op i
        is already applied, and it is skipped whichever is chosen).
        """
        n = len(keys)
        kind = np.zeros(n, dtype=np.int8)
        which = np.full(n, -1, dtype=np.int64)
        rowid = np.full(n, -1, dtype=np.int64)
        mrs_rid = comps.mrs.find(keys)
        found = mrs_rid >= 0
        live = np.zeros(n, dtype=bool)
        live[found] = comps.mrs.latest_live(mrs_rid[found])
        kind[live] = 1
        rowid[live] = mrs_rid[live]
        for j, fz in enumerate(comps.frozen):
            rid = fz.find(keys)
            f = rid >= 0
            lv = np.zeros(n, dtype=bool)
            lv[f] = fz.latest_live(rid[f])
            lv &= kind == 0
            kind[lv] = 2
            which[lv] = j
            rowid[lv] = rid[lv]
        if not len(comps.drss):
            return kind, which, rowid, mrs_rid
        durable = np.zeros(n, dtype=bool)  # the chosen DRS already holds op i (replay)
        pending = np.flatnonzero(kind == 0)
        if not len(pending):
            return kind, which, rowid, mrs_rid
        pk = keys[pending]
        order = np.argsort(pk)
        spk = pk[order]
        hashes = None
        for drs, a, b in comps.tree.bulk_candidates(spk):
            sub = order[a:b]
            if hashes is None:
                hashes = hash_keys(pk)
            rid = drs.find_keys(pk[sub], hashes[sub])
            f = rid >= 0
            if not f.any():
                continue
            lv = np.zeros(len(sub), dtype=bool)
            if replay is None:
                lv[f] = ~drs.latest_dead()[rid[f]]
            else:
                lv[f] = drs.live_at(rid[f], replay[1], replay[2])
            tgt = pending[sub]
            if replay is None:
                lv &= kind[tgt] == 0
            else:
                this_durable = drs.flushed_index >= replay[0]
                lv &= (kind[tgt] == 0) | (durable[tgt] & (not this_durable))
            tgt = tgt[lv]
            kind[tgt] = 3
            which[tgt] = comps.drss.index(drs)
            rowid[tgt] = rid[lv]
            if replay is not None:
                durable[tgt] = drs.flushed_index >= replay[0]
        return kind, which, rowid, mrs_rid

    def _apply_round(self, idx: np.ndarray, ops: np.ndarray, keys: np.ndarray,
                     phys: dict[int, pa.Array], ts: int, seq: int, bad: dict,
                     replay_index: int | None = None, read_ts: np.ndarray | None = None,
                     written: set | None = None) -> int:
        comps = self.comps
        kind, which, rowid, mrs_rid = self.locate(
            keys, comps, None if replay_index is None else (replay_index, ts, seq))
        is_live = kind > 0
        changed = None if read_ts is None else \
            self._check_reads(idx, ops, kind, which, rowid, ts, read_ts, bad, keys, written)
        ins = ops == OpType.INSERT
        ups = ops == OpType.UPSERT
        upd = ops == OpType.UPDATE
        dele = ops == OpType.DELETE
        for i in np.flatnonzero(ins & is_live):
            bad[int(idx[i])] = (RowErrorCode.ALREADY_PRESENT.value, "key already present")
        for i in np.flatnonzero((upd | dele) & ~is_live):
            bad[int(idx[i])] = (RowErrorCode.NOT_FOUND.value, "key not found")
        do_insert = (ins | ups) & ~is_live
        do_update = (upd | ups) & is_live
        do_delete = dele & is_live
        if changed is not None:
            do_update &= ~changed
            do_delete &= ~changed
        if written is not None:     # for the checked rows of later rounds (_check_reads):
            from engine.tablet.row_check import GONE, UPDATED   # the keys written, GONE
            upd = dict.fromkeys(keys[do_update].tolist(), UPDATED)  # if a row deleted or
            upd.update(written)                                 # inserted one (GONE wins)
            written.update(upd)
            written.update(dict.fromkeys(keys[do_insert | do_delete].tolist(), GONE))
        # Inserts: brand-new keys append MRS rows; keys dead in the active MRS are REINSERTs.
        reinsert = do_insert & (mrs_rid >= 0)
        new_rows = do_insert & (mrs_rid < 0)
        # counted as the original apply counted them, also when replay skips them below:
        # the count is the op's result, which a replica's result tracker keeps
        applied = int(do_insert.sum() + do_update.sum() + do_delete.sum())
        if replay_index is not None and replay_index <= self.mrs_flushed_index:
            reinsert[:] = False  # already in a DiskRowSet (see _bootstrap)
            new_rows[:] = False
        mrs = comps.mrs
        if new_rows.any():
            sel = idx[new_rows]
            batch = self._full_rows(sel, phys)
            mrs.insert(keys[new_rows], batch, ts, seq)
        if reinsert.any():
            sel = idx[reinsert]
            full = self._full_rows(sel, phys)
            values = {c.id: full.column(self.schema.index_of(c.name)) for c in self.non_key}
            rids = mrs_rid[reinsert]
            mrs.append_mutations(DeltaBatch.uniform(rids, ts, seq, MutationKind.REINSERT,
                                                    values), np.ones(len(rids), dtype=bool))
        present = [c for c in self.non_key if c.id in phys]
        for mask, mkind in ((do_update, MutationKind.UPDATE), (do_delete, MutationKind.DELETE)):
            if not mask.any():
                continue
            for k in (1, 2, 3):
                kmask = mask & (kind == k)
                if not kmask.any():
                    continue
                targets = [(None, kmask)] if k == 1 else [
                    (w, kmask & (which == w)) for w in np.unique(which[kmask])]
                for w, tmask in targets:
                    sel = idx[tmask]
                    values = None
                    if mkind is MutationKind.UPDATE:
                        if not present:
                            continue
                        psel = pa.array(sel)
                        values = {c.id: phys[c.id].take(psel) for c in present}
                    batch = DeltaBatch.uniform(rowid[tmask], ts, seq, mkind, values)
                    if k == 1:
                        mrs.append_mutations(batch, None if mkind is MutationKind.UPDATE
                                             else np.zeros(len(sel), dtype=bool))
                    elif k == 2:
                        comps.frozen[int(w)].append_mutations(
                            batch, None if mkind is MutationKind.UPDATE
                            else np.zeros(len(sel), dtype=bool))
                    else:
                        drs = comps.drss[int(w)]
                        if replay_index is not None and replay_index <= drs.flushed_index:
                            continue  # already in this rowset's files (see _bootstrap)
                        drs.mutate(batch)
        return applied

    def _check_reads(self, idx, ops, kind, which, rowid, ts, read_ts, bad, keys,
                     written) -> np.ndarray:
        """Rows of this round whose read precondition fails (row_check.py), as a mask,
        each recorded in `bad` as CHANGED (NOT_FOUND if deleted since its read): live
        UPDATE / DELETE rows carrying a read timestamp, checked one by one (a loop over the
        checked rows only: a statement's few re-read candidates, each a point probe of one
        row's records). A change by an earlier round of this same op (`written`: its keys
        and how; its timestamp is this op's, which row_check.py does not count) is a
        change too."""
        from engine.tablet.row_check import changed_since, row_error
        comps = self.comps
        rts = read_ts[idx]
        changed = np.zeros(len(idx), dtype=bool)
        check = np.flatnonzero((kind > 0) & (rts >= 0) &
                               ((ops == OpType.UPDATE) | (ops == OpType.DELETE)))
        for i in check.tolist():
            k = int(kind[i])
            store = comps.mrs if k == 1 else comps.frozen[int(which[i])] if k == 2 \
                else comps.drss[int(which[i])]
            change = max(written.get(keys[i], 0) if written else 0,
                         changed_since(store, k, int(rowid[i]), int(rts[i]), ts))
            if change:
                bad[int(idx[i])] = row_error(change)
                changed[i] = True
        return changed

    def _full_rows(self, sel: np.ndarray, phys: dict[int, pa.Array]) -> pa.RecordBatch:
        """Physical rows for inserts: given columns, else each column's default (or NULL)."""
        psel = pa.array(sel)
        m = len(sel)
        arrays = []
        for col in self.schema.columns:
            if col.id in phys:
                a = phys[col.id]
                # sel is ascending and unique (flatnonzero): all of a's rows is a itself
                arrays.append(a if len(a) == m else a.take(psel))
            else:
                arrays.append(default_array(col, m))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(
            [pa.field(c.name, c.physical_type) for c in self.schema.columns]))
