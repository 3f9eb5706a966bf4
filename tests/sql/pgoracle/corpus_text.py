"""The PostgreSQL oracle's text-output section: how values *look* on the wire, not only
what they are. corpus.py's answers are compared as values (psycopg parses a timestamptz
into an instant, an interval into a timedelta), so a timestamptz printed in the wrong zone
or an interval printed in another style would pass there; here every date/time, interval
and numeric column is read as the server's text (`TEXT_TYPES`, psycopg's TextLoader) and
compared character for character with what PostgreSQL 15 printed (expected_text.json,
recorded by record.py with the main corpus).

The statements run in order on one connection of their own, with no tables: SET TIME
ZONE changes what follows (ParameterStatus and SHOW included), as it does in a psql
session. Names are stable; re-record after editing (record.py).
"""

# the types read as text: whatever has more than one way to be printed
TEXT_TYPES = ("timestamptz", "timestamp", "date", "interval", "numeric", "time")

_TS = ("(VALUES (1, timestamptz '2026-03-08 06:59:59+00'), (2, timestamptz '2026-03-08 "
       "07:00:00+00'), (3, timestamptz '2026-11-01 05:30:00.25+00'), (4, timestamptz "
       "'2026-11-01 06:30:00.000001+00'), (5, NULL), (6, timestamptz '1850-01-01 12:00+00'))"
       " AS t(k, ts)")
_IV = ("(VALUES (1, interval '1 year 2 mons 3 days 04:05:06'), (2, interval '-1 year'), "
       "(3, interval '0.5 seconds'), (4, interval '1 day -1 hour'), (5, interval '-1 day "
       "+1 hour'), (6, interval '-1 year 2 mons'), (7, interval '0'), (8, interval '-1 mons "
       "-1 day'), (9, interval '100 hours'), (10, interval '-0.000001 s'), (11, NULL), "
       "(12, interval '1 mon 1 day 1 sec'), (13, interval '2 years -3 days +00:00:00.75'), "
       "(14, interval '-1 years -2 mons +3 days -04:05:06.789'), (15, interval '1 year 1 mon'"
       "), (16, interval '23:59:59.999999'), (17, interval '-3 days'), (18, interval "
       "'1 day')) AS v(k, iv)")

STATEMENTS = [
    ("text_tz_show_utc", "SHOW TIME ZONE"),
    ("text_tz_utc", f"SELECT k, ts FROM {_TS} ORDER BY k"),
    ("text_tz_set_new_york", "SET TIME ZONE 'America/New_York'"),
    ("text_tz_show_new_york", "SHOW TimeZone"),
    ("text_tz_new_york", f"SELECT k, ts FROM {_TS} ORDER BY k"),
    ("text_tz_new_york_local", f"SELECT k, ts::timestamp, ts::date FROM {_TS} ORDER BY k"),
    ("text_tz_new_york_arith",
     "SELECT g, timestamptz '2026-03-07 12:00' + g * interval '12 hours', "
     "timestamptz '2026-03-07 12:00' + g * interval '1 day' FROM generate_series(0, 3) g "
     "ORDER BY g"),
    ("text_tz_new_york_trunc",
     f"SELECT k, date_trunc('day', ts), date_trunc('hour', ts) FROM {_TS} ORDER BY k"),
    ("text_tz_new_york_at_zone",
     f"SELECT k, ts AT TIME ZONE 'UTC', (ts AT TIME ZONE 'UTC') AT TIME ZONE 'Asia/Tokyo' "
     f"FROM {_TS} ORDER BY k"),
    ("text_tz_new_york_trunc_in_zone",
     f"SELECT k, date_trunc('day', ts, 'Asia/Tokyo'), date_trunc('hour', ts, 'Asia/Kolkata'), "
     f"date_trunc('month', ts::timestamp, 'UTC') FROM {_TS} ORDER BY k"),
    ("text_tz_set_kolkata", "SET TIME ZONE 'asia/kolkata'"),
    ("text_tz_show_kolkata", "SHOW TIME ZONE"),
    ("text_tz_kolkata", f"SELECT k, ts FROM {_TS} ORDER BY k"),
    ("text_tz_set_hours", "SET TIME ZONE -3.5"),
    ("text_tz_show_hours", "SHOW TIME ZONE"),
    ("text_tz_hours", f"SELECT k, ts FROM {_TS} ORDER BY k"),
    ("text_tz_set_posix", "SET TIME ZONE 'UTC+2'"),
    ("text_tz_show_posix", "SHOW TIME ZONE"),
    ("text_tz_posix", f"SELECT k, ts FROM {_TS} ORDER BY k"),
    ("text_tz_set_bad", "SET TIME ZONE 'Mars/Olympus_Mons'"),
    ("text_tz_show_after_bad", "SHOW TIME ZONE"),
    ("text_tz_set_london", "SET TIME ZONE 'Europe/London'"),
    ("text_tz_london_now_type", "SELECT pg_typeof(now()), now() IS NOT NULL"),
    ("text_tz_london", f"SELECT k, ts, ts::text FROM {_TS} ORDER BY k"),
    ("text_tz_reset", "RESET TIME ZONE"),
    ("text_tz_show_reset", "SHOW TIME ZONE"),
    ("text_tz_after_reset", f"SELECT k, ts FROM {_TS} ORDER BY k"),
    ("text_iv_literals", f"SELECT k, iv FROM {_IV} ORDER BY k"),
    ("text_iv_same_as_cast", f"SELECT k, iv::text FROM {_IV} ORDER BY k"),
    ("text_iv_negated", f"SELECT k, -iv FROM {_IV} ORDER BY k"),
    ("text_iv_arith",
     f"SELECT k, iv * 2, iv / 3, iv + interval '1 day 1 hour' FROM {_IV} ORDER BY k"),
    ("text_iv_justify",
     f"SELECT k, justify_hours(iv), justify_days(iv), justify_interval(iv) FROM {_IV} "
     "ORDER BY k"),
    ("text_iv_timestamp_difference",
     "SELECT g, timestamp '2026-03-08 00:00' - timestamp '2026-01-01 12:30:15.5' "
     "+ g * interval '7 hours', date '2026-03-01' - date '2026-01-01' FROM "
     "generate_series(-2, 2) g ORDER BY g"),
    ("text_iv_make_interval",
     "SELECT make_interval(1, 2, 3, 4, 5, 6, 7.5), make_interval(days => -10), "
     "make_interval(hours => 36, mins => -30)"),
    ("text_iv_aggregates",
     f"SELECT sum(iv), avg(iv), min(iv), max(iv) FROM {_IV}"),
    ("text_iv_literal_column_name", "SELECT interval '1 day', interval '90' minute"),
    ("text_iv_one_unit_and_a_time",
     "SELECT interval '3 days 04:05:06', interval '-1 day +02:00:00', interval '1 day 02:00', "
     "timestamp '1969-01-01' + interval '3 days 04:05:06'"),
    ("text_ts_fractions",
     "SELECT timestamp '2026-01-01 00:00:00.5', timestamp '2026-01-01 00:00:00.000001', "
     "timestamp '2026-01-01 00:00:00.120', timestamp '0044-03-15 12:00', date '0001-01-01'"),
]
