"""The statements of the PostgreSQL oracle: everyday application and analyst SQL.

`SETUP` builds the same three tables on both systems (plain SQL both accept; kudusql
hash-partitions a table without a PARTITION BY clause by its key). `STATEMENTS` is a list of
(name, sql) run in order on one connection after SETUP: read-only queries first, then
writes, each write followed by the query that shows what it did. Names are stable: the
recorded answers (expected.json) and the deviation list (test_pg_oracle.DEVIATIONS) refer
to them. A statement's answer is its rows (compared as a multiset unless the statement has
an ORDER BY that fixes the order of every row), the row count of a write, or the SQLSTATE
of its error.

Add statements at the end of their section; re-record with
`python -m tests.sql.pgoracle.record --dsn postgresql://postgres@127.0.0.1:55432/postgres`
(see record.py for starting a PostgreSQL 15).
"""

SETUP = [
    """CREATE TABLE emp (
        id INT PRIMARY KEY, name TEXT, dept TEXT, salary NUMERIC(10,2),
        bonus DOUBLE PRECISION, hired DATE, last_login TIMESTAMP, active BOOLEAN,
        level SMALLINT, manager_id INT, rating REAL, code VARCHAR(8))""",
    """CREATE TABLE dept (name TEXT PRIMARY KEY, budget BIGINT, city TEXT)""",
    """CREATE TABLE sales (
        id BIGINT PRIMARY KEY, emp_id INT, day DATE, amount NUMERIC(12,2), qty INT,
        note TEXT)""",
    """INSERT INTO emp VALUES
        (1, 'Alice', 'eng', 120000.00, 5000.5, '2015-03-01', '2024-06-01 09:15:00', true, 3, NULL, 4.5, 'A1'),
        (2, 'Bob', 'eng', 95000.50, NULL, '2018-07-15', '2024-06-02 17:45:30', true, 2, 1, 3.75, 'B2'),
        (3, 'Carol', 'sales', 70000.00, 12000.25, '2019-01-10', NULL, true, 2, 1, 4.0, 'C3'),
        (4, 'Dan', 'sales', 65000.00, 0, '2020-11-30', '2023-12-31 23:59:59', false, 1, 3, 2.5, NULL),
        (5, 'Eve', 'ops', NULL, 300.0, '2021-02-28', '2024-01-01 00:00:00', true, 1, 1, NULL, 'E5'),
        (6, 'Frank', NULL, 55000.00, -100.0, '2016-05-05', '2022-08-08 08:08:08', NULL, NULL, 2, 1.25, 'F6'),
        (7, 'grace', 'eng', 120000.00, 5000.5, '2015-03-01', '2024-06-01 09:15:00', true, 3, 1, 4.5, 'g7'),
        (8, 'Heidi', 'hr', 58000.75, NULL, NULL, NULL, false, 1, 5, 3.0, ''),
        (9, 'Ivan', 'eng', 101000.00, 2500.0, '2022-09-01', '2024-05-20 12:00:00', true, 2, 2, 3.5, 'I9'),
        (10, 'Judy', 'ops', 47000.00, 150.75, '2023-04-17', '2024-06-03 06:30:00', true, 1, 5, 2.75, 'J10'),
        (11, NULL, 'eng', 88000.00, 1000.0, '2017-12-24', '2024-02-29 14:00:00', true, 2, 1, 3.25, 'N11'),
        (12, 'Mallory', 'sales', 0.00, 0.0, '2024-02-29', NULL, false, 0, 3, 0.0, 'M12'),
        (13, 'O''Brien', 'hr', 61000.00, 800.0, '2019-10-31', '2024-03-15 10:10:10', true, 2, 8, 3.9, 'O13'),
        (14, 'Peggy', 'ops', 47000.00, 150.75, '2023-04-17', '2024-06-03 06:30:00', true, 1, 5, 2.75, 'P14'),
        (15, 'Zoë', 'eng', 150000.99, 9999.99, '2010-01-01', '2024-06-04 20:00:00', true, 4, NULL, 5.0, 'Z15'),
        (16, 'alice', 'research', 99000.00, NULL, '2020-06-15', '2024-04-01 11:11:11', true, 3, 15, 4.25, 'a16')""",
    """INSERT INTO dept VALUES
        ('eng', 2000000, 'Berlin'), ('sales', 800000, 'Paris'), ('ops', 300000, NULL),
        ('hr', 150000, 'Berlin'), ('legal', 500000, 'London')""",
    """INSERT INTO sales
        SELECT i, (i * 7) % 17, DATE '2024-01-01' + (i * 5) % 150,
               CAST(((i * 37) % 1000) * 1.25 AS NUMERIC(12,2)),
               CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 3) % 9 END,
               CASE WHEN i % 4 = 0 THEN 'promo' WHEN i % 4 = 1 THEN NULL ELSE 'regular' END
        FROM generate_series(1, 60) AS s(i)""",
]

STATEMENTS: list[tuple[str, str]] = [
    # -- filters and NULL logic --
    ("filter_ne_text_skips_null", "SELECT id FROM emp WHERE dept <> 'eng'"),
    ("filter_null_and", "SELECT id FROM emp WHERE dept = 'eng' AND bonus > 1000"),
    ("filter_null_or", "SELECT id FROM emp WHERE bonus > 1000 OR salary > 100000"),
    ("filter_not_null_comparison", "SELECT id FROM emp WHERE NOT (bonus > 1000)"),
    ("filter_three_valued_and", "SELECT id, bonus > 1000 AND active FROM emp"),
    ("filter_null_literal_logic",
     "SELECT NULL AND false, NULL AND true, NULL OR true, NULL OR false, NOT NULL::boolean"),
    ("filter_is_null", "SELECT id FROM emp WHERE bonus IS NULL"),
    ("filter_eq_null_matches_nothing", "SELECT count(*) FROM emp WHERE dept = NULL"),
    ("filter_is_distinct_from", "SELECT id FROM emp WHERE dept IS DISTINCT FROM 'eng'"),
    ("filter_is_not_distinct_from_null",
     "SELECT id FROM emp WHERE dept IS NOT DISTINCT FROM NULL"),
    ("filter_between_numeric", "SELECT id FROM emp WHERE salary BETWEEN 60000 AND 100000"),
    ("filter_not_between", "SELECT id FROM emp WHERE salary NOT BETWEEN 60000 AND 100000"),
    ("filter_between_dates",
     "SELECT id FROM emp WHERE hired BETWEEN '2019-01-01' AND '2021-12-31'"),
    ("filter_in_list_with_null", "SELECT id FROM emp WHERE dept IN ('hr', NULL)"),
    ("filter_not_in_list", "SELECT id FROM emp WHERE dept NOT IN ('eng', 'sales')"),
    ("filter_not_in_list_with_null", "SELECT id FROM emp WHERE dept NOT IN ('eng', NULL)"),
    ("filter_in_select_list_null",
     "SELECT id, dept IN ('eng', NULL), dept NOT IN ('eng', NULL) FROM emp"),
    ("filter_in_numeric_mixed",
     "SELECT id FROM emp WHERE salary IN (47000, 120000.00, 58000.75)"),
    ("filter_like_prefix", "SELECT id FROM emp WHERE name LIKE 'A%'"),
    ("filter_like_underscore", "SELECT id FROM emp WHERE name LIKE '_a%'"),
    ("filter_ilike", "SELECT id FROM emp WHERE name ILIKE 'a%'"),
    ("filter_ilike_underscore_non_ascii", "SELECT id FROM emp WHERE name ILIKE 'zo_'"),
    ("filter_not_like", "SELECT id FROM emp WHERE name NOT LIKE '%e%'"),
    ("filter_like_apostrophe", "SELECT id FROM emp WHERE name LIKE '%''%'"),
    ("filter_like_two_chars", "SELECT id FROM emp WHERE code LIKE '__'"),
    ("filter_like_escape",
     "SELECT 'a_b' LIKE 'a\\_b', 'axb' LIKE 'a\\_b', '50%' LIKE '50!%' ESCAPE '!'"),
    ("filter_empty_string_not_null",
     "SELECT id, code = '', code IS NULL FROM emp WHERE id IN (4, 8)"),
    ("filter_numeric_eq_int", "SELECT id FROM emp WHERE salary = 120000"),
    ("filter_double_eq_decimal", "SELECT id FROM emp WHERE bonus = 5000.5"),
    ("filter_real_eq_exact", "SELECT id FROM emp WHERE rating = 4.5"),
    ("filter_real_eq_inexact_numeric", "SELECT id FROM emp WHERE rating = 3.9"),
    ("filter_real_eq_real_literal", "SELECT id FROM emp WHERE rating = REAL '3.9'"),
    ("filter_date_vs_text", "SELECT id FROM emp WHERE hired > '2020-01-01'"),
    ("filter_date_vs_timestamp",
     "SELECT id FROM emp WHERE hired < TIMESTAMP '2015-03-01 12:00:00'"),
    ("filter_date_eq_timestamp_midnight",
     "SELECT id FROM emp WHERE hired = TIMESTAMP '2015-03-01 00:00:00'"),
    ("filter_timestamp_range",
     "SELECT id FROM emp WHERE last_login >= '2024-06-01' AND last_login < '2024-06-03'"),
    ("filter_bool_column", "SELECT id FROM emp WHERE active"),
    ("filter_bool_not", "SELECT id FROM emp WHERE NOT active"),
    ("filter_bool_is_not_true", "SELECT id FROM emp WHERE active IS NOT TRUE"),
    ("filter_and_or_precedence",
     "SELECT id FROM emp WHERE dept = 'eng' OR dept = 'hr' AND salary > 60000"),

    # -- CASE, COALESCE, NULLIF, GREATEST, LEAST --
    ("cond_case_searched",
     "SELECT id, CASE WHEN salary >= 100000 THEN 'high' WHEN salary >= 60000 THEN 'mid' "
     "ELSE 'low' END FROM emp"),
    ("cond_case_simple",
     "SELECT id, CASE dept WHEN 'eng' THEN 1 WHEN 'sales' THEN 2 ELSE 0 END FROM emp"),
    ("cond_case_no_else", "SELECT id, CASE WHEN bonus > 1000 THEN 'big' END FROM emp"),
    ("cond_case_when_null_never_matches",
     "SELECT id, CASE dept WHEN NULL THEN 'null' ELSE 'other' END FROM emp"),
    ("cond_case_in_order_by",
     "SELECT id, dept FROM emp "
     "ORDER BY CASE dept WHEN 'hr' THEN 0 WHEN 'eng' THEN 1 ELSE 2 END, id"),
    ("cond_case_numeric_result", "SELECT id, CASE WHEN id < 5 THEN 1 ELSE 2.5 END FROM emp"),
    ("cond_case_count",
     "SELECT sum(CASE WHEN active THEN 1 ELSE 0 END), "
     "sum(CASE WHEN NOT active THEN 1 END), count(CASE WHEN active IS NULL THEN 1 END) FROM emp"),
    ("cond_coalesce_bonus", "SELECT id, coalesce(bonus, 0) FROM emp"),
    ("cond_coalesce_chain", "SELECT id, coalesce(name, code, 'unknown') FROM emp"),
    ("cond_coalesce_all_null", "SELECT coalesce(NULL::int, NULL::int), coalesce(NULL, 'x')"),
    ("cond_nullif_zero", "SELECT id, nullif(bonus, 0) FROM emp"),
    ("cond_nullif_empty_string", "SELECT id, nullif(code, '') FROM emp"),
    ("cond_nullif_safe_division", "SELECT id, round(salary / nullif(level, 0), 2) FROM emp"),
    ("cond_greatest", "SELECT id, greatest(bonus, 1000) FROM emp"),
    ("cond_least", "SELECT id, least(salary, 100000) FROM emp"),
    ("cond_greatest_least_ignore_null",
     "SELECT greatest(NULL, 1, 2), least(NULL, 1, 2), greatest(NULL::int, NULL)"),
    ("cond_greatest_mixed_types", "SELECT id, greatest(level, rating) FROM emp"),

    # -- casts --
    ("cast_numeric_to_int", "SELECT id, salary::int FROM emp"),
    ("cast_double_to_int", "SELECT id, bonus::int FROM emp"),
    ("cast_real_to_int", "SELECT id, rating::int FROM emp"),
    ("cast_numeric_halves_to_int",
     "SELECT 2.5::int, (-2.5)::int, 3.5::int, CAST(0.5 AS numeric(3,0))"),
    ("cast_double_halves_to_int",
     "SELECT 2.5::float8::int, 3.5::float8::int, (-2.5)::float8::int, 0.5::float8::int"),
    ("cast_double_to_numeric_scale", "SELECT id, CAST(bonus AS numeric(10,1)) FROM emp"),
    ("cast_numeric_rounding",
     "SELECT CAST(1.005 AS numeric(5,2)), CAST(-1.005 AS numeric(5,2)), "
     "CAST(2.675 AS numeric(4,2)), CAST(99.999 AS numeric(5,2))"),
    ("cast_text_to_date", "SELECT '2024-02-29'::date, CAST('2023-12-31' AS date) + 1"),
    ("cast_text_to_bool",
     "SELECT 'true'::boolean, 'f'::boolean, 'yes'::boolean, '0'::boolean, 'on'::boolean"),
    ("cast_int_to_text_concat", "SELECT id, id::text || '-' || level::text FROM emp"),
    ("cast_text_to_int", "SELECT '42'::int + 1, CAST(' 7 ' AS integer), '-3'::bigint"),
    ("cast_text_to_numeric", "SELECT '3.14159'::numeric(5,2), '1e3'::numeric, '-0.5'::numeric"),
    ("cast_double_to_numeric", "SELECT id, bonus::numeric FROM emp"),
    ("cast_timestamp_to_date", "SELECT id, last_login::date FROM emp"),
    ("cast_varchar_truncates", "SELECT id, CAST(name AS varchar(3)) FROM emp"),
    ("cast_numeric_to_text", "SELECT id, salary::text FROM emp"),
    ("cast_double_to_text", "SELECT id, bonus::text FROM emp"),
    ("cast_real_to_double", "SELECT id, rating::double precision FROM emp"),
    ("cast_timestamp_to_text", "SELECT id, last_login::text FROM emp"),

    # -- string functions --
    ("str_upper_lower", "SELECT id, upper(name), lower(name) FROM emp"),
    ("str_length", "SELECT id, length(name), char_length(code), octet_length(name) FROM emp"),
    ("str_length_literals",
     "SELECT length(''), length('  padded  '), char_length('Zoë'), octet_length('Zoë')"),
    ("str_substr", "SELECT id, substr(name, 2, 3) FROM emp"),
    ("str_substring_from_for", "SELECT id, substring(name from 2 for 3) FROM emp"),
    ("str_substring_from", "SELECT id, substring(name from 3) FROM emp"),
    ("str_substr_edges",
     "SELECT substr('hello', 0, 3), substr('hello', -1, 3), substr('hello', 4, 10), "
     "substr('hello', 9)"),
    ("str_substring_non_ascii", "SELECT substring('Zoë' from 3 for 1), substr('Zoë', 2)"),
    ("str_position", "SELECT id, position('a' in name) FROM emp"),
    ("str_strpos", "SELECT id, strpos(name, 'e'), strpos(code, '') FROM emp"),
    ("str_trim_spaces", "SELECT trim('  hi  '), ltrim('  hi  '), rtrim('  hi  ')"),
    ("str_trim_both_leading_trailing",
     "SELECT trim(both 'x' from 'xxhixx'), trim(leading 'x' from 'xxhixx'), "
     "trim(trailing 'x' from 'xxhixx')"),
    ("str_ltrim_rtrim_chars",
     "SELECT ltrim('000123', '0'), rtrim('abc123', '0123456789'), btrim('--a-b--', '-')"),
    ("str_replace", "SELECT id, replace(name, 'a', 'A') FROM emp"),
    ("str_replace_edges", "SELECT replace('banana', 'an', ''), replace('banana', '', 'x')"),
    ("str_translate", "SELECT id, translate(code, '0123456789', '') FROM emp"),
    ("str_concat_skips_null", "SELECT id, concat(name, '-', dept, '-', level) FROM emp"),
    ("str_concat_mixed_types", "SELECT concat(1, 2.50, true, NULL, DATE '2024-01-02')"),
    ("str_concat_ws", "SELECT id, concat_ws(', ', name, dept, code) FROM emp"),
    ("str_pipe_null_propagates", "SELECT id, name || '/' || dept FROM emp"),
    ("str_pipe_with_numbers", "SELECT id, 'emp#' || id || ':' || salary FROM emp"),
    ("str_left_right", "SELECT id, left(name, 2), right(name, 2) FROM emp"),
    ("str_left_right_negative", "SELECT id, left(name, -2), right(name, -2) FROM emp"),
    ("str_lpad_rpad", "SELECT id, lpad(code, 5, '*'), rpad(code, 5) FROM emp"),
    ("str_pad_truncates", "SELECT lpad('hello', 3), rpad('hello', 3), lpad('7', 3, '0')"),
    ("str_split_part",
     "SELECT split_part('a,b,,d', ',', 2), split_part('a,b,,d', ',', 3), "
     "split_part('a,b,,d', ',', 9)"),
    ("str_split_part_negative", "SELECT split_part('2024-06-01', '-', -1)"),
    ("str_initcap", "SELECT id, initcap(name) FROM emp"),
    ("str_initcap_words", "SELECT initcap('hello wORLD o''neil-smith 2nd')"),
    ("str_reverse", "SELECT id, reverse(name) FROM emp"),
    ("str_repeat", "SELECT repeat('ab', 3), repeat('x', 0), repeat('x', -1)"),
    ("str_starts_with", "SELECT id FROM emp WHERE starts_with(name, 'A')"),
    ("str_md5", "SELECT id, md5(name) FROM emp"),
    ("str_ascii_chr", "SELECT ascii('A'), chr(66), ascii('ë'), chr(233)"),
    ("str_regexp_replace", "SELECT id, regexp_replace(code, '[0-9]+', '#') FROM emp"),
    ("str_regex_match", "SELECT id FROM emp WHERE code ~ '^[A-Z][0-9]$'"),
    ("str_lower_eq", "SELECT id FROM emp WHERE lower(name) = 'alice'"),
    ("str_compare_less_than", "SELECT id FROM emp WHERE name < 'M'"),
    ("str_group_by_upper", "SELECT upper(name), count(*) FROM emp GROUP BY upper(name)"),
    ("str_string_agg_ordered", "SELECT string_agg(name, ', ' ORDER BY name) FROM emp"),
    ("str_string_agg_by_dept",
     "SELECT dept, string_agg(code, '|' ORDER BY id) FROM emp GROUP BY dept"),
    ("str_string_agg_desc", "SELECT string_agg(code, '' ORDER BY id DESC) FROM emp"),

    # -- math --
    ("math_int_division", "SELECT 7 / 2, -7 / 2, 7 / -2, 1 / 3"),
    ("math_modulo", "SELECT 7 % 3, -7 % 3, 7 % -3, mod(-7, 3), mod(7.5, 2)"),
    ("math_int_division_columns", "SELECT id, id / 3, id % 3, level / 2 FROM emp"),
    ("math_numeric_division", "SELECT id, salary / 12 FROM emp"),
    ("math_numeric_division_rounded", "SELECT id, round(salary / 12, 2) FROM emp"),
    ("math_double_division", "SELECT id, bonus / 3 FROM emp"),
    ("math_decimal_literal_division", "SELECT 1 / 3.0, 2 / 3::numeric, 10 / 4.0, 10 / 4"),
    ("math_numeric_plus_double", "SELECT id, salary + bonus FROM emp"),
    ("math_smallint_times_numeric", "SELECT id, level * salary FROM emp"),
    ("math_bigint_times_int", "SELECT name, budget * 1000 FROM dept"),
    ("math_abs", "SELECT id, abs(bonus), abs(-level), abs(salary - 100000) FROM emp"),
    ("math_round_numeric_halves",
     "SELECT round(2.5), round(-2.5), round(3.5), round(0.5), round(1.45, 1), round(-1.45, 1)"),
    ("math_round_double_halves",
     "SELECT round(2.5::float8), round(-2.5::float8), round(3.5::float8), round(0.5::float8)"),
    ("math_round_column_digits", "SELECT id, round(salary / 7, 2), round(salary) FROM emp"),
    ("math_round_negative_digits",
     "SELECT id, round(salary, -3), round(123456.789, -2) FROM emp"),
    ("math_round_double_column", "SELECT id, round(bonus), round(bonus::numeric, 1) FROM emp"),
    ("math_ceil_floor",
     "SELECT id, ceil(bonus / 1000), floor(bonus / 1000), ceiling(salary / 1000) FROM emp"),
    ("math_ceil_floor_negative",
     "SELECT ceil(-2.5), floor(-2.5), ceil(2.0001), floor(-0.0001), ceil(-0.5::float8)"),
    ("math_trunc",
     "SELECT trunc(2.789, 2), trunc(-2.789), trunc(-2.789::float8), trunc(1234.5, -2)"),
    ("math_trunc_column", "SELECT id, trunc(salary / 7, 1) FROM emp"),
    ("math_power", "SELECT power(2, 10), power(2.0, 10), 2 ^ 0.5, power(9, 0.5)"),
    ("math_sqrt_cbrt", "SELECT sqrt(16), sqrt(2), sqrt(2.0), cbrt(27), cbrt(-8)"),
    ("math_sqrt_column", "SELECT id, sqrt(bonus) FROM emp WHERE bonus >= 0"),
    ("math_exp_ln_log", "SELECT exp(1), ln(10), log(100), log(2, 8), log(10, 1000)"),
    ("math_ln_column", "SELECT id, ln(bonus) FROM emp WHERE bonus > 0"),
    ("math_sign", "SELECT id, sign(bonus), sign(salary) FROM emp"),
    ("math_div_function", "SELECT div(7, 2), div(-7, 2), div(7.5, 2)"),
    ("math_numeric_exact_sum", "SELECT 0.1 + 0.2, 0.1 + 0.2 = 0.3"),
    ("math_double_inexact_sum",
     "SELECT 0.1::float8 + 0.2::float8, 0.1::float8 + 0.2::float8 = 0.3::float8"),
    ("math_operator_precedence",
     "SELECT 2 + 3 * 4, (2 + 3) * 4, 2 ^ 3 ^ 2, -2 ^ 2, 10 - 4 - 3, 2 * 3 % 4"),
    ("math_unary_minus", "SELECT id, -salary, -bonus, -level FROM emp"),
    ("math_real_arithmetic", "SELECT id, rating * 2, rating + 0.5 FROM emp"),
    ("math_int_avg_vs_division", "SELECT sum(level) / count(level), avg(level) FROM emp"),
    ("math_percent_rounded", "SELECT id, round(100 * salary / 150000.99, 3) FROM emp"),

    # -- date and time --
    ("dt_extract_year_month_day",
     "SELECT id, extract(year from hired), extract(month from hired), "
     "extract(day from hired) FROM emp"),
    ("dt_extract_dow_doy",
     "SELECT id, extract(dow from hired), extract(isodow from hired), "
     "extract(doy from hired) FROM emp"),
    ("dt_extract_quarter_week",
     "SELECT id, extract(quarter from hired), extract(week from hired) FROM emp"),
    ("dt_extract_epoch_timestamp", "SELECT id, extract(epoch from last_login) FROM emp"),
    ("dt_extract_time_fields",
     "SELECT id, extract(hour from last_login), extract(minute from last_login), "
     "extract(second from last_login) FROM emp"),
    ("dt_date_part",
     "SELECT id, date_part('year', hired), date_part('month', last_login), "
     "date_part('dow', last_login) FROM emp"),
    ("dt_date_trunc_month_timestamp", "SELECT id, date_trunc('month', last_login) FROM emp"),
    ("dt_date_trunc_month_date_cast", "SELECT id, date_trunc('month', hired)::date FROM emp"),
    ("dt_date_trunc_date_argument", "SELECT date_trunc('month', DATE '2024-02-29')"),
    ("dt_date_trunc_week", "SELECT id, date_trunc('week', last_login) FROM emp"),
    ("dt_date_trunc_quarter_year",
     "SELECT id, date_trunc('quarter', last_login), date_trunc('year', last_login) FROM emp"),
    ("dt_date_trunc_day_hour",
     "SELECT id, date_trunc('day', last_login), date_trunc('hour', last_login) FROM emp"),
    ("dt_date_plus_integer", "SELECT id, hired + 30, hired - 1 FROM emp"),
    ("dt_date_minus_date", "SELECT id, DATE '2024-06-01' - hired FROM emp"),
    ("dt_date_plus_interval", "SELECT id, hired + INTERVAL '1 month' FROM emp"),
    ("dt_month_end_interval",
     "SELECT DATE '2024-01-31' + INTERVAL '1 month', DATE '2024-02-29' + INTERVAL '1 year', "
     "DATE '2024-03-31' - INTERVAL '1 month'"),
    ("dt_leap_day_plus_days",
     "SELECT DATE '2024-02-28' + 1, DATE '2023-02-28' + 1, DATE '2024-12-31' + 1"),
    ("dt_timestamp_minus_timestamp",
     "SELECT id, last_login - TIMESTAMP '2024-01-01 00:00:00' FROM emp"),
    ("dt_timestamp_minus_date_epoch",
     "SELECT id, extract(epoch from last_login - hired) FROM emp"),
    ("dt_timestamp_plus_interval",
     "SELECT id, last_login + INTERVAL '90 minutes', last_login - INTERVAL '1 day 2 hours' "
     "FROM emp"),
    ("dt_interval_arithmetic",
     "SELECT INTERVAL '1 day' * 3, INTERVAL '2 hours' + INTERVAL '30 minutes', "
     "INTERVAL '1 hour' / 4"),
    ("dt_interval_compare", "SELECT id FROM emp WHERE last_login - hired > INTERVAL '3000 days'"),
    ("dt_make_date", "SELECT make_date(2024, 2, 29), make_date(2023, 12, 31) + 1"),
    ("dt_to_char_date",
     "SELECT id, to_char(hired, 'YYYY-MM-DD'), to_char(hired, 'DD/MM/YYYY'), "
     "to_char(hired, 'YYYY-MM') FROM emp"),
    ("dt_to_char_month_names",
     "SELECT id, to_char(hired, 'Mon DD, YYYY'), to_char(hired, 'FMMonth') FROM emp"),
    ("dt_to_char_timestamp",
     "SELECT id, to_char(last_login, 'YYYY-MM-DD HH24:MI:SS'), "
     "to_char(last_login, 'HH12:MI AM') FROM emp"),
    ("dt_to_date", "SELECT to_date('05/03/2024', 'DD/MM/YYYY'), to_date('20240229', 'YYYYMMDD')"),
    ("dt_age_interval", "SELECT id, age(TIMESTAMP '2024-06-01', hired::timestamp) FROM emp"),
    ("dt_age_years",
     "SELECT id, extract(year from age(TIMESTAMP '2024-06-01', hired::timestamp)) FROM emp"),
    ("dt_extract_from_interval",
     "SELECT extract(day from INTERVAL '3 days 4 hours'), "
     "extract(hour from INTERVAL '3 days 4 hours'), extract(epoch from INTERVAL '1 day')"),
    ("dt_literal_forms",
     "SELECT TIMESTAMP '2024-06-01 09:15', '2024-06-01T09:15:00'::timestamp, DATE '2024-6-1'"),
    ("dt_group_by_month",
     "SELECT date_trunc('month', day)::date AS m, count(*), sum(amount) FROM sales GROUP BY 1"),
    ("dt_group_by_hire_year",
     "SELECT date_trunc('year', hired)::date, count(*) FROM emp GROUP BY 1"),
    ("dt_sales_span", "SELECT max(day) - min(day), min(day), max(day) FROM sales"),
    ("dt_to_char_every_date_pattern",
     "SELECT d, to_char(d, 'YYYY YYY YY Y IYYY|MM Mon MON mon Month MONTH month|DD DDD D ID "
     "Day DAY day Dy DY dy|IW WW Q CC J|FMDD FMMM FMMonth FMDay') "
     "FROM (SELECT DATE '2020-12-25' + i * 3 AS d FROM generate_series(0, 250) AS s(i)) x "
     "ORDER BY d"),
    ("dt_to_char_every_time_pattern",
     "SELECT ts, to_char(ts, 'HH HH12 HH24 MI SS MS US AM am PM pm A.M. p.m.|FMHH12:MI "
     "FMHH24 FMSS \"at\" HH24\\h') FROM (SELECT CAST('2024-01-' || 1 + i % 28 || ' ' || "
     "i % 24 || ':' || (i * 7) % 60 || ':' || (i * 13) % 60 || '.' || (i * 37) % 1000 "
     "AS TIMESTAMP) AS ts FROM generate_series(0, 120) AS s(i)) x ORDER BY ts"),
    ("dt_to_date_round_trip",
     "SELECT count(*), count(*) FILTER (WHERE to_date(to_char(hired, 'DD Mon YYYY'), "
     "'DD Mon YYYY') = hired), count(*) FILTER (WHERE to_timestamp(to_char(last_login, "
     "'YYYY-MM-DD HH24:MI:SS'), 'YYYY-MM-DD HH24:MI:SS') = last_login) FROM emp"),

    # -- aggregates --
    ("agg_count_star", "SELECT count(*) FROM emp"),
    ("agg_count_columns",
     "SELECT count(name), count(dept), count(salary), count(bonus), count(hired), "
     "count(active), count(code) FROM emp"),
    ("agg_count_distinct",
     "SELECT count(DISTINCT dept), count(DISTINCT salary), count(DISTINCT bonus) FROM emp"),
    ("agg_sum_types",
     "SELECT sum(salary), sum(bonus), sum(level), sum(rating), sum(id) FROM emp"),
    ("agg_sum_bigint", "SELECT sum(budget) FROM dept"),
    ("agg_sum_distinct", "SELECT sum(DISTINCT salary), sum(DISTINCT level) FROM emp"),
    ("agg_avg_numeric", "SELECT avg(salary) FROM emp"),
    ("agg_avg_integer", "SELECT avg(level), avg(id) FROM emp"),
    ("agg_avg_double", "SELECT avg(bonus), avg(rating) FROM emp"),
    ("agg_min_max_numbers",
     "SELECT min(salary), max(salary), min(bonus), max(bonus), min(level), max(level), "
     "min(rating), max(rating) FROM emp"),
    ("agg_min_max_text", "SELECT min(name), max(name), min(code), max(code) FROM emp"),
    ("agg_min_max_dates",
     "SELECT min(hired), max(hired), min(last_login), max(last_login) FROM emp"),
    ("agg_bool_and_or_every", "SELECT bool_and(active), bool_or(active), every(active) FROM emp"),
    ("agg_string_agg_order_desc",
     "SELECT dept, string_agg(name, ',' ORDER BY salary DESC, id) FROM emp GROUP BY dept"),
    ("agg_string_agg_distinct", "SELECT string_agg(DISTINCT dept, ',' ORDER BY dept) FROM emp"),
    ("agg_array_agg", "SELECT dept, array_agg(id ORDER BY id) FROM emp GROUP BY dept"),
    ("agg_array_agg_text_with_null",
     "SELECT array_agg(name ORDER BY id) FROM emp WHERE dept = 'eng'"),
    ("agg_stddev_variance_double",
     "SELECT stddev(bonus), variance(bonus), stddev_pop(bonus), var_pop(bonus) FROM emp"),
    ("agg_stddev_variance_numeric_rounded",
     "SELECT round(stddev(salary), 4), round(variance(salary), 4), "
     "round(stddev_pop(salary), 4), round(var_pop(salary), 4) FROM emp"),
    ("agg_stddev_smallint", "SELECT stddev_samp(level), var_samp(level) FROM emp"),
    ("agg_stddev_single_row", "SELECT stddev(salary), stddev_pop(salary) FROM emp WHERE id = 1"),
    ("agg_filter",
     "SELECT count(*) FILTER (WHERE active), sum(salary) FILTER (WHERE dept = 'eng'), "
     "avg(bonus) FILTER (WHERE bonus > 0) FROM emp"),
    ("agg_filter_by_group",
     "SELECT dept, count(*) FILTER (WHERE level >= 2), count(*) FROM emp GROUP BY dept"),
    ("agg_empty_input",
     "SELECT count(*), count(salary), sum(salary), avg(salary), max(name), bool_and(active), "
     "string_agg(name, ',' ORDER BY name) FROM emp WHERE id < 0"),
    ("agg_empty_input_group_by", "SELECT dept, count(*) FROM emp WHERE id < 0 GROUP BY dept"),
    ("agg_group_by_null_group", "SELECT dept, count(*), sum(salary) FROM emp GROUP BY dept"),
    ("agg_group_by_expression",
     "SELECT extract(year from hired) AS y, count(*) FROM emp GROUP BY extract(year from hired)"),
    ("agg_group_by_ordinal", "SELECT dept, active, count(*) FROM emp GROUP BY 1, 2"),
    ("agg_group_by_alias",
     "SELECT coalesce(dept, 'none') AS d, count(*) FROM emp GROUP BY d"),
    ("agg_having_count", "SELECT dept, count(*) FROM emp GROUP BY dept HAVING count(*) >= 3"),
    ("agg_having_avg",
     "SELECT dept, round(avg(salary), 2) FROM emp GROUP BY dept HAVING avg(salary) > 70000"),
    ("agg_having_without_group_by", "SELECT count(*) FROM emp HAVING count(*) > 100"),
    ("agg_group_order_by_count",
     "SELECT dept, count(*) AS n FROM emp GROUP BY dept ORDER BY n DESC, dept NULLS LAST"),
    ("agg_sales_per_emp",
     "SELECT emp_id, count(*), sum(amount), sum(qty) FROM sales GROUP BY emp_id"),
    ("agg_sales_by_note",
     "SELECT note, count(*), count(qty), round(avg(qty), 3) FROM sales GROUP BY note"),
    ("agg_sum_case",
     "SELECT sum(CASE WHEN note = 'promo' THEN amount ELSE 0 END), sum(amount) FROM sales"),
    ("agg_percentile",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY salary), "
     "percentile_disc(0.5) WITHIN GROUP (ORDER BY salary) FROM emp"),
    ("agg_rollup", "SELECT dept, active, count(*) FROM emp GROUP BY ROLLUP (dept, active)"),
    ("agg_cube_grouping",
     "SELECT dept, active, grouping(dept, active), count(*) FROM emp "
     "WHERE dept IN ('eng', 'hr') GROUP BY CUBE (dept, active)"),
    ("agg_grouping_sets",
     "SELECT dept, level, sum(salary) FROM emp GROUP BY GROUPING SETS ((dept), (level), ())"),

    # -- window functions --
    ("win_row_number",
     "SELECT id, row_number() OVER (ORDER BY salary DESC NULLS LAST, id) FROM emp"),
    ("win_row_number_partition",
     "SELECT id, row_number() OVER (PARTITION BY dept ORDER BY hired, id) FROM emp"),
    ("win_rank_dept", "SELECT id, rank() OVER (PARTITION BY dept ORDER BY salary DESC) FROM emp"),
    ("win_dense_rank", "SELECT id, dense_rank() OVER (ORDER BY salary) FROM emp"),
    ("win_rank_vs_dense_rank_ties",
     "SELECT id, rank() OVER w, dense_rank() OVER w, row_number() OVER (ORDER BY level, id) "
     "FROM emp WINDOW w AS (ORDER BY level)"),
    ("win_percent_rank", "SELECT id, percent_rank() OVER (ORDER BY salary) FROM emp"),
    ("win_cume_dist", "SELECT id, cume_dist() OVER (PARTITION BY dept ORDER BY salary) FROM emp"),
    ("win_ntile",
     "SELECT id, ntile(4) OVER (ORDER BY id), ntile(3) OVER (PARTITION BY dept ORDER BY id) "
     "FROM emp"),
    ("win_lag", "SELECT id, lag(salary) OVER (ORDER BY id) FROM emp"),
    ("win_lag_offset_default",
     "SELECT id, lag(salary, 2, 0) OVER (PARTITION BY dept ORDER BY id) FROM emp"),
    ("win_lead",
     "SELECT id, lead(name) OVER (ORDER BY id), lead(name, 3, 'none') OVER (ORDER BY id) "
     "FROM emp"),
    ("win_first_value",
     "SELECT id, first_value(name) OVER (PARTITION BY dept ORDER BY salary DESC NULLS LAST, id) "
     "FROM emp"),
    ("win_last_value_default_frame",
     "SELECT id, last_value(id) OVER (PARTITION BY dept ORDER BY id) FROM emp"),
    ("win_last_value_full_frame",
     "SELECT id, last_value(name) OVER (PARTITION BY dept ORDER BY id "
     "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM emp"),
    ("win_nth_value",
     "SELECT id, nth_value(name, 2) OVER (PARTITION BY dept ORDER BY id "
     "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM emp"),
    ("win_sum_count_partition",
     "SELECT id, sum(salary) OVER (PARTITION BY dept), count(*) OVER (PARTITION BY dept) "
     "FROM emp"),
    ("win_running_sum_range_ties", "SELECT id, sum(salary) OVER (ORDER BY hired) FROM emp"),
    ("win_running_sum_rows",
     "SELECT id, sum(salary) OVER (ORDER BY hired, id "
     "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM emp"),
    ("win_running_count_partition",
     "SELECT id, count(bonus) OVER (PARTITION BY dept ORDER BY id) FROM emp"),
    ("win_moving_avg",
     "SELECT id, round(avg(amount) OVER "
     "(ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), 2) FROM sales"),
    ("win_rows_centered",
     "SELECT id, sum(qty) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM sales"),
    ("win_range_interval",
     "SELECT id, count(*) OVER (ORDER BY day "
     "RANGE BETWEEN INTERVAL '7 days' PRECEDING AND CURRENT ROW) FROM sales"),
    ("win_null_partition",
     "SELECT id, dept, avg(bonus) OVER (PARTITION BY dept), min(hired) OVER (PARTITION BY dept) "
     "FROM emp"),
    ("win_percent_of_dept",
     "SELECT id, round(100 * salary / sum(salary) OVER (PARTITION BY dept), 2) FROM emp"),
    ("win_top_two_per_dept",
     "SELECT dept, name, salary FROM (SELECT dept, name, salary, row_number() OVER "
     "(PARTITION BY dept ORDER BY salary DESC NULLS LAST, id) AS rn FROM emp) t WHERE rn <= 2"),
    ("win_sales_running_per_emp",
     "SELECT id, emp_id, sum(amount) OVER (PARTITION BY emp_id ORDER BY day, id) FROM sales"),
    ("win_lag_date_gap",
     "SELECT id, day - lag(day) OVER (PARTITION BY emp_id ORDER BY day, id) FROM sales"),
    ("win_order_by_window_result",
     "SELECT id, rank() OVER (ORDER BY bonus DESC NULLS LAST) AS r FROM emp ORDER BY r, id"),
    ("win_diff_from_dept_avg",
     "SELECT id, salary - round(avg(salary) OVER (PARTITION BY dept), 2) FROM emp"),
    ("win_rank_over_aggregate",
     "SELECT dept, sum(salary), rank() OVER (ORDER BY sum(salary) DESC NULLS LAST) "
     "FROM emp GROUP BY dept"),

    # -- joins --
    ("join_inner_dept", "SELECT e.id, d.city FROM emp e JOIN dept d ON e.dept = d.name"),
    ("join_left_dept",
     "SELECT e.id, d.city, d.budget FROM emp e LEFT JOIN dept d ON e.dept = d.name"),
    ("join_right_dept", "SELECT e.id, d.name FROM emp e RIGHT JOIN dept d ON e.dept = d.name"),
    ("join_full_dept",
     "SELECT e.id, e.dept, d.name FROM emp e FULL JOIN dept d ON e.dept = d.name"),
    ("join_cross_count", "SELECT count(*) FROM emp CROSS JOIN dept"),
    ("join_comma_where",
     "SELECT e.id, d.budget FROM emp e, dept d WHERE e.dept = d.name AND d.city = 'Berlin'"),
    ("join_self_manager",
     "SELECT e.id, e.name, m.name FROM emp e JOIN emp m ON e.manager_id = m.id"),
    ("join_self_left_manager",
     "SELECT e.id, m.name AS manager FROM emp e LEFT JOIN emp m ON m.id = e.manager_id"),
    ("join_self_report_count",
     "SELECT m.id, count(e.id) FROM emp m LEFT JOIN emp e ON e.manager_id = m.id GROUP BY m.id"),
    ("join_self_same_salary",
     "SELECT a.id, b.id FROM emp a JOIN emp b ON a.salary = b.salary AND a.id < b.id"),
    ("join_self_not_distinct",
     "SELECT a.id, b.id FROM emp a JOIN emp b "
     "ON a.bonus IS NOT DISTINCT FROM b.bonus AND a.id < b.id"),
    ("join_self_case_insensitive",
     "SELECT a.id, b.id FROM emp a JOIN emp b ON lower(a.name) = lower(b.name) AND a.id < b.id"),
    ("join_using",
     "SELECT dept, e.id, d.city FROM emp e "
     "JOIN (SELECT name AS dept, city FROM dept) d USING (dept)"),
    ("join_using_star",
     "SELECT * FROM emp e JOIN (SELECT name AS dept, city FROM dept) d USING (dept) "
     "WHERE e.id < 4"),
    ("join_full_using_merged_column",
     "SELECT dept, count(e.id), max(d.budget) FROM emp e "
     "FULL JOIN (SELECT name AS dept, budget FROM dept) d USING (dept) GROUP BY dept"),
    ("join_natural",
     "SELECT id, dept, budget FROM emp NATURAL JOIN (SELECT name AS dept, budget FROM dept) d"),
    ("join_natural_left",
     "SELECT id, dept, budget FROM emp "
     "NATURAL LEFT JOIN (SELECT name AS dept, budget FROM dept) d"),
    ("join_left_extra_on_condition",
     "SELECT e.id, count(s.id) FROM emp e "
     "LEFT JOIN sales s ON s.emp_id = e.id AND s.note = 'promo' GROUP BY e.id"),
    ("join_left_condition_in_where",
     "SELECT e.id, count(s.id) FROM emp e "
     "LEFT JOIN sales s ON s.emp_id = e.id WHERE s.note = 'promo' GROUP BY e.id"),
    ("join_anti_left_is_null",
     "SELECT d.name FROM dept d LEFT JOIN emp e ON e.dept = d.name WHERE e.id IS NULL"),
    ("join_anti_sales_without_emp",
     "SELECT s.id FROM sales s LEFT JOIN emp e ON e.id = s.emp_id WHERE e.id IS NULL"),
    ("join_dept_aggregates",
     "SELECT d.name, count(e.id), sum(e.salary), d.budget FROM dept d "
     "LEFT JOIN emp e ON e.dept = d.name GROUP BY d.name, d.budget"),
    ("join_three_tables",
     "SELECT d.city, count(*), sum(s.amount) FROM sales s JOIN emp e ON e.id = s.emp_id "
     "JOIN dept d ON d.name = e.dept GROUP BY d.city"),
    ("join_three_left",
     "SELECT e.id, count(s.id), d.city FROM emp e LEFT JOIN dept d ON d.name = e.dept "
     "LEFT JOIN sales s ON s.emp_id = e.id GROUP BY e.id, d.city"),
    ("join_non_equi_bands",
     "SELECT e.id, b.label FROM emp e JOIN (VALUES (0, 60000, 'low'), (60000, 100000, 'mid'), "
     "(100000, 1000000, 'high')) AS b(lo, hi, label) ON e.salary >= b.lo AND e.salary < b.hi"),
    ("join_null_keys_never_match", "SELECT count(*) FROM emp a JOIN emp b ON a.dept = b.dept"),
    ("join_filter_both_sides",
     "SELECT s.id, e.name FROM sales s JOIN emp e ON e.id = s.emp_id "
     "WHERE s.day >= '2024-05-15' AND e.active"),
    ("join_order_by_joined_column",
     "SELECT e.name, d.city FROM emp e JOIN dept d ON d.name = e.dept ORDER BY d.city, e.id"),
    ("join_mixed_key_types",
     "SELECT e.id, s.id FROM emp e JOIN sales s ON s.id = e.id AND s.amount > e.bonus / 10"),
    ("join_group_having",
     "SELECT e.name, sum(s.amount) FROM emp e JOIN sales s ON s.emp_id = e.id "
     "GROUP BY e.id, e.name HAVING sum(s.amount) > 2500"),

    # -- subqueries and CTEs --
    ("sub_scalar_max", "SELECT id FROM emp WHERE salary = (SELECT max(salary) FROM emp)"),
    ("sub_scalar_in_select_list",
     "SELECT id, (SELECT city FROM dept WHERE dept.name = emp.dept) FROM emp"),
    ("sub_scalar_empty_is_null",
     "SELECT (SELECT id FROM emp WHERE id < 0), (SELECT max(id) FROM emp WHERE id < 0)"),
    ("sub_correlated_avg",
     "SELECT id FROM emp e "
     "WHERE salary > (SELECT avg(salary) FROM emp e2 WHERE e2.dept = e.dept)"),
    ("sub_correlated_count",
     "SELECT id, (SELECT count(*) FROM sales s WHERE s.emp_id = e.id) FROM emp e"),
    ("sub_in", "SELECT id FROM emp WHERE id IN (SELECT emp_id FROM sales WHERE amount > 1200)"),
    ("sub_in_row_value",
     "SELECT id FROM emp WHERE (dept, level) IN (SELECT dept, max(level) FROM emp GROUP BY dept)"),
    ("sub_not_in", "SELECT id FROM emp WHERE dept NOT IN (SELECT name FROM dept)"),
    ("sub_not_in_with_null", "SELECT id FROM emp WHERE id NOT IN (SELECT manager_id FROM emp)"),
    ("sub_not_in_nulls_filtered",
     "SELECT id FROM emp "
     "WHERE id NOT IN (SELECT manager_id FROM emp WHERE manager_id IS NOT NULL)"),
    ("sub_in_select_list_null", "SELECT id, id IN (SELECT manager_id FROM emp) FROM emp"),
    ("sub_exists",
     "SELECT name FROM dept d "
     "WHERE EXISTS (SELECT 1 FROM emp e WHERE e.dept = d.name AND e.salary > 100000)"),
    ("sub_not_exists",
     "SELECT name FROM dept d WHERE NOT EXISTS (SELECT 1 FROM emp e WHERE e.dept = d.name)"),
    ("sub_not_exists_no_reports",
     "SELECT id FROM emp e WHERE NOT EXISTS (SELECT 1 FROM emp m WHERE m.manager_id = e.id)"),
    ("sub_any",
     "SELECT id FROM emp WHERE salary > ANY (SELECT salary FROM emp WHERE dept = 'ops')"),
    ("sub_all",
     "SELECT id FROM emp WHERE salary > ALL (SELECT salary FROM emp WHERE dept = 'sales')"),
    ("sub_all_with_null",
     "SELECT id FROM emp WHERE salary >= ALL (SELECT salary FROM emp WHERE dept = 'ops')"),
    ("sub_all_empty",
     "SELECT count(*) FROM emp WHERE salary > ALL (SELECT salary FROM emp WHERE id < 0)"),
    ("sub_any_array", "SELECT id FROM emp WHERE id = ANY (ARRAY[2, 4, 6])"),
    ("sub_derived_table",
     "SELECT t.dept, t.n FROM (SELECT dept, count(*) AS n FROM emp GROUP BY dept) t "
     "WHERE t.n > 1"),
    ("sub_correlated_max_sale",
     "SELECT s.id FROM sales s "
     "WHERE s.amount = (SELECT max(amount) FROM sales s2 WHERE s2.emp_id = s.emp_id)"),
    ("sub_scalar_in_having",
     "SELECT dept FROM emp GROUP BY dept HAVING avg(salary) > (SELECT avg(salary) FROM emp)"),
    ("sub_cte_simple",
     "WITH eng AS (SELECT * FROM emp WHERE dept = 'eng') "
     "SELECT id, name FROM eng WHERE salary > 100000"),
    ("sub_cte_several",
     "WITH totals AS (SELECT emp_id, sum(amount) AS total FROM sales GROUP BY emp_id), "
     "ranked AS (SELECT emp_id, total, rank() OVER (ORDER BY total DESC) AS r FROM totals) "
     "SELECT emp_id, total FROM ranked WHERE r <= 3"),
    ("sub_cte_used_twice",
     "WITH d AS (SELECT dept, avg(salary) AS a FROM emp GROUP BY dept) "
     "SELECT x.dept, y.dept FROM d x JOIN d y ON x.a < y.a"),
    ("sub_recursive_series",
     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) "
     "SELECT sum(i), count(*) FROM n"),
    ("sub_recursive_manager_chain",
     "WITH RECURSIVE chain AS (SELECT id, manager_id, 0 AS depth FROM emp "
     "WHERE manager_id IS NULL UNION ALL SELECT e.id, e.manager_id, c.depth + 1 "
     "FROM emp e JOIN chain c ON e.manager_id = c.id) SELECT id, depth FROM chain"),
    ("sub_recursive_dates",
     "WITH RECURSIVE d(day) AS (SELECT DATE '2024-02-26' UNION ALL "
     "SELECT day + 1 FROM d WHERE day < DATE '2024-03-02') SELECT day FROM d ORDER BY day"),
    ("sub_lateral_top_sale",
     "SELECT e.id, t.amount FROM emp e CROSS JOIN LATERAL (SELECT amount FROM sales s "
     "WHERE s.emp_id = e.id ORDER BY amount DESC, id LIMIT 1) t"),
    ("sub_lateral_left_count",
     "SELECT d.name, t.n FROM dept d LEFT JOIN LATERAL "
     "(SELECT count(*) AS n FROM emp e WHERE e.dept = d.name) t ON true"),

    # -- set operations --
    ("set_union", "SELECT dept FROM emp UNION SELECT name FROM dept"),
    ("set_union_all", "SELECT dept FROM emp UNION ALL SELECT name FROM dept"),
    ("set_intersect", "SELECT dept FROM emp INTERSECT SELECT name FROM dept"),
    ("set_except", "SELECT dept FROM emp EXCEPT SELECT name FROM dept"),
    ("set_except_reverse", "SELECT name FROM dept EXCEPT SELECT dept FROM emp"),
    ("set_intersect_all",
     "SELECT level FROM emp WHERE dept = 'eng' "
     "INTERSECT ALL SELECT level FROM emp WHERE dept <> 'eng'"),
    ("set_except_all", "SELECT salary FROM emp EXCEPT ALL SELECT salary FROM emp WHERE id > 10"),
    ("set_union_order_limit",
     "SELECT name FROM emp WHERE dept = 'eng' UNION SELECT city FROM dept ORDER BY 1 LIMIT 5"),
    ("set_union_mixed_types", "SELECT 1 UNION SELECT 2.5 UNION SELECT 2"),
    ("set_union_null_dedup", "SELECT NULL::int UNION SELECT NULL::int"),

    # -- DISTINCT, ORDER BY, LIMIT, VALUES --
    ("order_distinct_dept", "SELECT DISTINCT dept FROM emp"),
    ("order_distinct_order_by_desc", "SELECT DISTINCT salary FROM emp ORDER BY salary DESC"),
    ("order_nulls_first", "SELECT id, bonus FROM emp ORDER BY bonus NULLS FIRST, id"),
    ("order_desc_nulls_last", "SELECT id, bonus FROM emp ORDER BY bonus DESC NULLS LAST, id"),
    ("order_desc_default_nulls_first", "SELECT id, dept FROM emp ORDER BY dept DESC, id"),
    ("order_expression",
     "SELECT id, salary FROM emp ORDER BY coalesce(bonus, 0) * 2 + level, id"),
    ("order_ordinal_desc", "SELECT name, id FROM emp ORDER BY 2 DESC"),
    ("order_text", "SELECT id, name FROM emp ORDER BY name, id"),
    ("order_boolean", "SELECT id, active FROM emp ORDER BY active DESC NULLS LAST, id"),
    ("order_limit", "SELECT id FROM emp ORDER BY salary DESC NULLS LAST, id LIMIT 3"),
    ("order_limit_offset", "SELECT id FROM emp ORDER BY id LIMIT 4 OFFSET 5"),
    ("order_fetch_first", "SELECT id, name FROM emp ORDER BY hired, id FETCH FIRST 3 ROWS ONLY"),
    ("order_distinct_on",
     "SELECT DISTINCT ON (dept) dept, id, salary FROM emp "
     "ORDER BY dept, salary DESC NULLS LAST, id"),
    ("order_values_list", "VALUES (1, 'one'), (2, 'two'), (3, NULL)"),
    ("order_values_sorted",
     "SELECT * FROM (VALUES (3, 'c'), (1, 'a'), (2, 'b')) AS v(n, s) ORDER BY n DESC"),
    ("order_select_without_from", "SELECT 1 + 1, 'a' || 'b', NULL IS NULL, 10 > 9"),

    # -- errors --
    ("err_div_zero", "SELECT 1 / 0"),
    ("err_div_zero_double_column", "SELECT bonus / 0 FROM emp"),
    ("err_unknown_column", "SELECT salry FROM emp"),
    ("err_unknown_table", "SELECT * FROM employees"),
    ("err_ambiguous_column", "SELECT name FROM emp JOIN dept ON emp.dept = dept.name"),
    ("err_bad_cast_int", "SELECT 'abc'::int"),
    ("err_bad_date_literal", "SELECT DATE '2024-02-30'"),
    ("err_bad_date_format", "SELECT 'yesterday-ish'::date"),
    ("err_syntax", "SELEC id FROM emp"),
    ("err_group_by_violation", "SELECT dept, name FROM emp GROUP BY dept"),
    ("err_aggregate_in_where", "SELECT dept FROM emp WHERE count(*) > 1 GROUP BY dept"),
    ("err_wrong_argument_type", "SELECT upper(id) FROM emp"),
    ("err_compare_text_int", "SELECT id FROM emp WHERE name = 5"),
    ("err_round_double_digits", "SELECT round(bonus, 1) FROM emp"),
    ("err_int_out_of_range_cast", "SELECT 3000000000::int"),
    ("err_int_overflow", "SELECT 2147483647 + 1"),
    ("err_numeric_field_overflow", "SELECT 12345.678::numeric(5,2)"),
    ("err_scalar_subquery_rows", "SELECT (SELECT id FROM emp)"),

    # -- three-valued logic, round 2 --
    ("null2_not_and_with_null", "SELECT id FROM emp WHERE NOT (dept = 'eng' AND bonus > 1000)"),
    ("null2_de_morgan_select",
     "SELECT id, NOT (active AND level > 1), NOT active OR level <= 1, "
     "NOT (active OR level > 1) FROM emp"),
    ("null2_is_not_false", "SELECT id FROM emp WHERE (bonus > 1000) IS NOT FALSE"),
    ("null2_is_unknown",
     "SELECT id, (bonus > 0) IS UNKNOWN, (bonus > 0) IS NOT UNKNOWN FROM emp"),
    ("null2_not_not_in", "SELECT id FROM emp WHERE NOT (dept NOT IN ('eng', 'ops'))"),
    ("null2_not_in_int_list_with_null",
     "SELECT id FROM emp WHERE manager_id NOT IN (1, 2, NULL)"),
    ("null2_in_int_list_select",
     "SELECT id, manager_id IN (1, 2, NULL), manager_id NOT IN (1, 2, NULL) FROM emp"),
    ("null2_in_literals",
     "SELECT NULL IN (1, 2), NULL NOT IN (1, 2), 1 IN (NULL), 1 NOT IN (2, NULL), "
     "1 IN (1, NULL), 1 NOT IN (1, NULL)"),
    ("null2_case_not_comparison",
     "SELECT id, CASE WHEN NOT (bonus > 1000) THEN 'le' WHEN bonus > 1000 THEN 'gt' "
     "ELSE 'unknown' END FROM emp"),
    ("null2_boolean_equality_count",
     "SELECT count(*), count(*) FILTER (WHERE (salary > 60000) <> (bonus > 1000)) FROM emp "
     "WHERE (salary > 60000) = (bonus > 1000)"),
    ("null2_bool_compare_ops",
     "SELECT id, active = true, active <> false, active IS TRUE, active IS NOT FALSE FROM emp "
     "WHERE id IN (1, 4, 6, 8)"),
    ("null2_null_comparisons",
     "SELECT NULL::int IS DISTINCT FROM NULL::int, 1 IS DISTINCT FROM NULL, "
     "NULL::int = NULL, NULL::text <> NULL, NULL::int IS NOT DISTINCT FROM 1"),
    ("null2_between_null_bound", "SELECT id FROM emp WHERE bonus BETWEEN NULL AND 5000"),
    ("null2_not_between_null_bound",
     "SELECT id FROM emp WHERE NOT (bonus BETWEEN NULL AND 5000)"),
    ("null2_is_not_true_and_not_false",
     "SELECT id FROM emp WHERE (dept = 'eng') IS NOT TRUE AND (level > 1) IS NOT FALSE"),
    ("null2_not_eq_empty_code", "SELECT id FROM emp WHERE NOT (code = '')"),
    ("null2_not_like_null_name", "SELECT id FROM emp WHERE NOT (name LIKE '%a%')"),

    # -- numbers and casts, round 2 --
    ("num2_float_vs_numeric_sums",
     "SELECT 0.1 + 0.2 = 0.3, 0.1::float8 + 0.2 = 0.3, 0.1 + 0.2::float8 = 0.3::float8, "
     "0.1::float8 = 0.1, 2.9999999999999999999::float8 = 3"),
    ("num2_float_text_output",
     "SELECT (0.1::float8 + 0.2::float8)::text, 1000000000000000::float8::text, "
     "123456789012345678::float8::text, 0.0001::float8::text, 0.00001::float8::text"),
    ("num2_real_widening",
     "SELECT 0.1::real::float8, 3.9::real::numeric, 0.1::real::text, 16777217::real::text"),
    ("num2_negative_division_modulo",
     "SELECT 7 / -2, -7 / -2, -7 % -3, -7.5 % 2, mod(-7.5, -2), -7 / 2 * 2 + -7 % 2"),
    ("num2_round_negative_halves",
     "SELECT round(-0.5), round(-1.5), round(-2.5::float8), round(-3.5::float8), "
     "round(-0.5::float8), round(1.5::float8)"),
    ("num2_round_digits_halves",
     "SELECT round(-1.255, 2), round(1.255, 2), round(-0.005, 2), round(0.125, 2), "
     "trunc(-0.005, 2), round(-125, -1), round(-135.5, -1)"),
    ("num2_text_to_int_spaces_signs",
     "SELECT '  42  '::int, '+7'::int, '-0'::int, ' -12'::bigint, '007'::smallint"),
    ("num2_text_to_numeric_forms",
     "SELECT '1.5e2'::numeric, '  3.25 '::numeric, '-.5'::numeric, '+5.'::numeric, "
     "'1E-3'::numeric"),
    ("num2_text_to_float_forms",
     "SELECT '1e2'::float8, '-Infinity'::float8 < 0, '  1.5  '::float8, "
     "'NaN'::float8 > 'Infinity'::float8, '-0'::float8 = 0"),
    ("num2_float_to_int_halves",
     "SELECT (-0.5)::float8::int, 1.5::float8::int, (-1.5)::float8::int, "
     "1.5::float8::bigint, 2.5::float8::smallint, 2.5::real::int"),
    ("num2_numeric_scale_casts",
     "SELECT CAST(123.456 AS numeric(5,1)), CAST(-123.45 AS numeric(4,0)), "
     "CAST(0.0049 AS numeric(3,2)), CAST(-0.005 AS numeric(3,2)), CAST(9.995 AS numeric(4,2))"),
    ("num2_float_equality_quirks",
     "SELECT 1 / 3::float8 * 3 = 1, 0.5::real = 0.5, 0.1::real = 0.1::real, "
     "0.1::real::float8 = 0.1::float8"),
    ("num2_big_numeric_literals",
     "SELECT 99999999999999999999 + 1, 123456789012345678901234567890.123 * 10, "
     "0.000000000000000000001 * 1000"),
    ("num2_bigint_sum_past_int64",
     "SELECT sum(x) FROM (VALUES (9223372036854775807), (1)) v(x)"),
    ("num2_double_to_int_modulo",
     "SELECT id, bonus::int % 3, bonus::numeric % 1 FROM emp WHERE bonus IS NOT NULL"),
    ("num2_in_list_real_numeric", "SELECT id FROM emp WHERE rating IN (2.75, 3.9, 4)"),
    ("num2_case_mixed_result_types",
     "SELECT id, CASE WHEN id < 4 THEN level WHEN id < 8 THEN salary WHEN id < 12 THEN bonus "
     "END FROM emp"),
    ("num2_case_simple_numeric_match",
     "SELECT CASE 1 WHEN 1.0 THEN 'match' ELSE 'no' END, "
     "CASE 0.1::float8 + 0.2 WHEN 0.3 THEN 'eq' ELSE 'ne' END, "
     "CASE 0.1 + 0.2 WHEN 0.3 THEN 'eq' ELSE 'ne' END"),
    ("num2_coalesce_mixed_numeric",
     "SELECT id, coalesce(level, rating, 0), coalesce(bonus, salary) FROM emp"),
    ("num2_greatest_least_mixed",
     "SELECT greatest(1, 2.5, 2), least(-1, -1.5::float8), greatest(NULL::numeric, -1), "
     "least(1.10, 1.1)"),
    ("num2_text_bool_forms",
     "SELECT ' TRUE '::boolean, 'tr'::boolean, 'of'::boolean, 'n'::boolean, '1'::boolean"),
    ("num2_in_list_date_timestamp",
     "SELECT id FROM emp WHERE hired IN ('2015-03-01', DATE '2024-02-29', "
     "TIMESTAMP '2019-01-10 00:00:00')"),
    ("num2_real_vs_numeric_contexts",
     "SELECT id, rating = 3.9, rating BETWEEN 3.9 AND 4, CASE rating WHEN 3.9 THEN 'y' "
     "ELSE 'n' END, rating = ANY (ARRAY[3.9]) FROM emp WHERE id IN (3, 13)"),
    ("num2_coalesce_real_numeric", "SELECT id, coalesce(rating, 3.9) = rating FROM emp "
     "WHERE id IN (5, 13)"),
    ("num2_float_to_numeric_digits",
     "SELECT (0.1::float8 + 0.2::float8)::numeric, (1 / 3::float8)::numeric, "
     "0.0000001::float8::numeric, 123456789.123456789::float8::numeric"),
    ("num2_distinct_numeric_scales",
     "SELECT count(DISTINCT x), count(*) FROM (VALUES (1.0), (1.00), (1), (1.10), (1.1)) v(x)"),
    ("num2_case_guards_division",
     "SELECT id, CASE WHEN level = 0 THEN NULL ELSE 100 / level END FROM emp"),
    ("num2_case_guards_cast",
     "SELECT id, CASE WHEN code ~ '^[0-9]+$' THEN code::int ELSE -1 END, "
     "CASE WHEN code ~ '^[A-Z][0-9]+$' THEN substr(code, 2)::int END FROM emp"),
    ("num2_case_guard_in_where",
     "SELECT id FROM emp WHERE CASE WHEN level > 0 THEN salary / level > 30000 ELSE false END"),
    ("num2_filter_guards_division",
     "SELECT sum(100 / level) FILTER (WHERE level > 0), count(*) FILTER (WHERE level > 0) "
     "FROM emp"),
    ("num2_coalesce_short_circuit",
     "SELECT id, coalesce(level, 100 / (level - level)) FROM emp"),
    ("num2_nan_infinity_order",
     "SELECT x FROM (VALUES ('NaN'::float8), (1), ('Infinity'), ('-Infinity'), (NULL)) v(x) "
     "ORDER BY x DESC"),

    # -- strings, round 2 --
    ("str2_trailing_space_compare",
     "SELECT 'a' = 'a ', 'a ' > 'a', length('a '), 'abc' < 'abd', '' < 'a', 'Z' < 'a'"),
    ("str2_char_padding",
     "SELECT 'a '::char(3) = 'a'::char(3), length('a  '::char(3)), 'ab'::char(4) || 'c', "
     "octet_length('ab'::char(4))"),
    ("str2_varchar_trailing_space",
     "SELECT 'a'::varchar(5) = 'a  ', octet_length('a '::varchar(5)), "
     "CAST('abcdef' AS varchar(3))"),
    ("str2_order_trailing_spaces",
     "SELECT x FROM (VALUES ('a'), ('a '), ('a  b'), ('a b'), ('A'), ('')) v(x) ORDER BY x"),
    ("str2_greater_than_z", "SELECT id, name FROM emp WHERE name > 'Z' ORDER BY name, id"),
    ("str2_empty_string_functions",
     "SELECT '' IS NULL, length(''), coalesce('', 'x'), nullif('', '') IS NULL, "
     "concat('', NULL) = '', '' || NULL IS NULL"),
    ("str2_like_backslash_escape",
     "SELECT '10%' LIKE '10\\%', '10x' LIKE '10\\%', 'a_c' LIKE 'a\\_c', 'abc' LIKE 'a\\_c', "
     "'a\\b' LIKE 'a\\\\b'"),
    ("str2_like_custom_escape",
     "SELECT 'a%b' LIKE 'a#%b' ESCAPE '#', 'axb' LIKE 'a#%b' ESCAPE '#', "
     "'a#b' LIKE 'a##b' ESCAPE '#', 'a_b' LIKE 'a$_b' ESCAPE '$', 'azb' LIKE 'a$_b' ESCAPE '$'"),
    ("str2_like_edges",
     "SELECT 'abc' LIKE 'abc%', 'abc' LIKE '%', '' LIKE '%', '' LIKE '_', NULL LIKE '%', "
     "'ABC' LIKE 'abc', 'abc' LIKE 'ab', 'a' || chr(10) || 'b' LIKE 'a_b'"),
    ("str2_like_column_literal_percent",
     "SELECT id FROM emp WHERE code LIKE '%\\%%' OR code LIKE '\\_%'"),
    ("str2_ilike_non_ascii",
     "SELECT 'line' ILIKE 'LINE', 'ZOË' ILIKE 'zoë', 'Zoë' ILIKE 'ZOË', "
     "'straße' ILIKE 'STRASSE', 'ÉCOLE' ILIKE 'é%'"),
    ("str2_ilike_column_non_ascii", "SELECT id FROM emp WHERE name ILIKE '%Ë'"),
    ("str2_case_mapping_non_ascii",
     "SELECT upper('straße'), lower('ÀÉÎ'), upper('ﬁ'), initcap('élan vital')"),
    ("str2_length_multibyte",
     "SELECT length('日本語'), octet_length('日本語'), substr('日本語', 2, 1), "
     "char_length('naïve'), position('語' in '日本語')"),
    ("str2_non_ascii_functions",
     "SELECT reverse('Zoë'), left('Zoë', 2), right('Zoë', 1), lpad('ë', 3, '·'), "
     "position('ë' in 'Zoë'), rpad('Zoë', 5, 'ë')"),
    ("str2_concat_nulls",
     "SELECT concat('a', NULL, 'b'), 'a' || NULL || 'b', concat_ws('-', NULL, 'a', NULL, 'b'), "
     "concat_ws(NULL, 'a', 'b'), concat(NULL)"),
    ("str2_pipe_with_types",
     "SELECT 'x' || 1.50, 'x' || 1.5::float8, 'x' || true, 'x' || DATE '2024-02-29', "
     "'x' || NULL::int, 'x' || TIMESTAMP '2024-01-01 00:00:00'"),
    ("str2_substr_negative_start",
     "SELECT substr('hello', -3), substr('hello', -3, 5), substr('hello', 2, 0), "
     "substring('hello' from 0), substring('hello' from -1 for 3), substring('hello' for 2)"),
    ("str2_min_max_mapped",
     "SELECT min(code), max(code), min(lower(name)), max(upper(name)) FROM emp"),
    ("str2_regex_ops",
     "SELECT 'abc' ~ 'B', 'abc' ~* 'B', 'abc' !~ 'd', 'a.c' ~ '^a\\.c$', 'abc' !~* 'A'"),
    ("str2_varchar_vs_text_space", "SELECT id FROM emp WHERE code = 'A1 ' OR code = 'B2'"),
    ("str2_numbers_as_text_order",
     "SELECT x FROM (VALUES ('10'), ('9'), ('a'), ('B'), (''), ('-1')) v(x) ORDER BY x"),
    ("str2_string_agg_null_empty",
     "SELECT string_agg(x, ',' ORDER BY x), string_agg(x, ',' ORDER BY x DESC NULLS FIRST), "
     "array_agg(x ORDER BY x NULLS FIRST) FROM (VALUES ('b'), (NULL), ('a'), ('')) v(x)"),
    ("str2_like_regex_metachars",
     "SELECT 'abc' LIKE 'a.c', 'a.c' LIKE 'a.c', 'aac' LIKE 'a+c', 'a+c' LIKE 'a+c', "
     "'(x)' LIKE '(x)', 'abc' LIKE 'a[b]c', 'a[b]c' LIKE 'a[b]c', 'a^$' LIKE 'a^$', "
     "'a|b' LIKE 'a|b', 'a' LIKE 'a|b'"),
    ("str2_like_newline",
     "SELECT 'a' || chr(10) || 'b' LIKE 'a%b', 'a' || chr(10) || 'b' LIKE 'a%', "
     "'a' || chr(10) || 'b' ILIKE 'A_B', 'x' || chr(10) LIKE '%x%'"),
    ("str2_regex_newline",
     "SELECT 'a' || chr(10) || 'b' ~ 'a.b', 'x' || chr(10) || 'y' ~ '^y', "
     "'x' || chr(10) || 'y' ~ 'x$', regexp_replace('a' || chr(10) || 'b', 'a.b', 'X')"),
    ("str2_order_non_ascii",
     "SELECT x FROM (VALUES ('z'), ('é'), ('e'), ('E'), ('ß'), ('Zoe'), ('Zoë')) v(x) "
     "ORDER BY x"),

    # -- aggregates, round 2 --
    ("agg2_all_null_groups",
     "SELECT dept, sum(bonus), avg(bonus), min(bonus), max(bonus), count(bonus), count(*) "
     "FROM emp WHERE bonus IS NULL GROUP BY dept"),
    ("agg2_all_null_values",
     "SELECT sum(x), avg(x), min(x), max(x), count(x), count(*) "
     "FROM (VALUES (NULL::int), (NULL)) v(x)"),
    ("agg2_count_distinct_nulls",
     "SELECT count(DISTINCT manager_id), count(manager_id), count(DISTINCT dept), "
     "count(DISTINCT coalesce(dept, 'none')) FROM emp"),
    ("agg2_avg_small_ints", "SELECT avg(x), sum(x) FROM (VALUES (1), (2), (2)) v(x)"),
    ("agg2_empty_no_group_by",
     "SELECT count(*), sum(salary), max(name), min(hired), avg(bonus) FROM emp WHERE false"),
    ("agg2_having_no_group_by_true", "SELECT 'x' FROM emp HAVING count(*) > 5"),
    ("agg2_having_no_group_by_on_empty",
     "SELECT count(*) FROM emp WHERE id < 0 HAVING count(*) = 0"),
    ("agg2_empty_group_by_having",
     "SELECT dept, count(*) FROM emp WHERE id < 0 GROUP BY dept HAVING count(*) = 0"),
    ("agg2_group_by_modulo_null",
     "SELECT level % 2 AS parity, count(*), sum(salary) FROM emp GROUP BY level % 2"),
    ("agg2_having_max_null",
     "SELECT dept, count(*) FROM emp GROUP BY dept HAVING max(bonus) IS NULL"),
    ("agg2_having_count_column",
     "SELECT dept FROM emp GROUP BY dept HAVING count(bonus) < count(*)"),
    ("agg2_distinct_aggregates",
     "SELECT sum(DISTINCT bonus), round(avg(DISTINCT salary), 2), count(DISTINCT rating), "
     "sum(DISTINCT level) FROM emp"),
    ("agg2_bool_aggs_nulls",
     "SELECT dept, bool_and(active), bool_or(NOT active), every(active IS NOT NULL) "
     "FROM emp GROUP BY dept"),
    ("agg2_int_sum_avg_rounded",
     "SELECT sum(qty), count(qty), count(*), round(avg(qty), 6), "
     "round(sum(qty * 1.0) / count(*), 6) FROM sales"),
    ("agg2_filter_edge_cases",
     "SELECT count(*) FILTER (WHERE bonus > 0), count(bonus) FILTER (WHERE bonus IS NULL), "
     "sum(salary) FILTER (WHERE false), max(salary) FILTER (WHERE dept IS NULL), "
     "min(hired) FILTER (WHERE active IS NOT TRUE) FROM emp"),
    ("agg2_sum_avg_mixed_values", "SELECT sum(x), avg(x) FROM (VALUES (1), (2.5), (NULL)) v(x)"),
    ("agg2_sum_of_sum_vs_sum_plus",
     "SELECT sum(salary + bonus), sum(salary) + sum(bonus) FROM emp"),
    ("agg2_order_by_unselected_aggregate",
     "SELECT dept, sum(salary) FROM emp GROUP BY dept ORDER BY sum(bonus) NULLS FIRST, dept"),
    ("agg2_group_by_case",
     "SELECT CASE WHEN bonus IS NULL THEN 'none' WHEN bonus > 1000 THEN 'big' ELSE 'small' END "
     "AS b, count(*), min(id) FROM emp GROUP BY 1"),
    ("agg2_avg_bigint_exact",
     "SELECT avg(x) FROM (VALUES (9007199254740993), (9007199254740995)) v(x)"),

    # -- joins, round 2 --
    ("join2_null_key_self_join",
     "SELECT a.id, b.id FROM emp a JOIN emp b ON a.manager_id = b.manager_id AND a.id < b.id"),
    ("join2_on_expression",
     "SELECT a.id, b.id FROM emp a LEFT JOIN emp b ON a.manager_id = b.id + 1"),
    ("join2_left_on_right_filter",
     "SELECT e.id, d.name FROM emp e LEFT JOIN dept d ON e.dept = d.name AND d.city = 'Berlin'"),
    ("join2_left_where_right_filter",
     "SELECT e.id, d.name FROM emp e LEFT JOIN dept d ON e.dept = d.name "
     "WHERE d.city = 'Berlin'"),
    ("join2_left_on_left_filter",
     "SELECT e.id, d.name FROM emp e LEFT JOIN dept d ON e.dept = d.name AND e.active"),
    ("join2_left_where_right_is_null",
     "SELECT e.id, d.name FROM emp e LEFT JOIN dept d ON e.dept = d.name "
     "WHERE d.city IS NULL"),
    ("join2_dept_left_emp_filtered",
     "SELECT d.name, e.id FROM dept d LEFT JOIN emp e ON e.dept = d.name AND e.salary > 100000"),
    ("join2_right_with_on_filter",
     "SELECT e.id, d.name FROM emp e RIGHT JOIN dept d ON e.dept = d.name AND e.level >= 3"),
    ("join2_full_unmatched_both",
     "SELECT e.id, d.name FROM emp e FULL JOIN dept d ON e.dept = d.name "
     "WHERE e.id IS NULL OR d.name IS NULL"),
    ("join2_full_on_constant_filter",
     "SELECT e.id, d.name FROM emp e FULL JOIN dept d ON e.dept = d.name AND d.city = 'Berlin'"),
    ("join2_self_inequality_band",
     "SELECT a.id, b.id FROM emp a JOIN emp b "
     "ON a.salary < b.salary AND b.salary < a.salary + 3000"),
    ("join2_left_inequality_count",
     "SELECT a.id, count(b.id) FROM emp a LEFT JOIN emp b ON b.hired < a.hired GROUP BY a.id"),
    ("join2_generate_series_left",
     "SELECT g.n, count(e.id) FROM generate_series(0, 5) AS g(n) "
     "LEFT JOIN emp e ON e.level = g.n GROUP BY g.n"),
    ("join2_values_null_key",
     "SELECT v.k, v.t, e.id FROM (VALUES (1, 'a'), (NULL, 'b'), (3, 'c')) AS v(k, t) "
     "LEFT JOIN emp e ON e.manager_id = v.k"),
    ("join2_date_to_timestamp_key",
     "SELECT e.id, count(s.id) FROM emp e JOIN sales s ON s.day = e.last_login GROUP BY e.id"),
    ("join2_or_condition",
     "SELECT e.id, d.name FROM emp e JOIN dept d ON e.dept = d.name OR d.city IS NULL"),
    ("join2_using_null_keys",
     "SELECT dept, count(*) FROM emp a JOIN emp b USING (dept) GROUP BY dept"),
    ("join2_left_on_false", "SELECT e.id, d.name FROM emp e LEFT JOIN dept d ON false "
     "WHERE e.id < 3"),
    ("join2_full_null_keys",
     "SELECT a.x, b.x FROM (VALUES (1), (NULL), (2)) a(x) "
     "FULL JOIN (VALUES (1), (NULL), (3)) b(x) ON a.x = b.x"),
    ("join2_full_using_null_keys",
     "SELECT x, a.t, b.t FROM (VALUES (1, 'a1'), (NULL, 'a2')) a(x, t) "
     "FULL JOIN (VALUES (1, 'b1'), (NULL, 'b2')) b(x, t) USING (x)"),
    ("join2_numeric_int_key_scales",
     "SELECT a.x, b.y FROM (VALUES (1.0), (2.50)) a(x) JOIN (VALUES (1), (2.5)) b(y) "
     "ON a.x = b.y"),

    # -- subqueries, round 2 --
    ("sub2_not_in_subquery_null_value",
     "SELECT id FROM emp WHERE salary NOT IN (SELECT salary FROM emp WHERE dept = 'ops')"),
    ("sub2_not_in_null_outer",
     "SELECT id FROM emp WHERE manager_id NOT IN (SELECT id FROM emp WHERE dept = 'eng')"),
    ("sub2_not_in_empty_subquery",
     "SELECT id FROM emp WHERE manager_id NOT IN (SELECT id FROM emp WHERE id < 0)"),
    ("sub2_in_empty_select_list",
     "SELECT id, manager_id IN (SELECT id FROM emp WHERE id < 0), "
     "manager_id NOT IN (SELECT id FROM emp WHERE id < 0) FROM emp"),
    ("sub2_correlated_max_no_rows",
     "SELECT id, (SELECT max(s.amount) FROM sales s WHERE s.emp_id = e.id) FROM emp e"),
    ("sub2_correlated_limit",
     "SELECT id, (SELECT s.amount FROM sales s WHERE s.emp_id = e.id "
     "ORDER BY s.amount DESC, s.id LIMIT 1) FROM emp e"),
    ("sub2_correlated_count_zero",
     "SELECT id, coalesce((SELECT count(*) FROM sales s WHERE s.emp_id = e.id "
     "AND s.qty IS NULL), -1) FROM emp e"),
    ("sub2_exists_null_correlation",
     "SELECT id FROM emp e WHERE EXISTS (SELECT 1 FROM emp m "
     "WHERE m.id = e.manager_id AND m.dept = e.dept)"),
    ("sub2_not_exists_null_key",
     "SELECT id FROM emp e WHERE NOT EXISTS (SELECT 1 FROM dept d WHERE d.name = e.dept)"),
    ("sub2_all_empty_null_outer",
     "SELECT id FROM emp WHERE salary < ALL (SELECT salary FROM emp WHERE id < 0)"),
    ("sub2_any_all_select_list",
     "SELECT id, salary = ANY (SELECT salary FROM emp WHERE dept = 'ops'), "
     "salary <> ALL (SELECT salary FROM emp WHERE dept = 'ops') FROM emp"),
    ("sub2_all_with_null_level", "SELECT id FROM emp WHERE level >= ALL (SELECT level FROM emp)"),
    ("sub2_any_array_null",
     "SELECT id FROM emp WHERE bonus < ANY (ARRAY[0, NULL]::float8[])"),
    ("sub2_all_array_null",
     "SELECT id, level <> ALL (ARRAY[1, NULL]), level = ANY (ARRAY[1, NULL]) FROM emp"),
    ("sub2_count_bug_zero",
     "SELECT d.name FROM dept d WHERE (SELECT count(*) FROM emp e WHERE e.dept = d.name) = 0"),
    ("sub2_coalesce_sum_correlated",
     "SELECT d.name FROM dept d WHERE d.budget > "
     "(SELECT coalesce(sum(e.salary), 0) * 5 FROM emp e WHERE e.dept = d.name)"),
    ("sub2_nested_ctes",
     "WITH a AS (SELECT dept, sum(salary) AS s FROM emp GROUP BY dept), "
     "b AS (SELECT max(s) AS m FROM a), "
     "c AS (SELECT a.dept FROM a, b WHERE a.s = b.m) SELECT * FROM c"),
    ("sub2_cte_shadows_table", "WITH emp AS (SELECT 1 AS id) SELECT id FROM emp"),
    ("sub2_in_null_city", "SELECT id FROM emp WHERE dept IN (SELECT name FROM dept "
     "WHERE city IS NULL)"),
    ("sub2_not_in_nullable_city",
     "SELECT id FROM emp WHERE dept NOT IN (SELECT city FROM dept)"),
    ("sub2_correlated_max_null_dept",
     "SELECT id FROM emp e WHERE salary = (SELECT max(salary) FROM emp x "
     "WHERE x.dept = e.dept)"),
    ("sub2_order_by_scalar_subquery",
     "SELECT name FROM dept d "
     "ORDER BY (SELECT count(*) FROM emp e WHERE e.dept = d.name) DESC, name"),
    ("sub2_correlated_not_in_nulls",
     "SELECT id FROM emp e WHERE id NOT IN "
     "(SELECT manager_id FROM emp m WHERE m.dept = e.dept)"),
    ("sub2_exists_limit_zero",
     "SELECT count(*) FROM emp WHERE EXISTS (SELECT 1 FROM sales LIMIT 0)"),
    ("sub2_case_guards_subquery",
     "SELECT id, CASE WHEN id < 0 THEN (SELECT id FROM emp) ELSE 0 END FROM emp WHERE id < 3"),

    # -- set operations, round 2 --
    ("set2_union_null_dedup", "SELECT manager_id FROM emp UNION SELECT NULL"),
    ("set2_intersect_null", "SELECT manager_id FROM emp INTERSECT SELECT NULL::int"),
    ("set2_except_keeps_null", "SELECT manager_id FROM emp EXCEPT SELECT id FROM emp "
     "WHERE id > 2"),
    ("set2_union_smallint_real", "SELECT level FROM emp UNION SELECT rating FROM emp"),
    ("set2_union_all_smallint_real",
     "SELECT count(*), count(x), sum(x) FROM (SELECT level AS x FROM emp "
     "UNION ALL SELECT rating FROM emp) t"),
    ("set2_union_numeric_double_one",
     "SELECT 1 UNION SELECT 1.0 UNION SELECT 1.00::float8"),
    ("set2_union_text_spaces_case", "SELECT 'a' UNION SELECT 'a ' UNION SELECT 'A'"),
    ("set2_except_values_nulls",
     "SELECT x FROM (VALUES (1), (1), (NULL), (NULL)) v(x) EXCEPT SELECT 2"),
    ("set2_union_all_then_except",
     "(SELECT id FROM emp WHERE id < 5 UNION ALL SELECT id FROM emp WHERE id < 3) "
     "EXCEPT SELECT 4"),
    ("set2_intersect_precedence", "SELECT 1 UNION SELECT 2 INTERSECT SELECT 3"),
    ("set2_except_union_left_assoc", "SELECT 1 EXCEPT SELECT 1 UNION SELECT 1"),
    ("set2_union_date_timestamp",
     "SELECT hired FROM emp WHERE id = 1 UNION SELECT TIMESTAMP '2015-03-01 00:00:00'"),
    ("set2_union_mixed_row_types",
     "SELECT 'x' AS a, 1 AS b UNION SELECT 'x', 1.0 UNION SELECT 'x', 1::float8"),
    ("set2_union_all_order_nulls",
     "SELECT dept FROM emp UNION ALL SELECT NULL ORDER BY 1 NULLS FIRST"),
    ("set2_union_real_numeric_literal",
     "SELECT rating FROM emp WHERE id = 13 UNION SELECT 3.9"),
    ("set2_values_mixed_types",
     "SELECT * FROM (VALUES (1, 'a'), (2.5, NULL), (NULL, 'c')) v(n, s) ORDER BY n NULLS FIRST"),
    ("set2_values_int_double", "SELECT x, x / 2 FROM (VALUES (1), (2.5::float8), (3)) v(x)"),
    ("set2_values_date_timestamp",
     "SELECT x FROM (VALUES (DATE '2024-01-01'), (TIMESTAMP '2024-01-01 12:00:00')) v(x) "
     "ORDER BY x"),

    # -- window functions, round 2 --
    ("win2_rank_null_partition_nulls_first",
     "SELECT id, rank() OVER (PARTITION BY dept ORDER BY bonus NULLS FIRST) FROM emp"),
    ("win2_dense_rank_null_order",
     "SELECT id, dense_rank() OVER (ORDER BY dept NULLS FIRST) FROM emp"),
    ("win2_count_range_ties_nulls", "SELECT id, count(*) OVER (ORDER BY level) FROM emp"),
    ("win2_sum_desc_range",
     "SELECT id, sum(bonus) OVER (PARTITION BY dept ORDER BY level DESC) FROM emp"),
    ("win2_percent_rank_desc_nulls",
     "SELECT id, percent_rank() OVER (PARTITION BY active ORDER BY salary DESC) FROM emp"),
    ("win2_cume_dist_nulls_first",
     "SELECT id, cume_dist() OVER (ORDER BY hired NULLS FIRST) FROM emp"),
    ("win2_count_partition_nullable",
     "SELECT id, count(bonus) OVER (PARTITION BY manager_id), count(*) OVER "
     "(PARTITION BY manager_id) FROM emp"),
    ("win2_avg_partition_expression",
     "SELECT id, round(avg(salary) OVER (PARTITION BY level % 2), 2) FROM emp"),
    ("win2_rank_two_keys_nulls",
     "SELECT id, rank() OVER (ORDER BY salary DESC NULLS LAST, bonus) FROM emp"),
    ("win2_rank_lower_name", "SELECT id, rank() OVER (ORDER BY lower(name)) FROM emp"),
    ("win2_dense_rank_desc_nulls_last",
     "SELECT id, dense_rank() OVER (PARTITION BY dept ORDER BY hired DESC NULLS LAST) "
     "FROM emp"),
    ("win2_over_grouped_counts",
     "SELECT dept, count(*), sum(count(*)) OVER (ORDER BY dept NULLS FIRST) "
     "FROM emp GROUP BY dept"),
    ("win2_named_window_ties",
     "SELECT id, rank() OVER w, percent_rank() OVER w, cume_dist() OVER w FROM emp "
     "WINDOW w AS (ORDER BY rating)"),
    ("win2_sales_running_note",
     "SELECT id, sum(qty) OVER (PARTITION BY note ORDER BY day) FROM sales"),
    ("win2_sum_range_numeric_ties",
     "SELECT id, sum(salary) OVER (ORDER BY salary NULLS FIRST) FROM emp"),

    # -- date and time, round 2 --
    ("dt2_timestamp_month_end",
     "SELECT TIMESTAMP '2024-01-31 10:00' + INTERVAL '1 month', "
     "TIMESTAMP '2023-01-31 00:00' + INTERVAL '1 month', "
     "TIMESTAMP '2024-02-29 00:00' - INTERVAL '1 year', "
     "TIMESTAMP '2024-02-29 00:00' + INTERVAL '4 years'"),
    ("dt2_timestamp_month_chain",
     "SELECT TIMESTAMP '2024-03-31 00:00' - INTERVAL '1 month', "
     "TIMESTAMP '2024-01-31' + INTERVAL '1 month' + INTERVAL '1 month', "
     "TIMESTAMP '2024-01-31' + INTERVAL '2 months'"),
    ("dt2_date_differences",
     "SELECT DATE '2024-03-01' - DATE '2024-02-01', DATE '2023-03-01' - DATE '2023-02-01', "
     "DATE '2025-01-01' - DATE '2024-01-01', DATE '2000-03-01' - DATE '2000-02-28', "
     "DATE '1900-03-01' - DATE '1900-02-28'"),
    ("dt2_epoch_before_1970",
     "SELECT extract(epoch from DATE '1969-12-31'), "
     "extract(epoch from TIMESTAMP '1960-01-01 00:00:01'), extract(epoch from DATE '1970-01-01')"),
    ("dt2_dow_sunday",
     "SELECT extract(dow from DATE '2024-06-02'), extract(isodow from DATE '2024-06-02'), "
     "extract(dow from DATE '2024-06-03'), to_char(DATE '2024-06-02', 'D ID')"),
    ("dt2_week_of_jan_first",
     "SELECT extract(week from DATE '2021-01-01'), extract(week from DATE '2024-01-01'), "
     "extract(week from DATE '2020-12-31'), extract(isoyear from DATE '2021-01-01'), "
     "extract(year from DATE '2021-01-01')"),
    ("dt2_week_year_end",
     "SELECT extract(week from DATE '2018-12-31'), extract(isoyear from DATE '2018-12-31'), "
     "extract(doy from DATE '2024-12-31'), extract(doy from DATE '2023-12-31')"),
    ("dt2_fractional_seconds",
     "SELECT extract(second from TIMESTAMP '2024-06-01 10:00:05.25'), "
     "extract(milliseconds from TIMESTAMP '2024-06-01 10:00:05.25'), "
     "extract(microseconds from TIMESTAMP '2024-06-01 10:00:05.25')"),
    ("dt2_interval_comparisons",
     "SELECT INTERVAL '1 day' = INTERVAL '24 hours', INTERVAL '1 month' = INTERVAL '30 days', "
     "INTERVAL '1 year' > INTERVAL '360 days', INTERVAL '1 year' = INTERVAL '12 months', "
     "INTERVAL '36 hours' > INTERVAL '1 day 11 hours'"),
    ("dt2_time_of_day_filter",
     "SELECT id FROM emp WHERE last_login - last_login::date > INTERVAL '12 hours'"),
    ("dt2_timestamp_le_date", "SELECT id FROM emp WHERE last_login <= DATE '2024-06-01'"),
    ("dt2_timestamp_between_dates",
     "SELECT id FROM emp WHERE last_login BETWEEN '2024-06-01' AND '2024-06-02'"),
    ("dt2_between_symmetric",
     "SELECT id FROM emp WHERE salary BETWEEN SYMMETRIC 100000 AND 60000"),
    ("dt2_not_between_reversed_dates",
     "SELECT id FROM emp WHERE hired NOT BETWEEN '2020-01-01' AND '2015-01-01'"),
    ("dt2_date_trunc_boundaries",
     "SELECT date_trunc('week', TIMESTAMP '2024-06-02 12:00'), "
     "date_trunc('week', TIMESTAMP '2024-01-01 00:00'), "
     "date_trunc('month', TIMESTAMP '2024-02-29 23:59:59.999'), "
     "date_trunc('week', TIMESTAMP '2021-01-01 00:00')"),
    ("dt2_timestamp_differences",
     "SELECT TIMESTAMP '2024-02-29 12:00' - TIMESTAMP '2023-02-28 12:00', "
     "TIMESTAMP '2024-03-01' - TIMESTAMP '2024-02-28', "
     "TIMESTAMP '2024-01-01 00:00' - TIMESTAMP '2024-01-01 00:00:01'"),
    ("dt2_date_plus_days_leap",
     "SELECT DATE '2024-02-29' + 365, DATE '2023-03-01' - 1, DATE '2100-02-28' + 1, "
     "DATE '2000-02-28' + 1, 1 + DATE '2024-12-31'"),
    ("dt2_date_timestamp_compare",
     "SELECT DATE '2024-02-29' = TIMESTAMP '2024-02-29 00:00:00', "
     "DATE '2024-02-29' < TIMESTAMP '2024-02-29 00:00:01', "
     "DATE '2024-03-01' > TIMESTAMP '2024-02-29 23:59:59', '2024-02-29'::date + 1 = "
     "'2024-03-01'::date"),
    ("dt2_epoch_values",
     "SELECT extract(epoch from TIMESTAMP '2024-02-29 12:34:56.5'), "
     "extract(epoch from INTERVAL '1 month'), extract(epoch from INTERVAL '1 year'), "
     "extract(epoch from INTERVAL '-1 day 2 hours')"),
    ("dt2_interval_scaling",
     "SELECT INTERVAL '1 day' * 1.5, INTERVAL '1 month' / 2, INTERVAL '90 minutes' * 2, "
     "2 * INTERVAL '1 hour'"),
    ("dt2_generate_series_days",
     "SELECT count(*), min(g), max(g) FROM generate_series(TIMESTAMP '2024-02-01', "
     "TIMESTAMP '2024-03-01', INTERVAL '1 day') AS g"),
    ("dt2_generate_series_month_end",
     "SELECT g FROM generate_series(TIMESTAMP '2024-01-31', TIMESTAMP '2024-06-30', "
     "INTERVAL '1 month') AS g ORDER BY g"),
    ("dt2_timestamp_to_date_compare",
     "SELECT id FROM emp WHERE last_login::date = hired"),
    ("dt2_interval_sum_avg",
     "SELECT sum(last_login - TIMESTAMP '2024-01-01'), count(*) FROM emp "
     "WHERE last_login >= '2024-01-01'"),
    ("dt2_case_date_timestamp",
     "SELECT id, CASE WHEN id = 1 THEN hired ELSE last_login END FROM emp WHERE id IN (1, 2)"),
    ("dt2_fraction_rounding",
     "SELECT TIMESTAMP '2024-01-01 00:00:00.1234567', TIMESTAMP '2024-01-01 23:59:59.9999999', "
     "'2024-01-01 24:00:00'::timestamp"),

    # -- ordering, LIMIT and OFFSET, round 2 --
    ("order2_three_keys_mixed",
     "SELECT id, dept, level FROM emp ORDER BY dept DESC NULLS LAST, level NULLS FIRST, id DESC"),
    ("order2_desc_default_nulls", "SELECT id, bonus FROM emp ORDER BY bonus DESC, id"),
    ("order2_nulls_first_then_desc_last",
     "SELECT id FROM emp ORDER BY manager_id NULLS FIRST, hired DESC NULLS LAST, id"),
    ("order2_expression_not_selected",
     "SELECT name FROM emp ORDER BY salary - coalesce(bonus, 0) DESC NULLS LAST, id"),
    ("order2_length_then_value",
     "SELECT id, code FROM emp ORDER BY length(code) DESC NULLS LAST, code, id"),
    ("order2_distinct_two_columns", "SELECT DISTINCT active, level FROM emp ORDER BY 1, 2"),
    ("order2_limit_zero", "SELECT id FROM emp ORDER BY id LIMIT 0"),
    ("order2_offset_past_end", "SELECT id FROM emp ORDER BY id OFFSET 20"),
    ("order2_limit_past_end", "SELECT id FROM emp ORDER BY id LIMIT 5 OFFSET 14"),
    ("order2_limit_null", "SELECT id FROM emp ORDER BY id DESC LIMIT NULL OFFSET 0"),
    ("order2_limit_real_ties",
     "SELECT id, rating FROM emp ORDER BY rating DESC NULLS LAST, id LIMIT 5"),
    ("order2_count_then_dept_desc",
     "SELECT dept, count(*) AS n FROM emp GROUP BY dept ORDER BY n, dept DESC"),
    ("order2_values_text_nulls",
     "SELECT * FROM (VALUES (1, 'b'), (2, NULL), (3, 'a'), (4, '')) v(n, s) ORDER BY s DESC, n"),
    ("order2_values_numeric",
     "SELECT x FROM (VALUES (1.5), (-0.5), (1), (10), (NULL), (-10)) v(x) ORDER BY x"),
    ("order2_subquery_limit_outer_order",
     "SELECT id FROM (SELECT id FROM emp ORDER BY salary DESC NULLS LAST, id LIMIT 5) t "
     "ORDER BY id"),

    # -- errors, round 2 --
    ("err2_int_min_div_minus_one", "SELECT (-2147483648)::int / (-1)::int"),
    ("err2_smallint_overflow", "SELECT 32767::smallint + 1::smallint"),
    ("err2_text_exponent_to_int", "SELECT '1e3'::int"),
    ("err2_empty_to_numeric", "SELECT ''::numeric"),
    ("err2_negative_substr_length", "SELECT substr('hello', 2, -1)"),
    ("err2_group_by_text_constant", "SELECT count(*) FROM emp GROUP BY 'x'"),
    ("err2_min_boolean", "SELECT min(active) FROM emp"),
    ("err2_union_int_text", "SELECT 1 UNION SELECT 'a'"),
    ("err2_like_bad_escape", "SELECT 'a' LIKE 'a' ESCAPE 'ab'"),
    ("err2_scalar_subquery_two_rows",
     "SELECT id, (SELECT manager_id FROM emp WHERE dept = 'ops') FROM emp"),
    ("err2_numeric_modulo_zero", "SELECT 1.5 % 0"),
    ("err2_in_subquery_type_mismatch",
     "SELECT id FROM emp WHERE salary IN (SELECT name FROM dept)"),
    ("err2_negative_power_fraction", "SELECT (-8.0) ^ 0.5"),
    ("err2_ln_zero", "SELECT ln(0)"),
    ("err2_negative_limit", "SELECT id FROM emp ORDER BY id LIMIT -1"),
    ("err2_ambiguous_bool_text", "SELECT 'o'::boolean"),
    ("err2_like_ends_with_escape", "SELECT 'a\\' LIKE 'a\\'"),
    ("err2_float_overflow", "SELECT 1e308::float8 * 10"),
    ("err2_numeric_round_overflow", "SELECT CAST(9.995 AS numeric(3,2))"),
    ("err2_numeric_to_int_rounds_over", "SELECT 2147483647.5::int"),

    # -- grouping sets and ordered-set aggregates --
    ("gs_rollup_grouping_having",
     "SELECT dept, active, count(*), sum(salary), grouping(dept), grouping(active, dept) "
     "FROM emp GROUP BY ROLLUP (dept, active) HAVING dept IS NULL OR dept = 'eng'"),
    ("gs_fixed_key_and_rollup",
     "SELECT dept, level, count(*) FROM emp WHERE dept IS NOT NULL "
     "GROUP BY dept, ROLLUP (level) HAVING dept <> 'ops'"),
    ("gs_nested_sets",
     "SELECT dept, active, count(*) FROM emp GROUP BY GROUPING SETS (ROLLUP (dept), "
     "CUBE (active))"),
    ("gs_duplicate_sets",
     "SELECT dept, count(*) FROM emp GROUP BY GROUPING SETS ((dept), (dept), ())"),
    ("gs_rollup_composite_unit",
     "SELECT dept, active, level, count(*) FROM emp "
     "GROUP BY ROLLUP ((dept, active), level)"),
    ("gs_cross_product_of_lists",
     "SELECT dept, active, level, count(*) FROM emp WHERE id < 8 "
     "GROUP BY ROLLUP (dept), CUBE (active, level)"),
    ("gs_empty_input_grand_total",
     "SELECT dept, count(*), sum(salary), grouping(dept) FROM emp WHERE false "
     "GROUP BY ROLLUP (dept)"),
    ("gs_empty_set_only", "SELECT count(*), max(name) FROM emp GROUP BY GROUPING SETS (())"),
    ("gs_order_by_grouping",
     "SELECT dept, sum(salary) FROM emp GROUP BY ROLLUP (dept) "
     "ORDER BY grouping(dept), dept NULLS FIRST"),
    ("gs_expression_key",
     "SELECT extract(year FROM hired) AS y, count(*) FROM emp "
     "GROUP BY ROLLUP (extract(year FROM hired)) "
     "ORDER BY grouping(extract(year FROM hired)), y NULLS FIRST"),
    ("gs_positional_in_rollup",
     "SELECT dept, active, count(*) FROM emp GROUP BY ROLLUP (1, 2)"),
    ("gs_list_and_distinct_aggregates",
     "SELECT dept, string_agg(name, ',' ORDER BY name), count(DISTINCT level), "
     "avg(bonus) FROM emp GROUP BY CUBE (dept)"),
    ("gs_window_over_rollup",
     "SELECT dept, sum(salary), rank() OVER (ORDER BY sum(salary) DESC NULLS LAST) "
     "FROM emp GROUP BY ROLLUP (dept)"),
    ("gs_grouping_in_expression",
     "SELECT CASE WHEN grouping(dept) = 1 THEN 'all' ELSE dept END AS d, count(*) "
     "FROM emp GROUP BY ROLLUP (dept)"),
    ("gs_grouping_of_ungrouped_column",
     "SELECT dept, grouping(salary) FROM emp GROUP BY ROLLUP (dept)"),
    ("gs_grouping_without_group_by", "SELECT grouping(dept) FROM emp"),
    ("gs_cube_too_large",
     "SELECT count(*) FROM emp GROUP BY CUBE (id, name, dept, salary, bonus, hired, "
     "last_login, active, level, manager_id, rating, code, id + 1)"),
    ("gs_ungrouped_column", "SELECT dept, name FROM emp GROUP BY ROLLUP (dept)"),
    ("osa_percentiles_numbers",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY level), "
     "percentile_cont(0.25) WITHIN GROUP (ORDER BY bonus), "
     "percentile_cont(0.9) WITHIN GROUP (ORDER BY rating DESC), "
     "percentile_disc(0.5) WITHIN GROUP (ORDER BY level) FROM emp"),
    ("osa_percentile_bounds",
     "SELECT percentile_cont(0) WITHIN GROUP (ORDER BY salary), "
     "percentile_cont(1) WITHIN GROUP (ORDER BY salary), "
     "percentile_disc(0) WITHIN GROUP (ORDER BY salary), "
     "percentile_disc(1) WITHIN GROUP (ORDER BY salary) FROM emp"),
    ("osa_percentile_disc_types",
     "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY name), "
     "percentile_disc(0.3) WITHIN GROUP (ORDER BY hired DESC), "
     "percentile_disc(0.7) WITHIN GROUP (ORDER BY last_login) FROM emp"),
    ("osa_grouped",
     "SELECT dept, percentile_cont(0.5) WITHIN GROUP (ORDER BY salary), "
     "percentile_disc(0.5) WITHIN GROUP (ORDER BY bonus), "
     "mode() WITHIN GROUP (ORDER BY level) FROM emp GROUP BY dept"),
    ("osa_mode_ties",
     "SELECT mode() WITHIN GROUP (ORDER BY x), mode() WITHIN GROUP (ORDER BY x DESC), "
     "mode() WITHIN GROUP (ORDER BY y) FROM (VALUES (3, 'b'), (1, 'a'), (2, NULL), (3, 'a'), "
     "(1, 'b'), (2, NULL)) v(x, y)"),
    ("osa_empty_group",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY salary), "
     "percentile_disc(0.5) WITHIN GROUP (ORDER BY name), mode() WITHIN GROUP (ORDER BY dept) "
     "FROM emp WHERE false"),
    ("osa_only_nulls_group",
     "SELECT dept, percentile_cont(0.5) WITHIN GROUP (ORDER BY bonus) FROM emp "
     "WHERE id IN (2, 8, 16) GROUP BY dept"),
    ("osa_null_fraction",
     "SELECT percentile_cont(NULL::float8) WITHIN GROUP (ORDER BY salary), "
     "percentile_disc(CAST(NULL AS float8)) WITHIN GROUP (ORDER BY name) FROM emp"),
    ("osa_in_rollup_and_having",
     "SELECT dept, percentile_cont(0.5) WITHIN GROUP (ORDER BY salary) FROM emp "
     "GROUP BY ROLLUP (dept) HAVING percentile_cont(0.5) WITHIN GROUP (ORDER BY salary) "
     "> 60000"),
    ("osa_interpolate_big_ints",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) "
     "FROM (VALUES (9007199254740993), (9007199254740995), (1)) v(x)"),
    ("osa_infinities",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), "
     "percentile_cont(0.25) WITHIN GROUP (ORDER BY x) "
     "FROM (VALUES ('-Infinity'::float8), ('Infinity'), ('Infinity'), (1)) v(x)"),
    ("osa_fraction_out_of_range",
     "SELECT percentile_cont(1.5) WITHIN GROUP (ORDER BY salary) FROM emp"),
    ("osa_negative_fraction",
     "SELECT percentile_disc(-0.1) WITHIN GROUP (ORDER BY salary) FROM emp"),
    ("osa_cont_over_text",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY name) FROM emp"),
    ("osa_without_within_group", "SELECT percentile_cont(0.5) FROM emp"),
    ("osa_within_group_on_plain_aggregate",
     "SELECT sum(salary) WITHIN GROUP (ORDER BY salary) FROM emp"),
    ("rec_union_stops_on_cycle",
     "WITH RECURSIVE g(x) AS (SELECT 1 UNION SELECT (x % 4) + 1 FROM g) SELECT x FROM g"),
    ("rec_union_dedups_within_step",
     "WITH RECURSIVE g(x, y) AS (VALUES (1, 'a'), (1, 'a'), (2, NULL) UNION "
     "SELECT x + 1, y FROM g WHERE x < 4) SELECT x, y FROM g"),
    ("rec_paths_and_depth",
     "WITH RECURSIVE t(id, path, depth) AS (SELECT id, name, 1 FROM emp WHERE manager_id "
     "IS NULL AND id = 1 UNION ALL SELECT e.id, t.path || ' > ' || COALESCE(e.name, '?'), "
     "t.depth + 1 FROM emp e JOIN t ON e.manager_id = t.id WHERE t.depth < 4) "
     "SELECT id, path, depth FROM t"),
    ("rec_numeric_doubling",
     "WITH RECURSIVE s(n) AS (SELECT 1.5 UNION ALL SELECT n * 2 FROM s WHERE n < 10000) "
     "SELECT max(n), count(*), sum(n) FROM s"),
    ("rec_used_twice_and_joined",
     "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 6) "
     "SELECT a.n, b.n FROM s a JOIN s b ON b.n = a.n * 2"),
    ("rec_with_plain_cte_and_filter_outside",
     "WITH RECURSIVE base AS (SELECT id FROM emp WHERE dept = 'eng'), "
     "r(id, k) AS (SELECT id, 0 FROM base UNION ALL SELECT id, k + 1 FROM r WHERE k < 2) "
     "SELECT id, count(*), max(k) FROM r WHERE id > 2 GROUP BY id"),
    ("rec_derived_table_in_term",
     "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT m FROM (SELECT n + 2 AS m FROM s) "
     "d WHERE m < 9) SELECT n FROM s"),
    ("rec_calendar_aggregate",
     "WITH RECURSIVE d(day) AS (SELECT DATE '2024-01-01' UNION ALL SELECT day + 7 FROM d "
     "WHERE day < DATE '2024-03-01') SELECT d.day, count(s.id), sum(s.amount) FROM d "
     "LEFT JOIN sales s ON s.day >= d.day AND s.day < d.day + 7 GROUP BY d.day"),
    ("rec_empty_anchor",
     "WITH RECURSIVE s(n) AS (SELECT id FROM emp WHERE false UNION ALL SELECT n + 1 FROM s) "
     "SELECT count(*) FROM s"),
    ("rec_not_recursive_in_with_recursive",
     "WITH RECURSIVE x(a) AS (SELECT 1 UNION ALL SELECT 2) SELECT a FROM x"),
    ("rec_reference_twice_in_term",
     "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT a.n + 1 FROM s a, s b "
     "WHERE a.n < 3) SELECT n FROM s"),
    ("rec_reference_in_anchor",
     "WITH RECURSIVE s(n) AS (SELECT n FROM s UNION ALL SELECT 1) SELECT n FROM s"),
    ("rec_reference_in_subquery",
     "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT 2 WHERE 1 IN (SELECT n FROM s)) "
     "SELECT n FROM s"),
    ("rec_aggregate_in_term",
     "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT max(n) + 1 FROM s WHERE n < 3) "
     "SELECT n FROM s"),
    ("rec_column_count_mismatch",
     "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1, 2 FROM s WHERE n < 3) "
     "SELECT n FROM s"),
    ("rec_too_many_column_names",
     "WITH RECURSIVE s(n, m) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 3) "
     "SELECT n FROM s"),
    ("rng_moving_week_by_day",
     "SELECT id, day, amount, sum(amount) OVER (ORDER BY day RANGE BETWEEN "
     "INTERVAL '6 days' PRECEDING AND CURRENT ROW), count(*) OVER (ORDER BY day RANGE "
     "BETWEEN INTERVAL '6 days' PRECEDING AND CURRENT ROW) FROM sales WHERE id <= 40"),
    ("rng_month_interval_partitioned",
     "SELECT id, count(*) OVER (PARTITION BY note ORDER BY day RANGE BETWEEN "
     "INTERVAL '1 month' PRECEDING AND INTERVAL '1 month' FOLLOWING) FROM sales"),
    ("rng_timestamp_hours_desc",
     "SELECT id, count(*) OVER (ORDER BY last_login DESC RANGE BETWEEN "
     "INTERVAL '36 hours' PRECEDING AND INTERVAL '1 hour' FOLLOWING) FROM emp"),
    ("rng_numeric_offsets_with_nulls",
     "SELECT id, salary, sum(salary) OVER (ORDER BY salary RANGE BETWEEN 10000 PRECEDING "
     "AND 5000.5 FOLLOWING), min(id) OVER (ORDER BY salary DESC RANGE BETWEEN 1 PRECEDING "
     "AND 0 FOLLOWING) FROM emp"),
    ("rng_integer_offsets_excluding_current",
     "SELECT id, level, count(*) OVER (ORDER BY level RANGE BETWEEN 1 PRECEDING AND "
     "1 PRECEDING), max(id) OVER (ORDER BY level RANGE BETWEEN 1 FOLLOWING AND "
     "UNBOUNDED FOLLOWING) FROM emp"),
    ("rng_double_offsets",
     "SELECT id, count(*) OVER (ORDER BY bonus RANGE BETWEEN 100.5 PRECEDING AND "
     "1000 FOLLOWING), avg(rating) OVER (ORDER BY rating RANGE BETWEEN 0.5 PRECEDING AND "
     "CURRENT ROW) FROM emp"),
    ("rng_current_row_to_end",
     "SELECT id, count(*) OVER (ORDER BY level NULLS FIRST RANGE BETWEEN CURRENT ROW AND "
     "UNBOUNDED FOLLOWING) FROM emp"),
    ("rng_two_order_keys", "SELECT sum(salary) OVER (ORDER BY level, id RANGE BETWEEN "
                           "1 PRECEDING AND CURRENT ROW) FROM emp"),
    ("rng_negative_offset", "SELECT sum(salary) OVER (ORDER BY level RANGE BETWEEN "
                            "-1 PRECEDING AND CURRENT ROW) FROM emp"),
    ("rng_interval_on_number", "SELECT sum(salary) OVER (ORDER BY level RANGE BETWEEN "
                               "INTERVAL '1 day' PRECEDING AND CURRENT ROW) FROM emp"),
    ("osa_as_window", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY salary) OVER () "
                      "FROM emp"),

    # -- writes (state changes; order matters) --
    ("dml_insert_one",
     "INSERT INTO emp (id, name, dept, salary, hired, active) "
     "VALUES (100, 'Walt', 'ops', 41000, '2024-05-01', true)"),
    ("dml_select_insert_one", "SELECT * FROM emp WHERE id = 100"),
    ("dml_insert_two",
     "INSERT INTO dept VALUES ('research', 250000, 'Oslo'), ('support', 90000, NULL)"),
    ("dml_select_insert_two", "SELECT * FROM dept WHERE name IN ('research', 'support')"),
    ("dml_insert_select",
     "INSERT INTO sales (id, emp_id, day, amount, qty, note) "
     "SELECT 1000 + id, id, DATE '2024-06-30', salary / 100, level, 'bonus' "
     "FROM emp WHERE dept = 'hr'"),
    ("dml_select_insert_select",
     "SELECT id, emp_id, day, amount, qty, note FROM sales WHERE id >= 1000"),
    ("dml_insert_omitted_columns", "INSERT INTO emp (id, name) VALUES (101, 'Nadia')"),
    ("dml_select_omitted_columns", "SELECT * FROM emp WHERE id = 101"),
    ("dml_insert_rounds_to_column_type",
     "INSERT INTO emp (id, name, salary, bonus, rating, level) "
     "VALUES (102, 'Omar', 1234.567, 1.5, 2.25, '3')"),
    ("dml_select_rounds_to_column_type",
     "SELECT id, salary, bonus, rating, level FROM emp WHERE id = 102"),
    ("dml_update_expression", "UPDATE emp SET salary = salary * 1.10 WHERE dept = 'ops'"),
    ("dml_select_update_expression", "SELECT id, salary FROM emp WHERE dept = 'ops'"),
    ("dml_update_no_rows", "UPDATE emp SET level = 9 WHERE id = 9999"),
    ("dml_update_set_null", "UPDATE emp SET bonus = NULL, code = NULL WHERE id = 4"),
    ("dml_select_update_set_null", "SELECT id, bonus, code FROM emp WHERE id = 4"),
    ("dml_update_two_columns",
     "UPDATE dept SET budget = budget + 1000, city = upper(city) WHERE city IS NOT NULL"),
    ("dml_select_update_two_columns", "SELECT * FROM dept"),
    ("dml_delete_subquery", "DELETE FROM sales WHERE emp_id NOT IN (SELECT id FROM emp)"),
    ("dml_select_delete_subquery", "SELECT count(*), count(DISTINCT emp_id) FROM sales"),
    ("dml_select_totals",
     "SELECT (SELECT count(*) FROM emp), (SELECT count(*) FROM sales), "
     "(SELECT count(*) FROM dept), (SELECT sum(salary) FROM emp)"),
    ("dml_insert_duplicate_key", "INSERT INTO emp (id, name) VALUES (1, 'Again')"),
    ("dml_select_duplicate_key", "SELECT id, name FROM emp WHERE id = 1"),
    ("dml_insert_null_key", "INSERT INTO emp (id, name) VALUES (NULL, 'Nobody')"),
    ("dml_insert_smallint_too_large",
     "INSERT INTO emp (id, name, level) VALUES (300, 'Big', 40000)"),
    ("dml_select_smallint_too_large", "SELECT count(*) FROM emp WHERE id = 300"),
    ("dml_insert_varchar_too_long",
     "INSERT INTO emp (id, name, code) VALUES (301, 'Long', 'ABCDEFGHIJ')"),
    ("dml_update_key_to_duplicate", "UPDATE dept SET name = 'eng' WHERE name = 'hr'"),
    ("dml_select_update_key_to_duplicate", "SELECT name, budget FROM dept"),
    ("dml_insert_batch_with_one_duplicate",
     "INSERT INTO emp (id, name) VALUES (200, 'First'), (2, 'Dup'), (201, 'Third')"),
    ("dml_select_batch_with_one_duplicate",
     "SELECT id, name FROM emp WHERE id IN (2, 200, 201)"),
]

# views over time series, generate_series and big joins (corpus_views.py; its own tables)
from .corpus_views import SETUP as _VIEW_SETUP, STATEMENTS as _VIEW_STATEMENTS  # noqa: E402

SETUP += _VIEW_SETUP
STATEMENTS += _VIEW_STATEMENTS

# the time-series section (issue 27): its own table and statements, after the writes above
# (they read only their table)
from .corpus_time import SETUP as _TIME_SETUP  # noqa: E402
from .corpus_time import STATEMENTS as _TIME_STATEMENTS  # noqa: E402

SETUP = SETUP + _TIME_SETUP
STATEMENTS = STATEMENTS + _TIME_STATEMENTS

# INSERT / UPDATE / DELETE ... RETURNING (corpus_returning.py; its own table, written only
# by its own statements)
from .corpus_returning import SETUP as _RETURNING_SETUP  # noqa: E402
from .corpus_returning import STATEMENTS as _RETURNING_STATEMENTS  # noqa: E402

SETUP = SETUP + _RETURNING_SETUP
STATEMENTS = STATEMENTS + _RETURNING_STATEMENTS
