"""The oracle corpus's views over time-series tables, generate_series and big joins (issue
27): `SETUP` adds a `readings` table keyed by (host, ts) - a reading every 7 minutes for a
day from four hosts, some CPU values NULL, a few failed probes - and its `hosts`;
`STATEMENTS` create views over them (GROUP BY time buckets, views over views, window
functions, CTEs and UNION inside, column lists, OR REPLACE), query and join them, check
PostgreSQL's errors (42P07, 42P16, 2BP01, 42809, 55000, 42P01), and generate_series /
joins past the old row caps. (The catalogs that show views - pg_views, pg_class,
information_schema - exist over the wire only: tests/wire/test_views_psql.py.) Appended to corpus.STATEMENTS
after the writes (it reads only its own tables)."""

SETUP = [
    """CREATE TABLE readings (host TEXT, ts TIMESTAMP, cpu DOUBLE PRECISION, mem BIGINT,
        ok BOOLEAN, PRIMARY KEY (host, ts))""",
    """INSERT INTO readings
        SELECT 'h' || (i % 4), t,
               CASE WHEN i % 13 = 0 THEN NULL ELSE CAST((i * 37) % 100 AS DOUBLE PRECISION) / 4 END,
               (i * 1000) % 7919, i % 5 <> 0
        FROM generate_series(TIMESTAMP '2026-01-01 00:00:00', TIMESTAMP '2026-01-01 23:59:00',
                             INTERVAL '7 minutes') WITH ORDINALITY AS s(t, i)""",
    """CREATE TABLE hosts (host TEXT PRIMARY KEY, dc TEXT, cores INT)""",
    """INSERT INTO hosts VALUES ('h0', 'ams', 8), ('h1', 'ams', 16), ('h2', 'fra', 8),
        ('h3', NULL, 4), ('h9', 'fra', 2)""",
]

STATEMENTS: list[tuple[str, str]] = [
    # -- a view per time bucket, and views over it --
    ("view_create_hourly",
     "CREATE VIEW v_hourly AS SELECT host, date_trunc('hour', ts) AS hour, count(*) AS n, "
     "avg(cpu) AS avg_cpu, max(cpu) AS max_cpu, min(mem) AS min_mem FROM readings "
     "GROUP BY host, date_trunc('hour', ts)"),
    ("view_hourly_all", "SELECT * FROM v_hourly ORDER BY host, hour"),
    ("view_hourly_regroup", "SELECT hour, sum(n), max(max_cpu) FROM v_hourly GROUP BY hour "
                            "ORDER BY hour"),
    ("view_hourly_per_host", "SELECT host, max(avg_cpu), min(min_mem) FROM v_hourly "
                             "GROUP BY host"),
    ("view_hourly_filter_pushed", "SELECT host, hour, n FROM v_hourly WHERE host = 'h2' "
                                  "AND hour >= TIMESTAMP '2026-01-01 20:00' ORDER BY hour"),
    ("view_create_busy",
     "CREATE VIEW v_busy AS SELECT host, hour, avg_cpu FROM v_hourly WHERE avg_cpu > 13"),
    ("view_over_view", "SELECT * FROM v_busy ORDER BY host, hour"),
    ("view_over_view_count", "SELECT host, count(*) FROM v_busy GROUP BY host"),
    ("view_create_daily_columns",
     "CREATE VIEW v_daily (host, day, readings, peak) AS SELECT host, date_trunc('day', ts), "
     "count(*), max(cpu) FROM readings GROUP BY 1, 2"),
    ("view_daily_all", "SELECT * FROM v_daily ORDER BY host"),
    ("view_alias_renames_columns", "SELECT h, r FROM v_daily AS d(h, x, r) ORDER BY h"),
    ("view_replace_adds_column",
     "CREATE OR REPLACE VIEW v_daily (host, day, readings, peak, low) AS SELECT host, "
     "date_trunc('day', ts), count(*), max(cpu), min(cpu) FROM readings GROUP BY 1, 2"),
    ("view_replaced_all", "SELECT * FROM v_daily ORDER BY host"),
    ("view_by_hour_of_day",
     "CREATE VIEW v_hod AS SELECT extract(hour FROM ts) AS hod, count(*) AS n, "
     "max(cpu) AS peak FROM readings GROUP BY 1"),
    ("view_by_hour_of_day_rows", "SELECT hod, n, peak FROM v_hod ORDER BY hod"),
    # -- window functions in and over views --
    ("view_create_moving",
     "CREATE VIEW v_moving AS SELECT host, ts, cpu, avg(cpu) OVER (PARTITION BY host "
     "ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS ma3, lag(cpu) OVER "
     "(PARTITION BY host ORDER BY ts) AS prev FROM readings"),
    ("view_moving_one_host", "SELECT ts, cpu, ma3, prev FROM v_moving WHERE host = 'h1' "
                             "ORDER BY ts LIMIT 20"),
    ("view_moving_counts", "SELECT host, count(*), count(prev), count(ma3) FROM v_moving "
                           "GROUP BY host"),
    ("view_moving_jumps", "SELECT host, ts, cpu - prev FROM v_moving WHERE cpu - prev > 20 "
                          "ORDER BY host, ts"),
    ("view_window_over_view",
     "SELECT host, hour, avg(avg_cpu) OVER (PARTITION BY host ORDER BY hour ROWS BETWEEN "
     "1 PRECEDING AND 1 FOLLOWING) FROM v_hourly ORDER BY host, hour"),
    ("view_running_total_over_view",
     "SELECT host, hour, sum(n) OVER (PARTITION BY host ORDER BY hour) FROM v_hourly "
     "ORDER BY host, hour"),
    ("view_create_islands",
     "CREATE VIEW v_islands AS SELECT host, ts, ok, row_number() OVER (PARTITION BY host "
     "ORDER BY ts) - row_number() OVER (PARTITION BY host, ok ORDER BY ts) AS grp "
     "FROM readings"),
    ("view_islands_runs",
     "SELECT host, ok, min(ts), max(ts), count(*) FROM v_islands GROUP BY host, ok, grp "
     "HAVING count(*) > 8 ORDER BY host, min(ts)"),
    ("view_create_top_cte",
     "CREATE VIEW v_top AS WITH ranked AS (SELECT host, ts, cpu, rank() OVER (PARTITION BY "
     "host ORDER BY cpu DESC NULLS LAST, ts) AS r FROM readings) SELECT host, ts, cpu "
     "FROM ranked WHERE r <= 3"),
    ("view_top_rows", "SELECT * FROM v_top ORDER BY host, cpu DESC, ts"),
    ("view_create_union",
     "CREATE VIEW v_extremes AS SELECT host, 'max' AS kind, max(cpu) AS val FROM readings "
     "GROUP BY host UNION ALL SELECT host, 'min', min(cpu) FROM readings GROUP BY host"),
    ("view_union_rows", "SELECT * FROM v_extremes ORDER BY host, kind"),
    ("view_create_latest",
     "CREATE VIEW v_latest AS SELECT host, ts, cpu FROM readings ORDER BY ts DESC LIMIT 5"),
    ("view_latest_rows", "SELECT * FROM v_latest ORDER BY ts DESC"),
    # -- joins of views, views in subqueries --
    ("view_create_hosts", "CREATE VIEW v_hosts AS SELECT host, dc, cores FROM hosts"),
    ("view_join_views",
     "SELECT h.dc, count(*), max(b.avg_cpu) FROM v_busy b JOIN v_hosts h ON h.host = b.host "
     "GROUP BY h.dc ORDER BY h.dc"),
    ("view_left_join_using", "SELECT b.host, b.hour, h.dc FROM v_busy b LEFT JOIN v_hosts h "
                             "USING (host) ORDER BY 1, 2"),
    ("view_self_join_previous_hour",
     "SELECT a.host, a.hour, a.avg_cpu - b.avg_cpu FROM v_hourly a JOIN v_hourly b "
     "ON a.host = b.host AND b.hour = a.hour - INTERVAL '1 hour' ORDER BY 1, 2"),
    ("view_in_subquery", "SELECT host FROM hosts WHERE host IN (SELECT host FROM v_busy) "
                         "ORDER BY 1"),
    ("view_not_exists", "SELECT h.host FROM hosts h WHERE NOT EXISTS (SELECT 1 FROM v_busy "
                        "b WHERE b.host = h.host) ORDER BY 1"),
    ("view_scalar_subquery", "SELECT host, (SELECT max(n) FROM v_hourly v WHERE v.host = "
                             "hosts.host) FROM hosts ORDER BY 1"),
    ("view_cte_shadows_view", "WITH v_busy AS (SELECT 'x' AS host) SELECT * FROM v_busy"),
    ("view_derived_table_of_view",
     "SELECT dc, sum(peak) FROM (SELECT h.dc, d.peak FROM v_daily d JOIN hosts h "
     "ON h.host = d.host) s GROUP BY dc ORDER BY dc NULLS LAST"),
    # -- errors as PostgreSQL's --
    ("view_err_exists", "CREATE VIEW v_hourly AS SELECT 1"),
    ("view_err_table_name", "CREATE VIEW readings AS SELECT 1"),
    ("view_err_replace_drops_column", "CREATE OR REPLACE VIEW v_daily AS SELECT host FROM "
                                      "readings"),
    ("view_err_replace_renames_column",
     "CREATE OR REPLACE VIEW v_busy AS SELECT host, hour, avg_cpu AS cpu FROM v_hourly"),
    ("view_err_duplicate_column", "CREATE VIEW v_dup AS SELECT host, host FROM readings"),
    ("view_err_too_many_names", "CREATE VIEW v_names (a, b, c) AS SELECT host, ts FROM "
                                "readings"),
    ("view_err_drop_table_with_views", "DROP TABLE readings"),
    ("view_err_drop_view_with_views", "DROP VIEW v_hourly"),
    ("view_err_drop_view_of_table", "DROP VIEW readings"),
    ("view_err_drop_table_of_view", "DROP TABLE v_hosts"),
    ("view_err_insert_aggregate_view",
     "INSERT INTO v_hourly VALUES ('h0', TIMESTAMP '2026-01-02', 1, 1, 1, 1)"),
    ("view_err_update_view_of_view", "UPDATE v_busy SET avg_cpu = 0"),
    ("view_err_delete_window_view", "DELETE FROM v_moving WHERE host = 'h0'"),
    ("view_err_unknown", "SELECT * FROM v_nosuch"),
    ("view_drop_if_exists_missing", "DROP VIEW IF EXISTS v_nosuch"),
    # -- DROP VIEW, CASCADE --
    ("view_drop_busy", "DROP VIEW v_busy"),
    ("view_dropped_is_gone", "SELECT * FROM v_busy"),
    ("view_drop_hourly_now_free", "DROP VIEW v_hourly"),
    ("view_drop_two", "DROP VIEW v_top, v_extremes"),
    ("view_drop_table_cascade", "DROP TABLE hosts CASCADE"),
    ("view_after_cascade", "SELECT * FROM v_hosts"),
    ("view_after_cascade_others_stay", "SELECT count(*) FROM v_daily"),
    # -- generate_series and joins past the old row caps --
    ("srf_series_100k", "SELECT count(*), sum(g), min(g), max(g) FROM "
                        "generate_series(1, 100000) AS g"),
    ("srf_series_2m_filtered", "SELECT count(*) FROM generate_series(1, 2000000) AS g "
                               "WHERE g % 1000 = 7"),
    ("srf_select_list_50k", "SELECT count(*), max(g) FROM (SELECT generate_series(1, 50000) "
                            "AS g) s"),
    ("srf_series_step", "SELECT g, g % 7 FROM generate_series(-3, 100000, 9999) AS g"),
    ("srf_series_descending", "SELECT g FROM generate_series(10, -10, -7) AS g"),
    ("srf_timestamp_minutes",
     "SELECT count(*), min(t), max(t) FROM generate_series(TIMESTAMP '2026-01-01', "
     "TIMESTAMP '2026-03-01', INTERVAL '1 minute') AS t"),
    ("srf_timestamp_backwards",
     "SELECT t FROM generate_series(TIMESTAMP '2026-03-01', TIMESTAMP '2026-02-26', "
     "INTERVAL '-1 day') AS t"),
    ("srf_timestamp_month_steps",
     "SELECT t FROM generate_series(TIMESTAMP '2026-01-31', TIMESTAMP '2026-06-30', "
     "INTERVAL '1 month') AS t"),
    ("srf_ordinality", "SELECT v, o FROM generate_series(100, 104) WITH ORDINALITY AS "
                       "s(v, o)"),
    ("srf_view_of_minutes",
     "CREATE VIEW v_minutes AS SELECT t FROM generate_series(TIMESTAMP '2026-01-01', "
     "TIMESTAMP '2026-01-01 23:59', INTERVAL '1 minute') AS g(t)"),
    ("srf_gap_fill_join",
     "SELECT count(*), count(r.ts) FROM v_minutes m LEFT JOIN readings r ON r.ts = m.t "
     "AND r.host = 'h0'"),
    ("join_series_non_equi_9m",
     "SELECT count(*) FROM generate_series(1, 3000) AS a(x), generate_series(1, 3000) AS "
     "b(y) WHERE x + y = 3001"),
    ("join_series_equi_30k",
     "SELECT count(*), sum(x) FROM generate_series(1, 30000) AS a(x) JOIN "
     "generate_series(1, 30000) AS b(y) ON y = x * 2"),
    ("join_range_over_readings",
     "SELECT a.host, count(*) FROM readings a JOIN readings b ON a.host = b.host "
     "AND b.ts > a.ts AND b.ts <= a.ts + INTERVAL '30 minutes' GROUP BY a.host"),
]
