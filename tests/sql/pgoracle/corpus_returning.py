"""The PostgreSQL oracle's RETURNING and upsert section: INSERT / UPDATE / DELETE ...
RETURNING, INSERT ... ON CONFLICT (key) DO UPDATE (`oc_*`), and UPDATE ... FROM / DELETE
... USING (`uf_*`, with a second table `ret_moves`).

`SETUP` adds one table (`ret_items`, a column with a DEFAULT, a NUMERIC and a VARCHAR the
writes round and fit); `STATEMENTS` write to it only, each write's RETURNING list compared
with PostgreSQL's rows (a multiset: RETURNING has no order), with a query after the writes
showing the table. The refusals are PostgreSQL's (aggregates 42803, window functions 42P20,
set-returning functions 0A000). corpus.py appends both lists to its own; its rules apply
(stable names, re-record after editing).
"""

SETUP = [
    """CREATE TABLE ret_items (
        id INT PRIMARY KEY, name TEXT, qty INT DEFAULT 5, price NUMERIC(8,2),
        tag VARCHAR(4))""",
    """INSERT INTO ret_items VALUES
        (1, 'bolt', 10, 0.25, 'hw'), (2, 'nut', NULL, 0.10, 'hw'),
        (3, 'gear', 2, 12.50, NULL), (4, NULL, 0, NULL, 'x')""",
    """CREATE TABLE ret_moves (id INT PRIMARY KEY, item INT, delta INT, note TEXT)""",
    """INSERT INTO ret_moves VALUES (1, 1, 5, 'in'), (2, 2, -1, 'out'), (3, 3, 7, 'in'),
        (4, 20, -2, 'out'), (5, 99, 1, 'in'), (6, 3, 0, NULL)""",
]

STATEMENTS: list[tuple[str, str]] = [
    ("ret_insert_star",
     "INSERT INTO ret_items (id, name, price) VALUES (10, 'cog', 1.005), (11, 'pin', NULL) "
     "RETURNING *"),
    ("ret_insert_expressions",
     "INSERT INTO ret_items VALUES (12, 'Axle', 3, 2.5, 'ab') "
     "RETURNING id * 10, lower(name) AS n, qty + 1, price * qty, tag || '!'"),
    ("ret_insert_select",
     "INSERT INTO ret_items (id, name, qty) SELECT id + 100, upper(name), qty * 2 "
     "FROM ret_items WHERE id <= 3 RETURNING id, name, qty, price"),
    ("ret_insert_on_conflict_do_nothing",
     "INSERT INTO ret_items (id, name) VALUES (1, 'again'), (13, 'new') "
     "ON CONFLICT DO NOTHING RETURNING id, name, qty"),
    ("ret_insert_case_and_cast",
     "INSERT INTO ret_items (id, name, price) VALUES (14, 'spring', 7.777) "
     "RETURNING CASE WHEN price > 5 THEN 'dear' ELSE 'cheap' END, CAST(price AS TEXT), "
     "qty IS NULL"),
    ("ret_update_star", "UPDATE ret_items SET qty = qty + 1 WHERE id < 4 RETURNING *"),
    ("ret_update_alias",
     "UPDATE ret_items AS r SET price = price * 2, tag = 'dbl' WHERE r.price > 1 "
     "RETURNING r.id, r.price, r.name"),
    ("ret_update_no_rows", "UPDATE ret_items SET qty = 0 WHERE id = 999 RETURNING id, qty"),
    ("ret_update_set_null", "UPDATE ret_items SET name = NULL WHERE id = 4 RETURNING *"),
    ("ret_update_scalar_subquery",
     "UPDATE ret_items SET qty = 1 WHERE id = 2 "
     "RETURNING id, (SELECT count(*) FROM ret_items WHERE qty IS NULL) AS nulls"),
    ("ret_delete_star", "DELETE FROM ret_items WHERE id >= 100 RETURNING *"),
    ("ret_delete_expression",
     "DELETE FROM ret_items WHERE name IS NULL RETURNING id, coalesce(tag, '-')"),
    ("ret_delete_no_rows", "DELETE FROM ret_items WHERE id = 999 RETURNING *"),
    ("ret_aggregate_refused", "UPDATE ret_items SET qty = 1 RETURNING count(*)"),
    ("ret_window_refused", "DELETE FROM ret_items RETURNING row_number() OVER ()"),
    ("ret_set_returning_refused",
     "UPDATE ret_items SET qty = 1 RETURNING generate_series(1, 2)"),
    ("ret_unknown_column_refused",
     "INSERT INTO ret_items (id) VALUES (50) RETURNING nosuch"),
    ("ret_select_after", "SELECT * FROM ret_items ORDER BY id"),
    # INSERT ... ON CONFLICT (key) DO UPDATE (planner/on_conflict.py)
    ("oc_insert_or_update",
     "INSERT INTO ret_items (id, name, qty) VALUES (1, 'BOLT', 4), (20, 'washer', 9) "
     "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, qty = ret_items.qty + EXCLUDED.qty"),
    ("oc_select_insert_or_update", "SELECT * FROM ret_items WHERE id IN (1, 20)"),
    ("oc_excluded_defaults_and_returning",
     "INSERT INTO ret_items AS r (id, price) VALUES (2, 9.999), (21, 1) "
     "ON CONFLICT (id) DO UPDATE SET qty = EXCLUDED.qty * 10, price = EXCLUDED.price "
     "RETURNING r.id, r.qty, r.price, r.name"),
    ("oc_where_false_skips",
     "INSERT INTO ret_items AS r (id, name) VALUES (3, 'x'), (22, 'y') "
     "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name WHERE r.qty > 100 RETURNING *"),
    ("oc_where_true_updates",
     "INSERT INTO ret_items AS r (id, tag) VALUES (3, 'new') "
     "ON CONFLICT (id) DO UPDATE SET tag = EXCLUDED.tag WHERE r.tag IS NULL RETURNING id, tag"),
    ("oc_on_constraint",
     "INSERT INTO ret_items (id, qty) VALUES (1, 1) "
     "ON CONFLICT ON CONSTRAINT ret_items_pkey DO UPDATE SET qty = 0 RETURNING id, qty"),
    ("oc_prepared_shape",
     "INSERT INTO ret_items (id, name) SELECT id + 1, name FROM ret_items WHERE id = 21 "
     "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name || '!' RETURNING id, name"),
    ("oc_no_target_refused",
     "INSERT INTO ret_items (id) VALUES (1) ON CONFLICT DO UPDATE SET qty = 1"),
    ("oc_not_a_key_refused",
     "INSERT INTO ret_items (id) VALUES (1) ON CONFLICT (name) DO UPDATE SET qty = 1"),
    ("oc_unknown_constraint_refused",
     "INSERT INTO ret_items (id) VALUES (1) ON CONFLICT ON CONSTRAINT nope "
     "DO UPDATE SET qty = 1"),
    ("oc_second_time_refused",
     "INSERT INTO ret_items (id) VALUES (30), (30) ON CONFLICT (id) DO UPDATE SET qty = 1"),
    ("oc_ambiguous_column_refused",
     "INSERT INTO ret_items (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET qty = qty + 1"),
    ("oc_select_after", "SELECT * FROM ret_items ORDER BY id"),
    # UPDATE ... FROM / DELETE ... USING
    ("uf_update_from",
     "UPDATE ret_items SET qty = ret_items.qty + m.delta FROM ret_moves m "
     "WHERE m.item = ret_items.id AND m.delta > 0"),
    ("uf_select_update_from", "SELECT id, qty FROM ret_items ORDER BY id"),
    ("uf_update_from_join_returning",
     "UPDATE ret_items AS r SET tag = upper(m.note) FROM ret_moves m JOIN ret_items o "
     "ON o.id = m.item WHERE r.id = m.item AND o.qty IS NOT NULL AND m.note = 'out' "
     "RETURNING r.id, r.tag"),
    ("uf_update_from_no_match",
     "UPDATE ret_items SET qty = 0 FROM ret_moves m WHERE m.item = ret_items.id "
     "AND m.delta > 100"),
    ("uf_delete_using",
     "DELETE FROM ret_items USING ret_moves m WHERE m.item = ret_items.id AND m.delta < 0 "
     "RETURNING ret_items.id, ret_items.name"),
    ("uf_missing_from_entry_refused",
     "UPDATE ret_items SET qty = m.delta WHERE ret_items.id = 1"),
    ("uf_select_after", "SELECT * FROM ret_items ORDER BY id"),
    ("ret_constant_list",
     "INSERT INTO ret_items (id) VALUES (60), (61) RETURNING 1, 'new' AS state"),
    ("ret_constant_list_update", "UPDATE ret_items SET qty = 0 WHERE id >= 60 RETURNING 'zeroed'"),
]
