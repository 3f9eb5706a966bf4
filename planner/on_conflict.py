"""INSERT ... ON CONFLICT (key) DO UPDATE SET ... [WHERE ...]: PostgreSQL's upsert.

Each proposed row is either inserted, or - its key being present - the existing row is
updated by the SET list, where `EXCLUDED.col` is the proposed row (its omitted columns at
their defaults) and `t.col` (or the statement's alias) the existing one; a row whose
DO UPDATE WHERE is false is neither inserted nor updated. The command's count is the rows
inserted plus the rows updated, as PostgreSQL counts them.

How it runs (`insert_or_update`), in rounds:
1. The rows not yet settled are inserted (one write per tablet, Kudu's per-row outcomes).
   Rows refused for another reason than a duplicate key are the statement's row errors.
2. For the rows whose key was present, the *update query* reads the existing rows at a
   snapshot S, joined by key with the proposed rows - `SELECT keys, SET values, other
   columns FROM target, target AS excluded WHERE target.key = excluded.key [AND where]`,
   the second relation's Scan replaced by the proposed rows (an `L.WorkTable`) before the
   rules run - and writes the updates under the precondition "unchanged since S"
   (planner/dml.py `write_reread`: a row changed meanwhile is read again, its WHERE and
   SET evaluated on the new version).
3. A row deleted between the insert that found it and the update goes back to step 1.
   After MAX_ROUNDS rounds a row still moving fails the statement with 40001.

Entry: `insert` (planner.dispatch sends an INSERT with DO UPDATE here). Refused as
PostgreSQL refuses them, before anything is written (the target checks are
planner.dml.check_conflict_target's, run by `insert_target`): DO UPDATE without a
conflict target (42601), a target that is not the primary key (42P10), a constraint name
other than `<table>_pkey` (42704), two proposed rows with the same key (21000: "cannot
affect row a second time"), an unqualified column that both relations have (42702), and
(kudusql) a SET of a key column (0A000: keys are immutable).
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner import dml
from planner import logical as L
from planner.binder import Binder, position
from planner.errors import SqlError
from planner.executor import Executor
from planner.query import run_query, subquery_runner
from planner.result import StatementResult
from planner.returning import (Returning, applied_rows, as_stored, find_scan, plan_returning,
                               replace_node, with_defaults)
from planner.rules import optimize

# the WorkTable id the update query reads the proposed rows from
_EXCLUDED = -2
# rounds of insert / update for rows deleted in between, before 40001
MAX_ROUNDS = 20


@dataclasses.dataclass
class UpdateQuery:
    """The bound update query (module docstring, step 2)."""
    out: L.Output
    columns: list[str]        # the proposed rows' columns the WorkTable gives, in order
    catalog: object
    check_cancel: object

    def run(self, excluded: pa.Table, snapshot: int) -> pa.Table:
        ex = Executor(self.catalog, check_cancel=self.check_cancel, snapshot=snapshot)
        ex.work_tables[_EXCLUDED] = excluded.select(self.columns)
        return ex.run_output(self.out)


def insert(catalog, ast: exp.Insert, sql: str, params, check_cancel=None) -> StatementResult:
    """Run an INSERT ... ON CONFLICT (key) DO UPDATE: everything that can be refused is
    refused before the first row is written."""
    target = dml.insert_target(catalog, ast, sql)
    conflict = target.on_update
    tnode, schema = dml.table_node(ast), target.table.schema
    returning = plan_returning(catalog, ast, sql, params, tnode, target.table, check_cancel,
                               dml.read_timestamp(catalog) if ast.args.get("returning")
                               is not None else None)
    names, values = dml.update_assignments(conflict, sql, tnode, schema)
    others = dml.returned_columns(target.table, names) if returning is not None else []
    query = update_query(catalog, sql, params, tnode, target.table, conflict, values, others,
                         check_cancel, ast.args.get("with_"))
    rows = run_query(catalog, dml.insert_source(ast, target), sql, params, check_cancel)
    cols = dml.insert_columns(target, rows.num_columns, sql, ast.expression)
    data = pa.Table.from_arrays([dml.sql_round(a, schema.column(c).arrow_type)
                                 for a, c in zip(rows.columns, cols)], names=cols)
    # keys as the table stores them (a VARCHAR(3) key cuts 'abcd' and 'abce' to one)
    duplicate_keys(as_stored(schema, data.select(schema.key_names)), schema.key_names, sql,
                   conflict)
    return insert_or_update(catalog, target, data, names, query, others, returning, sql)


def update_query(catalog, sql: str, params, tnode: exp.Table, table, conflict,
                 values: list[exp.Expression], others: list[str], check_cancel,
                 with_: exp.Expression | None = None) -> UpdateQuery:
    keys = table.schema.key_names
    target = tnode.copy()
    # the target's alias or name as written (a quoted "T" or "Up" stays quoted)
    named = tnode.args.get("alias")
    alias = (named.this if named is not None else tnode.this).copy()

    def col(c: str, table) -> exp.Column:
        return exp.column(exp.to_identifier(c, quoted=True), table=table.copy())

    excluded = tnode.copy()
    excluded.set("alias", exp.TableAlias(this=exp.to_identifier("excluded")))
    ex = exp.to_identifier("excluded")
    sel = exp.select(*[col(k, alias) for k in keys],
                     *[v.copy().as_(f"__set{i}") for i, v in enumerate(values)],
                     *[col(c, alias) for c in others])
    sel = sel.from_(target).join(excluded)
    if with_ is not None:           # WITH ... INSERT ... DO UPDATE SET x = (SELECT ... w)
        sel.set("with_", with_.copy())
    cond = exp.and_(*[exp.EQ(this=col(k, alias), expression=col(k, ex)) for k in keys])
    where = conflict.args.get("where")
    if where is not None:
        cond = exp.and_(cond, exp.paren(where.this.copy()))
    sel = sel.where(cond)
    out = Binder(catalog, sql, params, subquery_runner(catalog)).bind_query(sel)
    scan = find_scan(out.plan, lambda s: s.alias == "excluded")
    rows = L.WorkTable(_EXCLUDED, [scan.key(c) for c in scan.columns])
    out = dataclasses.replace(out, plan=replace_node(out.plan, scan, rows))
    return UpdateQuery(optimize(out, catalog), list(scan.columns), catalog, check_cancel)


def duplicate_keys(data: pa.Table, keys: list[str], sql: str, node) -> None:
    """21000 when two proposed rows share a key (PostgreSQL: the second would update the
    row the first inserted or updated)."""
    if data.num_rows < 2:
        return
    counts = data.select(keys).group_by(keys).aggregate([([], "count_all")])
    if counts.num_rows < data.num_rows:
        valid = counts.filter(pc.greater(counts["count_all"], 1))
        # NULL keys are refused row by row (23502), not duplicates of each other
        for k in keys:
            valid = valid.filter(pc.is_valid(valid[k]))
        if valid.num_rows:
            raise SqlError("ON CONFLICT DO UPDATE command cannot affect row a second time",
                           "21000", position(sql, node),
                           hint="Ensure that no rows proposed for insertion within the same "
                                "command have duplicate constrained values.")


def insert_or_update(catalog, target, data: pa.Table, names: list[str], query: UpdateQuery,
                     others: list[str], returning: Returning | None, sql: str
                     ) -> StatementResult:
    """Run the rounds of the module docstring over `data` (the proposed rows, the target
    columns SQL-rounded)."""
    table, schema = target.table, target.table.schema
    keys = schema.key_names
    ordinals = pa.array(range(data.num_rows), pa.int64())
    pending = data
    count, failures, kept = 0, [], ([] if returning is not None else None)
    tnode = exp.to_table(target.name)
    for _ in range(MAX_ROUNDS):
        r = table.insert(pending)
        count += r.num_applied
        present = [e.index for e in r.row_errors if e.code == "ALREADY_PRESENT"]
        failures += dml.row_failures(target.name, schema, [
            e for e in r.row_errors if e.code != "ALREADY_PRESENT"], ordinals)
        if kept is not None:
            kept.append(applied_rows(with_defaults(schema, pending), r.row_errors))
        if not present:
            break
        idx = pa.array(present, pa.int64())
        proposed, ordinals = pending.take(idx), ordinals.take(idx)
        excluded = with_defaults(schema, proposed)
        u = dml.write_reread(catalog, table, tnode, "INSERT",
                         lambda snap: query.run(excluded, snap),
                         lambda rows, snap: dml.apply_update(table, tnode, names, rows, snap,
                                                         kept, others))
        count += u.rowcount
        failures += u.row_errors
        gone = u.info.get("gone")
        if not gone:
            break
        # deleted since the insert found them: proposed again for insertion
        again = pa.concat_tables(gone).select(keys)
        mask = pc.is_in(_key_strings(proposed, keys), value_set=_key_strings(again, keys))
        pending, ordinals = proposed.filter(mask), ordinals.filter(mask)
    else:
        raise SqlError(f'could not serialize access due to concurrent update: rows of '
                       f'"{target.name}" kept being deleted and inserted while this INSERT '
                       f"... ON CONFLICT DO UPDATE ran {MAX_ROUNDS} rounds", "40001",
                       detail=f"{count} row(s) were written before and stay written",
                       hint="Run the statement again.")
    out = StatementResult("INSERT", rowcount=count, row_errors=sorted(
        failures, key=lambda f: f.ordinal))
    if returning is not None:
        # inserted rows (the table's column order) and updated ones (key, SET, the rest)
        out.table = returning.run(pa.concat_tables([t.select(schema.names) for t in kept],
                                                   promote_options="permissive"))
    return out


def _key_strings(t: pa.Table, keys: list[str]) -> pa.Array:
    """One comparable value per row for its key (several key columns: their texts joined
    with a separator no text of a value holds after escaping)."""
    if len(keys) == 1:
        return t.column(keys[0]).combine_chunks()
    parts = [pc.replace_substring(pc.cast(t.column(k), pa.string()), "\\", "\\\\")
             for k in keys]
    return pc.binary_join_element_wise(*parts, "\\|")
