"""The PostgreSQL oracle's time-series section (issue 27): bucketing (date_trunc,
date_bin), gaps, moving windows over time, time zones and DST transitions, interval
arithmetic, PostgreSQL's integer typing and branches not taken.

`SETUP` adds one table of readings (three hosts, irregular times around the 2026 DST
changes of New York and Berlin, a gap, NULL values); `STATEMENTS` only read it, except
the SET TIME ZONE statements, which come in pairs that put the zone back to UTC. corpus.py
appends both to its own lists; the rules of corpus.py apply (stable names, re-record after
editing).
"""

SETUP = [
    """CREATE TABLE tz_readings (
        host TEXT, ts TIMESTAMP, v DOUBLE PRECISION, n INT, s SMALLINT, b BIGINT,
        label TEXT, PRIMARY KEY (host, ts))""",
    """INSERT INTO tz_readings VALUES
        ('a', '2026-03-07 23:50:00', 1.5, 10, 1, 100, '5 minutes'),
        ('a', '2026-03-08 00:05:00', 2.0, 20, 2, 200, '1 hour'),
        ('a', '2026-03-08 00:20:00', NULL, 30, 3, 300, '90 seconds'),
        ('a', '2026-03-08 01:10:00', 4.0, 40, 4, 400, '1 day 02:00:00'),
        ('a', '2026-03-08 07:00:00', 5.5, 50, 5, 500, NULL),
        ('a', '2026-03-08 07:14:59', 6.0, 60, 6, 600, '-3 hours'),
        ('a', '2026-03-08 07:15:00', 6.5, 70, 7, 700, '2 mons'),
        ('a', '2026-03-09 12:00:00', 7.0, 80, 8, 800, '1 year 1 mon'),
        ('b', '2026-03-28 23:30:00', 10.0, 1, 10, 2147483647, '15 minutes'),
        ('b', '2026-03-29 00:45:00', 11.0, 2, 20, 2147483647, '45 minutes'),
        ('b', '2026-03-29 01:00:00', 12.0, 3, 30, 9000000000, '2 hours'),
        ('b', '2026-03-29 02:30:00', NULL, 4, 40, -5, '1 day'),
        ('b', '2026-03-29 03:00:00', 14.0, NULL, NULL, NULL, '3 days 4 hours'),
        ('b', '2026-04-02 08:00:00', 15.0, 6, 60, 6, '-1 days +02:00:00'),
        ('c', '2026-11-01 04:59:00', 20.0, 7, 70, 7, '30 seconds'),
        ('c', '2026-11-01 05:30:00', 21.0, 8, 80, 8, '1 mon -1 day'),
        ('c', '2026-11-01 06:00:00', 22.5, 9, 90, 9, '36 hours'),
        ('c', '2026-11-01 06:30:00', 23.0, 10, 100, 10, '10 days'),
        ('c', '2026-11-02 00:00:00', 24.0, 11, 110, 11, '1 week'),
        ('c', '2026-12-31 23:59:59', 25.0, 12, 120, 12, '1 hour 1 minute 1 second')""",
]

_R = "FROM tz_readings"

STATEMENTS: list[tuple[str, str]] = [
    # -- bucketing: date_trunc and date_bin --
    ("ts_trunc_hour_counts",
     f"SELECT date_trunc('hour', ts) AS h, count(*), sum(n) {_R} GROUP BY 1 ORDER BY 1"),
    ("ts_trunc_day_avg",
     f"SELECT host, date_trunc('day', ts) AS d, avg(v), count(v) {_R} GROUP BY 1, 2 "
     "ORDER BY 1, 2"),
    ("ts_trunc_week", f"SELECT date_trunc('week', ts) AS w, count(*) {_R} GROUP BY 1 ORDER BY 1"),
    ("ts_trunc_month_sum",
     f"SELECT date_trunc('month', ts) AS m, sum(v), max(v) {_R} GROUP BY 1 ORDER BY 1"),
    ("ts_trunc_minute_text",
     f"SELECT date_trunc('minute', ts)::text {_R} WHERE host = 'a' ORDER BY ts"),
    ("ts_trunc_quarter_year",
     f"SELECT date_trunc('quarter', ts), date_trunc('year', ts) {_R} ORDER BY host, ts"),
    ("ts_bin_15min",
     f"SELECT date_bin(interval '15 minutes', ts, timestamp '2026-01-01') AS b, count(*) "
     f"{_R} GROUP BY 1 ORDER BY 1"),
    ("ts_bin_hour_offset_origin",
     f"SELECT date_bin(interval '1 hour', ts, timestamp '2026-01-01 00:30') AS b, avg(v) "
     f"{_R} GROUP BY 1 ORDER BY 1"),
    ("ts_bin_day_origin_after",
     f"SELECT ts, date_bin(interval '1 day', ts, timestamp '2027-01-01 06:00') {_R} "
     "ORDER BY host, ts"),
    ("ts_bin_90s",
     f"SELECT host, date_bin('90 seconds', ts, '2026-03-01') {_R} ORDER BY host, ts"),
    ("ts_bin_week_host",
     f"SELECT host, date_bin(interval '7 days', ts, timestamp '2026-03-02') AS w, count(*) "
     f"{_R} GROUP BY 1, 2 ORDER BY 1, 2"),
    ("ts_bin_per_row_stride",
     f"SELECT host, n, date_bin(n * interval '1 minute', ts, timestamp '2026-01-01') {_R} "
     "WHERE n > 0 ORDER BY host, ts"),
    ("ts_bin_equals_trunc",
     f"SELECT count(*) {_R} WHERE date_bin(interval '1 hour', ts, timestamp '2000-01-01') "
     "= date_trunc('hour', ts)"),
    ("ts_bin_months_refused",
     "SELECT date_bin(interval '1 month', timestamp '2026-01-15', timestamp '2026-01-01')"),
    ("ts_bin_zero_stride",
     "SELECT date_bin(interval '0 seconds', timestamp '2026-01-15', timestamp '2026-01-01')"),
    ("ts_bin_before_origin",
     "SELECT date_bin(interval '1 hour', timestamp '1999-12-31 23:30', "
     "timestamp '2000-01-01')::text"),
    ("ts_series_buckets_join",
     "SELECT g.b, count(r.ts) FROM (SELECT timestamp '2026-03-08 00:00' + i * interval "
     "'1 hour' AS b FROM generate_series(0, 7) AS t(i)) g LEFT JOIN tz_readings r "
     "ON date_trunc('hour', r.ts) = g.b GROUP BY g.b ORDER BY g.b"),
    ("ts_extract_buckets",
     f"SELECT extract(dow FROM ts) AS dow, extract(hour FROM ts) AS h, count(*) {_R} "
     "GROUP BY 1, 2 ORDER BY 1, 2"),
    ("ts_date_part_double",
     f"SELECT date_part('hour', ts), date_part('minute', ts) {_R} WHERE host = 'c' ORDER BY ts"),
    ("ts_to_char_bucket",
     f"SELECT to_char(date_trunc('day', ts), 'YYYY-MM-DD') AS d, count(*) {_R} GROUP BY 1 "
     "ORDER BY 1"),
    # -- gaps and islands --
    ("ts_gap_lag", f"SELECT host, ts, ts - lag(ts) OVER (PARTITION BY host ORDER BY ts) {_R} "
                   "ORDER BY host, ts"),
    ("ts_gap_lead_text",
     f"SELECT host, ts, (lead(ts) OVER (PARTITION BY host ORDER BY ts) - ts)::text {_R} "
     "ORDER BY host, ts"),
    ("ts_gap_over_hour",
     f"SELECT host, ts FROM (SELECT host, ts, ts - lag(ts) OVER (PARTITION BY host ORDER BY "
     f"ts) AS gap {_R}) x WHERE gap > interval '1 hour' ORDER BY host, ts"),
    ("ts_gap_max_per_host",
     f"SELECT host, max(gap), min(gap) FROM (SELECT host, ts - lag(ts) OVER (PARTITION BY "
     f"host ORDER BY ts) AS gap {_R}) x GROUP BY host ORDER BY host"),
    ("ts_gap_max_text",
     f"SELECT host, max(gap)::text FROM (SELECT host, ts - lag(ts) OVER (PARTITION BY host "
     f"ORDER BY ts) AS gap {_R}) x GROUP BY host ORDER BY host"),
    ("ts_gap_sum_avg",
     f"SELECT host, sum(gap), avg(gap) FROM (SELECT host, ts - lag(ts) OVER (PARTITION BY "
     f"host ORDER BY ts) AS gap {_R}) x GROUP BY host ORDER BY host"),
    ("ts_gap_epoch_seconds",
     f"SELECT host, ts, extract(epoch FROM ts - lag(ts) OVER (PARTITION BY host ORDER BY ts)) "
     f"{_R} ORDER BY host, ts"),
    ("ts_islands",
     f"SELECT host, min(ts), max(ts), count(*) FROM (SELECT host, ts, sum(brk) OVER "
     f"(PARTITION BY host ORDER BY ts) AS island FROM (SELECT host, ts, CASE WHEN ts - lag(ts) "
     f"OVER (PARTITION BY host ORDER BY ts) <= interval '1 hour' THEN 0 ELSE 1 END AS brk "
     f"{_R}) x) y GROUP BY host, island ORDER BY host, 2"),
    ("ts_gap_order_by_interval",
     f"SELECT host, ts FROM (SELECT host, ts, ts - lag(ts) OVER (PARTITION BY host ORDER BY "
     f"ts) AS gap {_R}) x WHERE gap IS NOT NULL ORDER BY gap DESC, host, ts LIMIT 5"),
    ("ts_first_last_per_day",
     f"SELECT DISTINCT host, date_trunc('day', ts) AS d, first_value(v) OVER w, "
     f"last_value(v) OVER w {_R} WINDOW w AS (PARTITION BY host, date_trunc('day', ts) "
     "ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) ORDER BY 1, 2"),
    ("ts_age_of_readings",
     f"SELECT host, age(timestamp '2027-01-01', ts) {_R} ORDER BY host, ts"),
    # -- moving windows over time --
    ("ts_range_hour_sum",
     f"SELECT host, ts, sum(v) OVER (PARTITION BY host ORDER BY ts RANGE BETWEEN interval "
     f"'1 hour' PRECEDING AND CURRENT ROW) {_R} ORDER BY host, ts"),
    ("ts_range_hour_count",
     f"SELECT host, ts, count(*) OVER (PARTITION BY host ORDER BY ts RANGE BETWEEN interval "
     f"'1 hour' PRECEDING AND CURRENT ROW) {_R} ORDER BY host, ts"),
    ("ts_range_30min_avg",
     f"SELECT host, ts, avg(v) OVER (PARTITION BY host ORDER BY ts RANGE BETWEEN interval "
     f"'30 minutes' PRECEDING AND interval '30 minutes' FOLLOWING) {_R} ORDER BY host, ts"),
    ("ts_range_day_max",
     f"SELECT host, ts, max(v) OVER (PARTITION BY host ORDER BY ts RANGE BETWEEN interval "
     f"'1 day' PRECEDING AND CURRENT ROW) {_R} ORDER BY host, ts"),
    ("ts_range_following_min",
     f"SELECT host, ts, min(n) OVER (PARTITION BY host ORDER BY ts RANGE BETWEEN CURRENT ROW "
     f"AND interval '2 hours' FOLLOWING) {_R} ORDER BY host, ts"),
    ("ts_range_desc",
     f"SELECT host, ts, sum(n) OVER (PARTITION BY host ORDER BY ts DESC RANGE BETWEEN "
     f"interval '1 hour' PRECEDING AND CURRENT ROW) {_R} ORDER BY host, ts"),
    ("ts_range_int_avg",
     f"SELECT host, ts, avg(n) OVER (PARTITION BY host ORDER BY ts RANGE BETWEEN interval "
     f"'2 hours' PRECEDING AND CURRENT ROW) {_R} ORDER BY host, ts"),
    ("ts_rows_moving_avg",
     f"SELECT host, ts, avg(v) OVER (PARTITION BY host ORDER BY ts ROWS BETWEEN 2 PRECEDING "
     f"AND CURRENT ROW) {_R} ORDER BY host, ts"),
    ("ts_running_total",
     f"SELECT host, ts, sum(n) OVER (PARTITION BY host ORDER BY ts) {_R} ORDER BY host, ts"),
    ("ts_rate_per_second",
     f"SELECT host, ts, (v - lag(v) OVER w) / extract(epoch FROM ts - lag(ts) OVER w) {_R} "
     "WINDOW w AS (PARTITION BY host ORDER BY ts) ORDER BY host, ts"),
    ("ts_delta_int",
     f"SELECT host, ts, n - lag(n) OVER (PARTITION BY host ORDER BY ts) {_R} ORDER BY host, ts"),
    ("ts_range_date_day",
     f"SELECT d, count(*) OVER (ORDER BY d RANGE BETWEEN interval '1 day' PRECEDING AND "
     f"CURRENT ROW) FROM (SELECT DISTINCT ts::date AS d {_R}) x ORDER BY d"),
    ("ts_window_interval_aggs",
     f"SELECT host, ts, (sum(n * interval '1 minute') OVER w)::text, "
     f"(avg(n * interval '1 minute') OVER w)::text, (max(ts - timestamp '2026-03-01') OVER "
     f"w)::text, (min(label::interval) OVER (PARTITION BY host ORDER BY ts ROWS BETWEEN 1 "
     f"PRECEDING AND CURRENT ROW))::text {_R} WINDOW w AS (PARTITION BY host ORDER BY ts) "
     "ORDER BY host, ts"),
    # -- interval arithmetic --
    ("iv_ts_plus_n_seconds",
     f"SELECT host, ts + n * interval '1 second' {_R} ORDER BY host, ts"),
    ("iv_base_plus_n_minutes",
     f"SELECT timestamp '2026-01-01' + n * interval '1 minute' {_R} ORDER BY host, ts"),
    ("iv_text_to_interval", f"SELECT label, label::interval {_R} ORDER BY host, ts"),
    ("iv_concat_cast", f"SELECT (n || ' seconds')::interval {_R} ORDER BY host, ts"),
    ("iv_concat_cast_text",
     f"SELECT ((n || ' hours')::interval)::text, (label::interval)::text {_R} "
     "ORDER BY host, ts"),
    ("iv_ts_plus_label", f"SELECT ts + label::interval {_R} ORDER BY host, ts"),
    ("iv_ts_minus_label", f"SELECT ts - label::interval {_R} ORDER BY host, ts"),
    ("iv_date_plus_label", f"SELECT ts::date + label::interval {_R} ORDER BY host, ts"),
    ("iv_month_end_clamp",
     "SELECT (date '2026-01-31' + g * interval '1 month')::text FROM generate_series(0, 13) "
     "AS t(g) ORDER BY g"),
    ("iv_times_float", f"SELECT (label::interval * v)::text {_R} ORDER BY host, ts"),
    ("iv_times_int", f"SELECT (label::interval * n)::text {_R} ORDER BY host, ts"),
    ("iv_divide", f"SELECT (label::interval / 7)::text, (label::interval / 0.5)::text {_R} "
                  "ORDER BY host, ts"),
    ("iv_divide_by_column",
     f"SELECT (interval '1 day' / n)::text {_R} WHERE n <> 0 ORDER BY host, ts"),
    ("iv_negate", f"SELECT (-label::interval)::text {_R} ORDER BY host, ts"),
    ("iv_plus_minus", f"SELECT (label::interval + interval '1 mon 1 day' - interval "
                      f"'25 hours')::text {_R} ORDER BY host, ts"),
    ("iv_ts_minus_ts_text",
     f"SELECT (ts - timestamp '2026-03-01')::text {_R} ORDER BY host, ts"),
    ("iv_compare_month_30_days",
     "SELECT interval '1 mon' = interval '30 days', interval '1 day' = interval '24 hours', "
     "interval '1 year' > interval '360 days', interval '1 mon' < interval '31 days'"),
    ("iv_where_compare",
     f"SELECT host, ts {_R} WHERE label::interval > interval '1 day' ORDER BY host, ts"),
    ("iv_order_by", f"SELECT label {_R} WHERE label IS NOT NULL ORDER BY label::interval, label"),
    ("iv_group_by_equal_spans",
     "SELECT i, count(*) FROM (VALUES (interval '1 day'), (interval '24 hours'), "
     "(interval '1 mon'), (interval '30 days')) v(i) GROUP BY i ORDER BY i"),
    ("iv_sum_avg_group",
     f"SELECT host, sum(label::interval), avg(label::interval) {_R} GROUP BY host ORDER BY host"),
    ("iv_sum_avg_text",
     f"SELECT host, sum(label::interval)::text, avg(label::interval)::text, "
     f"max(label::interval)::text, min(label::interval)::text {_R} GROUP BY host ORDER BY host"),
    ("iv_sum_all", f"SELECT sum(label::interval)::text, count(label) {_R}"),
    ("iv_make_interval",
     "SELECT make_interval(1, 2, 3, 4, 5, 6, 7.5)::text, make_interval(hours => 2, "
     "mins => 30)::text, make_interval(days => -1, secs => 0.25)::text"),
    ("iv_make_interval_columns",
     f"SELECT make_interval(days => n, hours => s)::text {_R} ORDER BY host, ts"),
    ("iv_justify",
     "SELECT justify_hours(interval '50 hours')::text, justify_days(interval '-35 days')::text, "
     "justify_interval(interval '1 mon -1 hour')::text, "
     "justify_interval(interval '-1 mon 40 days 30 hours')::text"),
    ("iv_justify_columns",
     f"SELECT justify_interval(label::interval * n)::text {_R} ORDER BY host, ts"),
    ("iv_extract_fields",
     f"SELECT extract(epoch FROM label::interval), extract(hour FROM label::interval), "
     f"extract(minute FROM label::interval), extract(day FROM label::interval) {_R} "
     "ORDER BY host, ts"),
    ("iv_extract_epoch_text", "SELECT extract(epoch FROM interval '1 hour')::text"),
    ("iv_out_of_range", "SELECT interval '2147483647 days' + interval '1 day'"),
    ("iv_divide_by_zero", "SELECT interval '1 day' / 0"),
    ("iv_bad_text", "SELECT ('abc' || n)::interval FROM tz_readings"),
    ("iv_ts_out_of_range",
     "SELECT timestamp '2000-01-01' + n * interval '110000000 days' FROM tz_readings"),
    ("iv_null_arith",
     f"SELECT ts + NULL::interval, label::interval * NULL, NULL::interval / 2 {_R} "
     "WHERE host = 'a' ORDER BY ts"),
    # -- generate_series over timestamps in the SELECT list (lockstep with other series) --
    ("gs_select_hours",
     "SELECT generate_series(timestamp '2026-03-08 00:00', timestamp '2026-03-08 12:00', "
     "interval '150 minutes')::text"),
    ("gs_select_descending",
     "SELECT generate_series(timestamp '2026-01-02', timestamp '2026-01-01', "
     "interval '-7 hours')::text"),
    ("gs_select_fraction",
     "SELECT generate_series(timestamp '2026-01-01 00:00:00.5', "
     "timestamp '2026-01-01 00:00:02', interval '0.7 seconds')::text"),
    ("gs_select_month_clamp",
     "SELECT generate_series(date '2026-01-31', date '2026-06-01', interval '1 month')::text"),
    ("gs_select_month_clamp_ts",
     "SELECT generate_series(timestamp '2026-01-31 12:00', timestamp '2026-06-01', "
     "interval '1 month 1 hour')::text"),
    ("gs_select_empty",
     "SELECT generate_series(date '2026-01-31', date '2026-01-01', interval '1 month')"),
    ("gs_select_null_stop",
     "SELECT generate_series(timestamp '2026-01-01', NULL, interval '1 hour')"),
    ("gs_select_zero_step",
     "SELECT generate_series(timestamp '2026-01-01', timestamp '2026-01-02', interval '0')"),
    ("gs_select_per_row",
     f"SELECT host, ts, generate_series(ts, ts + interval '1 hour', interval '25 minutes')::text "
     f"{_R} WHERE host = 'a' ORDER BY host, ts, 3"),
    ("gs_select_lockstep",
     "SELECT generate_series(1, 4) AS i, generate_series(timestamp '2026-01-01', "
     "timestamp '2026-01-01 01:00', interval '30 minutes')::text ORDER BY i"),
    ("gs_select_tz_hours",
     "SELECT count(*) FROM (SELECT generate_series(timestamptz '2026-03-28 00:00+00', "
     "timestamptz '2026-03-30 00:00+00', interval '1 hour')) s"),
    # -- time zones --
    ("tz_at_zone_new_york",
     f"SELECT ts, ts AT TIME ZONE 'America/New_York' {_R} ORDER BY host, ts"),
    ("tz_at_zone_berlin_text",
     f"SELECT (ts AT TIME ZONE 'Europe/Berlin')::text {_R} ORDER BY host, ts"),
    ("tz_round_trip",
     f"SELECT ts, (ts AT TIME ZONE 'UTC') AT TIME ZONE 'America/New_York' {_R} "
     "ORDER BY host, ts"),
    ("tz_local_new_york",
     f"SELECT host, ((ts AT TIME ZONE 'UTC') AT TIME ZONE 'America/New_York')::text {_R} "
     "ORDER BY host, ts"),
    ("tz_local_berlin",
     f"SELECT host, ((ts AT TIME ZONE 'UTC') AT TIME ZONE 'Europe/Berlin')::text {_R} "
     "ORDER BY host, ts"),
    ("tz_local_kolkata",
     f"SELECT ((ts AT TIME ZONE 'UTC') AT TIME ZONE 'Asia/Kolkata')::text {_R} "
     "ORDER BY host, ts"),
    ("tz_local_lord_howe",
     "SELECT ((timestamp '2026-04-04 15:00' + g * interval '15 minutes') AT TIME ZONE 'UTC' "
     "AT TIME ZONE 'Australia/Lord_Howe')::text FROM generate_series(0, 4) AS t(g) ORDER BY g"),
    ("tz_dst_gap_new_york",
     "SELECT (timestamp '2026-03-08 02:30' AT TIME ZONE 'America/New_York')::text, "
     "(timestamp '2026-03-08 01:59:59' AT TIME ZONE 'America/New_York')::text, "
     "(timestamp '2026-03-08 03:00' AT TIME ZONE 'America/New_York')::text"),
    ("tz_dst_overlap_new_york",
     "SELECT (timestamp '2026-11-01 01:30' AT TIME ZONE 'America/New_York')::text, "
     "(timestamp '2026-11-01 00:59' AT TIME ZONE 'America/New_York')::text, "
     "(timestamp '2026-11-01 02:00' AT TIME ZONE 'America/New_York')::text"),
    ("tz_dst_gap_berlin",
     "SELECT (timestamp '2026-03-29 02:15' AT TIME ZONE 'Europe/Berlin')::text, "
     "(timestamp '2026-10-25 02:15' AT TIME ZONE 'Europe/Berlin')::text"),
    ("tz_local_hour_buckets",
     f"SELECT date_trunc('hour', (ts AT TIME ZONE 'UTC') AT TIME ZONE 'America/New_York') AS "
     f"h, count(*) {_R} WHERE host = 'a' GROUP BY 1 ORDER BY 1"),
    ("tz_posix_offsets",
     "SELECT (timestamp '2026-01-01 00:00' AT TIME ZONE '+02')::text, "
     "(timestamp '2026-01-01 00:00' AT TIME ZONE 'UTC+3')::text, "
     "(timestamp '2026-01-01 00:00' AT TIME ZONE '-05:30')::text"),
    ("tz_interval_zone",
     "SELECT (timestamp '2026-01-01 00:00' AT TIME ZONE interval '+02:00')::text, "
     "(timestamptz '2026-01-01 00:00+00' AT TIME ZONE interval '-03:00')::text"),
    ("tz_literal_offsets",
     "SELECT timestamptz '2026-01-01 00:00+02', timestamptz '2026-01-01 00:00-05:30', "
     "timestamptz '2026-06-01 12:00 Europe/Berlin', timestamptz '2026-01-01 00:00Z'"),
    ("tz_literal_text_utc",
     "SELECT timestamptz '2026-01-01 00:00+02'::text, '2026-07-01 12:00 America/New_York'"
     "::timestamptz::text"),
    ("tz_unknown_zone", "SELECT timestamp '2026-01-01' AT TIME ZONE 'Nowhere/Zone'"),
    ("tz_compare_with_timestamp",
     "SELECT timestamptz '2026-01-01 00:00+00' = timestamp '2026-01-01 00:00', "
     "timestamptz '2026-01-01 01:00+01' = timestamp '2026-01-01 00:00'"),
    ("tz_minus_tz",
     "SELECT (timestamptz '2026-03-09 12:00+00' - timestamptz '2026-03-08 00:00+00')::text"),
    ("tz_extract_epoch",
     "SELECT extract(epoch FROM timestamptz '2026-01-01 00:00+02'), "
     "extract(hour FROM timestamptz '2026-01-01 00:00+02')"),
    ("tz_date_bin",
     f"SELECT date_bin(interval '1 hour', ts AT TIME ZONE 'UTC', timestamptz "
     f"'2026-01-01 00:30+00') {_R} ORDER BY host, ts"),
    ("tz_set_new_york", "SET TIME ZONE 'America/New_York'"),
    ("tz_session_text",
     "SELECT '2026-03-08 02:30'::timestamptz::text, '2026-11-01 01:30'::timestamptz::text, "
     "'2026-01-01 00:00+02'::timestamptz::text"),
    ("tz_session_day_arith",
     "SELECT (timestamptz '2026-03-07 12:00' + interval '1 day')::text, "
     "(timestamptz '2026-03-07 12:00' + interval '24 hours')::text, "
     "(timestamptz '2026-11-01 00:30' + interval '1 hour')::text"),
    ("tz_session_trunc",
     "SELECT date_trunc('day', timestamptz '2026-03-08 12:00')::text, "
     "date_trunc('day', timestamptz '2026-11-01 23:00')::text, "
     "date_trunc('month', timestamptz '2026-03-08 12:00')::text"),
    ("tz_session_casts",
     "SELECT (timestamp '2026-01-01 00:00')::timestamptz::text, "
     "(timestamptz '2026-01-01 05:00+00')::timestamp::text, "
     "(timestamptz '2026-01-01 03:00+00')::date::text"),
    ("tz_session_buckets",
     f"SELECT date_trunc('day', ts AT TIME ZONE 'UTC') AS d, count(*) {_R} GROUP BY 1 "
     "ORDER BY 1"),
    ("tz_show", "SHOW TIME ZONE"),
    ("tz_set_utc", "SET TIME ZONE 'UTC'"),
    ("tz_show_utc", "SHOW TIME ZONE"),
    # -- PostgreSQL's integer typing --
    ("int_types_literals",
     "SELECT pg_typeof(1), pg_typeof(2147483648), pg_typeof(1 + 1), "
     "pg_typeof(1::smallint + 1::smallint), pg_typeof(99999999999999999999)"),
    ("int_types_columns",
     f"SELECT pg_typeof(n + 1), pg_typeof(s + s), pg_typeof(n + b), pg_typeof(sum(n)), "
     f"pg_typeof(sum(b)), pg_typeof(avg(n)), pg_typeof(sum(s)) {_R} GROUP BY 1, 2, 3 LIMIT 1"),
    ("int_sum_div", f"SELECT host, sum(n) / 7, sum(n) % 7 {_R} GROUP BY host ORDER BY host"),
    ("int_avg_numeric", f"SELECT host, avg(n), avg(s), avg(b) {_R} GROUP BY host ORDER BY host"),
    ("int_avg_window",
     f"SELECT host, ts, avg(n) OVER (PARTITION BY host) {_R} ORDER BY host, ts"),
    ("int_overflow_int4", f"SELECT n * 2147483647 {_R} WHERE n > 1"),
    ("int_overflow_int2", f"SELECT s * 1000::smallint {_R}"),
    ("int_overflow_sum_ok", f"SELECT sum(b) {_R}"),
    ("int_overflow_bigint", f"SELECT b * 9000000000 {_R} WHERE b > 1000"),
    ("int_div_truncates",
     f"SELECT n / 3, -n / 3, n % 3, -n % 3 {_R} WHERE host = 'a' ORDER BY ts"),
    ("int_literal_min_div", "SELECT (-2147483648)::int / -1"),
    ("int_literal_overflow", "SELECT 2147483647 + 1"),
    ("int_bigint_ok", "SELECT 2147483647::bigint + 1, 2147483647 + 1::bigint"),
    ("int_extract_numeric",
     "SELECT extract(second FROM timestamp '2026-01-01 00:00:05.25'), "
     "extract(millisecond FROM timestamp '2026-01-01 00:00:05.25'), "
     "extract(epoch FROM timestamp '2026-01-01 00:00:01.5')::text"),
    # -- branches not taken --
    ("br_case_guard", f"SELECT host, CASE WHEN n = 0 THEN 0 ELSE 100 / n END {_R} "
                      "WHERE n IS NOT NULL ORDER BY host, ts"),
    ("br_case_false_constant", "SELECT CASE WHEN false THEN 1/0 ELSE 1 END"),
    ("br_coalesce_constant", "SELECT coalesce(1, 1/0)"),
    ("br_and_short_circuit", f"SELECT count(*) {_R} WHERE n <> 0 AND 100 / n > 5"),
    ("br_or_short_circuit", "SELECT true OR 1/0 = 1, false AND 1/0 = 1"),
    ("br_case_taken_raises", f"SELECT CASE WHEN n > 5 THEN 1/0 ELSE n END {_R}"),
    # the time type (time of day, no zone): literals, casts, comparison, arithmetic, EXTRACT
    ("time_literals_and_text",
     "SELECT TIME '10:30', TIME '07:05:01.250', CAST(TIME '23:59:59.999999' AS TEXT), "
     "CAST('  8:00 ' AS TIME)"),
    ("time_of_timestamps",
     "SELECT host, CAST(ts AS TIME) FROM tz_readings WHERE CAST(ts AS TIME) >= TIME '07:00' "
     "ORDER BY CAST(ts AS TIME), host"),
    ("time_group_by_hour_of_day",
     "SELECT extract(hour FROM CAST(ts AS TIME)) AS h, count(*) FROM tz_readings GROUP BY 1 "
     "ORDER BY 1"),
    ("time_min_max", "SELECT min(CAST(ts AS TIME)), max(CAST(ts AS TIME)) FROM tz_readings"),
    ("time_arithmetic",
     "SELECT TIME '23:30' + INTERVAL '45 minutes', TIME '01:00' - INTERVAL '2 hours', "
     "TIME '10:00' + INTERVAL '1 day 3 hours', TIME '18:15' - TIME '09:45', "
     "DATE '2026-03-08' + TIME '02:30', INTERVAL '90 seconds' + TIME '00:00'"),
    ("time_extract_fields",
     "SELECT extract(hour FROM TIME '13:45:30.5'), extract(minute FROM TIME '13:45:30.5'), "
     "extract(second FROM TIME '13:45:30.5'), extract(epoch FROM TIME '13:45:30.5'), "
     "date_part('minute', TIME '00:59')"),
    ("time_comparisons",
     "SELECT TIME '10:00' BETWEEN TIME '09:00' AND '11:00', TIME '10:00' = '10:00:00', "
     "TIME '00:00' < TIME '23:59', NULL::time IS NULL"),
    ("time_of_timestamptz_in_zone",
     "SELECT CAST(TIMESTAMPTZ '2026-03-08 10:30:00+00' AS TIME)"),
    ("time_bad_text", "SELECT CAST('25:61' AS TIME)"),
    ("time_extract_day_refused", "SELECT extract(day FROM TIME '10:00')"),
    ("time_compare_int_refused", "SELECT TIME '10:00' < 5"),
    ("time_to_timestamp_refused", "SELECT CAST(TIME '10:00' AS TIMESTAMP)"),
]
