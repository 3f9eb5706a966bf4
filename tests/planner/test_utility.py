"""Utility statements (planner.utility): DDL, SHOW and DESCRIBE against a real Catalog.

Every statement goes through `planner.ddl.parse` (the KuduSQL dialect) and
`execute_utility`; results are checked as Arrow tables, persistence by reopening the
catalog, and errors by SQLSTATE and 1-based position.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal

import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

from engine.catalog import Catalog
from engine.catalog.partition import PartitionSchema, RangeSchema
from engine.schema import ColumnSchema, Schema
from engine.tablet.tablet import Tablet
from engine.types import DataType
from planner.ddl import create_table_spec, parse
from planner.dialect import (
    KuduAddRangePartition,
    KuduChangeColumn,
    KuduDropRangePartition,
    KuduShow,
    KuduSQL,
    KuduUnsetProperties,
)
from planner.errors import SqlError
from planner.result import StatementResult
from planner.utility import execute_utility, is_utility
from tests.planner.test_ddl import ARCHITECTURE_EXAMPLE, EXAMPLES

METRICS = """CREATE TABLE metrics (
  host STRING NOT NULL, metric STRING NOT NULL, ts TIMESTAMP NOT NULL,
  value DOUBLE ENCODING BIT_SHUFFLE COMPRESSION LZ4, PRIMARY KEY (host, metric, ts))
PARTITION BY HASH (host) PARTITIONS 2,
             RANGE (ts) (PARTITION VALUES < '2026-01-01',
                         PARTITION '2026-01-01' <= VALUES < '2027-01-01')
STORED AS KUDU"""

SALES = """CREATE TABLE sales_by_year (year INT, sale_id INT, amount INT,
  PRIMARY KEY (year, sale_id))
PARTITION BY RANGE (year) (PARTITION VALUE = 2012, PARTITION VALUE = 2013,
  PARTITION VALUE = 2014) STORED AS KUDU"""


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(str(tmp_path / "data"))
    yield c
    c.close()


def run(catalog: Catalog, sql: str) -> StatementResult:
    (ast,) = parse(sql)
    assert is_utility(ast), sql
    return execute_utility(catalog, ast, sql)


def rows(catalog: Catalog, sql: str) -> list[dict]:
    return run(catalog, sql).table.to_pylist()


def err(catalog: Catalog, sql: str, sqlstate: str, at: str | None = None) -> SqlError:
    """Run `sql`, expect an error with `sqlstate` pointing at the first or last `at`."""
    with pytest.raises(SqlError) as ei:
        run(catalog, sql)
    e = ei.value
    assert e.sqlstate == sqlstate, repr(e)
    if at is not None:
        assert e.position in (sql.index(at) + 1, sql.rindex(at) + 1), (
            repr(e), sql[(e.position or 1) - 1:])
    return e


def reopen(catalog: Catalog, tmp_path) -> Catalog:
    catalog.close()
    return Catalog.open(str(tmp_path / "data"))


# -- parsing --------------------------------------------------------------------------------

@pytest.mark.parametrize("sql, node", [
    ("ALTER TABLE t ADD RANGE PARTITION VALUES < 10", KuduAddRangePartition),
    ("ALTER TABLE t ADD PARTITION 30 <= VALUES < 50", KuduAddRangePartition),
    ("alter table t add if not exists range partition 10 < values <= 30",
     KuduAddRangePartition),
    ("ALTER TABLE t DROP RANGE PARTITION VALUE = 2012", KuduDropRangePartition),
    ("ALTER TABLE t DROP IF EXISTS RANGE PARTITION VALUE = (1, 'a')", KuduDropRangePartition),
    ("ALTER TABLE t ADD RANGE PARTITION UNBOUNDED", KuduAddRangePartition),
    ("ALTER TABLE t CHANGE a b INT", KuduChangeColumn),
    ("ALTER TABLE t CHANGE COLUMN a b BIGINT", KuduChangeColumn),
    ("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a', 'b')", KuduUnsetProperties),
    ("ALTER TABLE t SET TBLPROPERTIES ('a'='b', 'c'='d')", exp.AlterSet),
    ("ALTER TABLE t ADD COLUMNS (a INT, b STRING NOT NULL DEFAULT 'x')", exp.Schema),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT ENCODING RLE", exp.ColumnDef),
    ("ALTER TABLE t DROP COLUMN IF EXISTS c", exp.Drop),
    ("ALTER TABLE t RENAME COLUMN a TO b", exp.RenameColumn),
    ("ALTER TABLE t RENAME TO u", exp.AlterRename),
    ("SHOW TABLES", KuduShow),
    ("SHOW TABLES LIKE 'a*|b'", KuduShow),
    ("SHOW COLUMNS FROM t", KuduShow),
    ("SHOW COLUMNS IN db.t", KuduShow),
    ("SHOW PARTITIONS t", KuduShow),
    ("SHOW RANGE PARTITIONS t", KuduShow),
    ("SHOW TABLETS \"T\"", KuduShow),
    ("SHOW CREATE TABLE t", KuduShow),
    ("DESCRIBE t", exp.Describe),
    ("DESC t", exp.Describe),
    ("DROP TABLE IF EXISTS a, b", exp.Drop),
    ("COMMENT ON TABLE t IS 'x'", exp.Comment),
])
def test_statements_parse_to_nodes_and_round_trip(sql, node):
    (ast,) = parse(sql)
    assert is_utility(ast)
    assert not isinstance(ast, exp.Command)
    assert any(isinstance(n, node) for n in ast.walk()), repr(ast)
    again = sqlglot.parse_one(ast.sql(dialect=KuduSQL), dialect=KuduSQL)
    assert again == ast, ast.sql(dialect=KuduSQL)


@pytest.mark.parametrize("sql", [
    "SELECT 1", "CREATE TABLE t2 AS SELECT 1 AS a", "DESCRIBE SELECT 1", "DROP VIEW v",
    "SHOW search_path", "INSERT INTO t VALUES (1)",
])
def test_not_utility(sql):
    (ast,) = parse(sql)
    assert not is_utility(ast)


def test_show_of_a_setting_is_its_own_node():
    """SHOW of a setting is parsed once, into KuduShowSetting (the front door, issue 14:
    it was the Command Postgres makes of it, which the wire layer parsed again); another
    SHOW stays that Command."""
    from planner.commands import KuduShowSetting
    for sql, name in (("SHOW search_path", "search_path"),
                      ("SHOW TRANSACTION ISOLATION LEVEL", "transaction_isolation"),
                      ("show all", None)):
        (node,) = parse(sql)
        assert isinstance(node, KuduShowSetting) and node.args.get("name") == name
    assert parse("SHOW DATABASES") == sqlglot.parse("SHOW DATABASES", dialect="postgres")


@pytest.mark.parametrize("sql, at", [
    ("ALTER TABLE t FROBNICATE x", "FROBNICATE"),
    ("ALTER TABLE t ADD RANGE PARTITION VALUES", None),
    ("ALTER TABLE t ADD RANGE PARTITION VALUES < 3 junk", "junk"),
    ("SHOW COLUMNS t", "t"),
    ("SHOW TABLETS", None),
])
def test_syntax_errors(cat, sql, at):
    with pytest.raises(SqlError) as ei:
        parse(sql)
    assert ei.value.sqlstate == "42601"
    assert ei.value.position == (sql.rindex(at) + 1 if at else len(sql) + 1), repr(ei.value)


# -- CREATE / DROP --------------------------------------------------------------------------

def test_create_table_and_if_not_exists(cat, tmp_path):
    r = run(cat, METRICS)
    assert (r.command, r.table, r.notices) == ("CREATE TABLE", None, [])
    assert r.tag() == "CREATE TABLE"
    assert cat.list_tables() == ["metrics"]
    assert len(cat.get_table("metrics").tablet_ids) == 4
    r = run(cat, METRICS.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    assert r.notices == ['relation "metrics" already exists, skipping']
    sql = "create table Metrics (a int primary key)"
    err(cat, sql, "42P07", "Metrics")
    cat = reopen(cat, tmp_path)
    assert cat.list_tables() == ["metrics"]
    cat.close()


def test_create_table_errors_keep_their_sqlstate(cat):
    err(cat, "create table t (a int, b int)", "42P16")  # planner.ddl's own checks
    e = err(cat, "create table t (a int primary key) tblproperties "
                 "('kudu.num_tablet_replicas'='3')", "22023")
    assert "tablet servers" in e.message
    r = run(cat, "create table t (a int primary key comment 'k', b int comment 'x')")
    assert r.notices == ["column comments are not stored (the catalog keeps none): a, b"]


def test_drop_table(cat, tmp_path):
    run(cat, "create table a (k int primary key)")
    run(cat, "create table b (k int primary key)")
    sql = "drop table a, nope"
    e = err(cat, sql, "42P01", "nope")
    assert e.message == 'table "nope" does not exist'
    assert cat.list_tables() == ["a", "b"]  # nothing dropped
    r = run(cat, "drop table if exists nope, a")
    assert (r.command, r.notices) == ("DROP TABLE", ['table "nope" does not exist, skipping'])
    cat = reopen(cat, tmp_path)
    assert cat.list_tables() == ["b"]
    run(cat, "DROP TABLE b")
    assert cat.list_tables() == []
    cat.close()


# -- ALTER TABLE ----------------------------------------------------------------------------

def test_rename_table(cat, tmp_path):
    run(cat, "create table t (k int primary key, v string)")
    run(cat, "create table other (k int primary key)")
    cat.table("t").insert({"k": [1, 2], "v": ["a", "b"]})
    r = run(cat, "alter table t rename to u")
    assert (r.command, r.notices) == ("ALTER TABLE", [])
    sql = "alter table u rename to other"
    err(cat, sql, "42P07", "other")
    err(cat, "alter table t rename to x", "42P01", "t ")
    r = run(cat, "alter table if exists t rename to x")
    assert r.notices == ['relation "t" does not exist, skipping']
    cat = reopen(cat, tmp_path)
    assert cat.list_tables() == ["other", "u"]
    assert cat.table("u").lookup((2,)) == {"k": 2, "v": "b"}
    cat.close()


def test_add_columns(cat, tmp_path):
    run(cat, "create table t (id bigint primary key)")
    run(cat, "alter table t add column a int")
    run(cat, "alter table t add b string not null default 'none' encoding dict_encoding")
    run(cat, "alter table t add columns (c decimal(15,2) default 1.5, d date block_size 4096)")
    r = run(cat, "alter table t add if not exists columns (d date, e boolean)")
    assert r.notices == ['column "d" of relation "t" already exists, skipping']
    r = run(cat, "alter table t add column if not exists a int")
    assert r.notices == ['column "a" of relation "t" already exists, skipping']
    cat = reopen(cat, tmp_path)
    got = rows(cat, "describe t")
    assert [(r["name"], r["type"], r["nullable"], r["default"]) for r in got] == [
        ("id", "BIGINT", False, None), ("a", "INT", True, None),
        ("b", "STRING", False, "'none'"), ("c", "DECIMAL(15,2)", True, "1.50"),
        ("d", "DATE", True, None), ("e", "BOOLEAN", True, None)]
    assert got[2]["encoding"] == "DICT_ENCODING" and got[4]["block_size"] == 4096
    # the default fills rows written without the column
    cat.table("t").insert({"id": [1]})
    assert cat.table("t").lookup((1,)) == {"id": 1, "a": None, "b": "none",
                                          "c": decimal.Decimal("1.50"), "d": None, "e": None}
    cat.close()


def test_add_column_errors(cat):
    run(cat, "create table t (id bigint primary key, v int)")
    sql = "alter table t add column n int not null"
    e = err(cat, sql, "23502", "n int")
    assert e.message == 'column "n" of relation "t" contains null values'
    err(cat, "alter table t add column v bigint", "42701", "v bigint")
    err(cat, "alter table t add column k2 int primary key", "0A000", "k2")
    err(cat, "alter table t add column x footype", "42704", "footype")
    err(cat, "alter table t add column x int default 'a'", "22023", "'a'")
    err(cat, "alter table t add column x bigint encoding prefix_encoding", "22023")
    err(cat, "alter table nope add column x int", "42P01", "nope")
    assert cat.get_table("t").schema.names == ["id", "v"]


def test_add_and_drop_columns_on_a_table_with_rows(cat, tmp_path):
    run(cat, "create table t (id bigint primary key, v int) partition by hash (id) "
             "partitions 2")
    cat.table("t").insert({"id": [1, 2, 3], "v": [10, 20, 30]})
    run(cat, "alter table t add column x int")
    run(cat, "alter table t add column y string not null default 'none'")
    assert cat.table("t").lookup((1,)) == {"id": 1, "v": 10, "x": None, "y": "none"}
    run(cat, "alter table t drop column v")
    cat.table("t").update({"id": [2], "x": [5]})
    run(cat, "alter table t add column v bigint")  # a new column: the old values are gone
    cat = reopen(cat, tmp_path)
    got = sorted(cat.table("t").scan_table().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "x": None, "y": "none", "v": None},
                   {"id": 2, "x": 5, "y": "none", "v": None},
                   {"id": 3, "x": None, "y": "none", "v": None}]
    cat.close()


def test_multiple_actions_are_checked_before_any_applies(cat):
    run(cat, "create table t (id bigint primary key, v int)")
    err(cat, "alter table t add column a int, add column b int default 'x'", "22023")
    err(cat, "alter table t add column a int, drop column id", "42P16", "id")
    assert cat.get_table("t").schema.names == ["id", "v"]
    run(cat, "alter table t add column a int, drop column v, rename column a to w")
    assert cat.get_table("t").schema.names == ["id", "w"]


def test_drop_column(cat, tmp_path):
    run(cat, "create table t (a int, b string, v int, w int, primary key (a, b))")
    sql = "alter table t drop column b"
    e = err(cat, sql, "42P16", "b")
    assert e.message == 'cannot drop primary key column "b"'
    err(cat, "alter table t drop column nope", "42703", "nope")
    r = run(cat, "alter table t drop column if exists nope")
    assert r.notices == ['column "nope" of relation "t" does not exist, skipping']
    run(cat, "alter table t drop column v")
    run(cat, "alter table t drop w")
    cat = reopen(cat, tmp_path)
    assert cat.get_table("t").schema.names == ["a", "b"]
    run(cat, "alter table t add column v int")
    cat.table("t").insert({"a": [2], "b": ["y"], "v": [3]})
    run(cat, "alter table t drop column v")  # a table with rows
    assert cat.get_table("t").schema.names == ["a", "b"]
    assert cat.table("t").lookup((2, "y")) == {"a": 2, "b": "y"}
    cat.close()


def test_rename_columns_including_key_and_partition_columns(cat, tmp_path):
    run(cat, METRICS)
    tbl = cat.table("metrics")
    tbl.insert({"host": ["h1", "h2"], "metric": ["cpu", "cpu"],
                "ts": [dt.datetime(2025, 5, 1), dt.datetime(2026, 5, 1)], "value": [1.0, 2.0]})
    run(cat, "alter table metrics rename column host to node")
    run(cat, "alter table metrics rename column ts to at, rename column value to v")
    run(cat, "alter table metrics change metric name string")  # Impala's spelling
    err(cat, "alter table metrics change v v2 float", "0A000", "v2")
    err(cat, "alter table metrics change v v2 double not null", "0A000", "v2")
    err(cat, "alter table metrics rename column nope to x", "42703", "nope")
    err(cat, "alter table metrics rename column at to v", "42701", "v")
    cat = reopen(cat, tmp_path)
    meta = cat.get_table("metrics")
    assert meta.schema.names == ["node", "name", "at", "v"]
    assert meta.schema.key_names == ["node", "name", "at"]
    assert meta.partition_schema.hash_schemas[0].columns == ("node",)
    assert meta.partition_schema.range_schema.columns == ("at",)
    assert cat.table("metrics").lookup(("h2", "cpu", dt.datetime(2026, 5, 1))) == {
        "node": "h2", "name": "cpu", "at": dt.datetime(2026, 5, 1), "v": 2.0}
    assert cat.table("metrics").count_rows() == 2
    # the renamed range column takes new range partitions
    run(cat, "alter table metrics add range partition '2027-01-01' <= values < '2028-01-01'")
    text = rows(cat, "show create table metrics")[0]["statement"]
    assert "HASH (node) PARTITIONS 2, RANGE (at)" in text
    cat.close()


def test_range_partitions(cat, tmp_path):
    run(cat, SALES)
    tbl = cat.table("sales_by_year")
    tbl.insert({"year": [2012, 2013, 2014], "sale_id": [1, 2, 3], "amount": [10, 20, 30]})
    run(cat, "ALTER TABLE sales_by_year ADD RANGE PARTITION VALUE = 2017")
    run(cat, "alter table sales_by_year add partition 2020 <= values < 2030")  # RANGE optional
    run(cat, "ALTER TABLE sales_by_year DROP RANGE PARTITION VALUE = 2012")  # deletes its rows
    assert tbl.count_rows() == 2
    r = run(cat, "alter table sales_by_year add if not exists range partition value = 2013")
    assert r.notices == ["range partition VALUE = 2013 already exists, skipping"]
    r = run(cat, "alter table sales_by_year drop if exists range partition value = 2012")
    assert r.notices == ["range partition VALUE = 2012 does not exist, skipping"]
    sql = "alter table sales_by_year add range partition value = 2013"
    e = err(cat, sql, "42710", "partition value")
    assert "already exists" in e.message
    sql = "alter table sales_by_year add range partition 2025 <= values < 2035"
    e = err(cat, sql, "22023", "partition 2025")
    assert "conflicts with existing one: 2020 <= VALUES < 2030" in e.message
    err(cat, "alter table sales_by_year drop range partition value = 1999", "42704",
        "partition value")
    err(cat, "alter table sales_by_year add range partition values < 'x'", "42P16", "'x'")
    err(cat, "alter table sales_by_year add range partition value = (1, 2)", "42P16", "1, 2)")
    err(cat, "alter table sales_by_year add range partition 5 <= values < 1", "22023",
        "partition 5")
    run(cat, "alter table sales_by_year add range partition 2030 < values <= 2040")
    cat = reopen(cat, tmp_path)
    assert [r["range_partition"] for r in rows(cat, "show partitions sales_by_year")] == [
        "VALUE = 2013", "VALUE = 2014", "VALUE = 2017", "2020 <= VALUES < 2030",
        "2031 <= VALUES < 2041"]
    assert cat.table("sales_by_year").lookup((2013, 2)) == {"year": 2013, "sale_id": 2,
                                                            "amount": 20}
    run(cat, "create table h (k int primary key) partition by hash (k) partitions 2")
    err(cat, "alter table h add range partition values < 3", "42809", "partition values")
    err(cat, "alter table nope add range partition values < 3", "42P01", "nope")
    cat.close()


def test_range_partition_values_are_coerced_to_column_types(cat):
    run(cat, """create table t (s string, d date, n decimal(10,2), primary key (s, d, n))
        partition by range (s, d) (partition ('a', '2020-01-01') <= values < ('m', '2020-01-01'))""")
    run(cat, "alter table t add range partition ('m', '2020-01-01') <= values < ('z', "
             "date '2021-06-30')")
    run(cat, "alter table t add range partition ('z', '2021-06-30') < values")
    assert [r["range_partition"] for r in rows(cat, "show range partitions t")] == [
        '("a", 2020-01-01) <= VALUES < ("m", 2020-01-01)',
        '("m", 2020-01-01) <= VALUES < ("z", 2021-06-30)',
        '("z", 2021-07-01) <= VALUES']
    err(cat, "alter table t add range partition values < ('a', 'not a date')", "42P16",
        "'not a date'")


def test_properties_and_comments(cat, tmp_path):
    run(cat, "create table t (k int primary key) comment 'first' "
             "tblproperties ('owner'='me', 'kudu.num_tablet_replicas'='1')")
    run(cat, "alter table t set tblproperties ('team'='storage', 'owner'='you')")
    run(cat, "alter table t set (retention = 30)")
    run(cat, "comment on table t is 'second'")
    meta = cat.get_table("t")
    assert meta.comment == "second"
    assert meta.properties == {"owner": "you", "kudu.num_tablet_replicas": "1",
                               "team": "storage", "retention": "30"}
    run(cat, "alter table t unset tblproperties ('team', 'retention')")
    err(cat, "alter table t unset tblproperties ('nope')", "42704", "'nope'")
    run(cat, "alter table t unset tblproperties if exists ('nope')")
    run(cat, "alter table t set tblproperties ('comment'='third')")
    err(cat, "alter table t set tblproperties ('kudu.num_tablet_replicas'='3')", "0A000",
        "'kudu")
    err(cat, "comment on column t.k is 'x'", "0A000")
    err(cat, "comment on table nope is 'x'", "42P01", "nope")
    cat = reopen(cat, tmp_path)
    meta = cat.get_table("t")
    assert (meta.comment, meta.properties) == (
        "third", {"owner": "you", "kudu.num_tablet_replicas": "1"})
    run(cat, "comment on table t is ''")
    assert cat.get_table("t").comment is None
    cat.close()


def test_alter_column_is_not_supported(cat):
    run(cat, "create table t (k int primary key, s string)")
    err(cat, "alter table t alter column s set default 'no'", "0A000", "s set")


# -- SHOW / DESCRIBE ------------------------------------------------------------------------

def test_show_tables(cat):
    r = run(cat, "show tables")
    assert r.table.schema == pa.schema([("name", pa.string())]) and r.table.num_rows == 0
    for name in ("b_dim", "a_fact", '"Mixed"'):
        run(cat, f"create table {name} (k int primary key)")
    r = run(cat, "SHOW TABLES")
    assert (r.command, r.rowcount) == ("SHOW", 3)
    assert [x["name"] for x in r.table.to_pylist()] == ["Mixed", "a_fact", "b_dim"]
    assert [x["name"] for x in rows(cat, "show tables like '*fact*|*dim'")] == [
        "a_fact", "b_dim"]
    assert [x["name"] for x in rows(cat, "show tables 'mix*'")] == ["Mixed"]


def test_describe(cat):
    run(cat, EXAMPLES["default_vals"][0])
    expect = [
        ("id", "BIGINT", True, False, None),
        ("name", "STRING", False, False, "'unknown'"),
        ("address", "STRING", False, True, "'NO FIXED ADDRESS'"),
        ("age", "INT", False, True, "-1"),
        ("earthling", "BOOLEAN", False, True, "TRUE"),
        ("optional_col", "STRING", False, True, None),
    ]
    for sql in ("describe default_vals", "DESC default_vals", "show columns from default_vals",
                "SHOW COLUMNS IN DEFAULT_VALS"):
        r = run(cat, sql)
        assert r.table.schema.types == [pa.string(), pa.string(), pa.bool_(), pa.bool_(),
                                        pa.string(), pa.string(), pa.string(), pa.int32()]
        assert r.table.column_names == ["name", "type", "primary_key", "nullable", "default",
                                        "encoding", "compression", "block_size"]
        got = [(x["name"], x["type"], x["primary_key"], x["nullable"], x["default"])
               for x in r.table.to_pylist()]
        assert got == expect
    run(cat, EXAMPLES["blog_posts_lz4"][0])
    got = {x["name"]: (x["encoding"], x["compression"]) for x in rows(cat, "desc blog_posts")}
    assert got["user_id"] == ("DICT_ENCODING", "DEFAULT_COMPRESSION")
    assert got["esperanto_translation"] == ("AUTO_ENCODING", "NO_COMPRESSION")
    run(cat, "create table d (k decimal(15,2) primary key, v varchar(7), b binary, "
             "t timestamp, f float, x double, s smallint, y tinyint)")
    assert [x["type"] for x in rows(cat, "describe d")] == [
        "DECIMAL(15,2)", "VARCHAR(7)", "BINARY", "TIMESTAMP", "FLOAT", "DOUBLE", "SMALLINT",
        "TINYINT"]


def test_show_partitions(cat):
    run(cat, EXAMPLES["cust_behavior_hash_range"][0])
    r = run(cat, "show partitions cust_behavior")
    assert r.table.schema == pa.schema([("range_partition", pa.string()),
                                        ("tablets", pa.int32())])
    assert r.table.to_pylist() == [
        {"range_partition": 'VALUES < "g"', "tablets": 4},
        {"range_partition": '"g" <= VALUES < "o"', "tablets": 4},
        {"range_partition": '"o" <= VALUES < "u"', "tablets": 4},
        {"range_partition": '"u" <= VALUES', "tablets": 4}]
    run(cat, "create table h (k int primary key) partition by hash (k) partitions 3")
    assert rows(cat, "show partitions h") == [{"range_partition": "UNBOUNDED", "tablets": 3}]
    run(cat, "create table e (k int primary key) partition by range (k) ()")
    r = run(cat, "show partitions e")
    assert r.table.num_rows == 0 and r.table.schema.field("tablets").type == pa.int32()


def test_show_tablets(cat, tmp_path, monkeypatch):
    run(cat, METRICS)
    meta = cat.get_table("metrics")
    cat.table("metrics").insert({"host": ["h1", "h2", "h3"], "metric": ["m"] * 3,
                                 "ts": [dt.datetime(2025, 1, 1)] * 3, "value": [1.0] * 3})
    for tid in meta.tablet_ids:
        cat.tablet(tid).flush_mrs()
    cat.table("metrics").insert({"host": ["h1"], "metric": ["n"],
                                 "ts": [dt.datetime(2026, 6, 1)], "value": [2.0]})
    r = run(cat, "show tablets metrics")
    t = r.table
    assert t.schema == pa.schema([
        ("tablet_id", pa.string()), ("partition", pa.string()),
        ("replication_factor", pa.int32()), ("num_rowsets", pa.int64()),
        ("memrowset_rows", pa.int64()), ("on_disk_bytes", pa.int64())])
    got = t.to_pylist()
    assert [x["tablet_id"] for x in got] == list(meta.tablet_ids)
    r2026, r2027 = "2026-01-01 00:00:00", "2027-01-01 00:00:00"  # as SHOW CREATE TABLE
    assert [x["partition"] for x in got] == [
        f"HASH(host): 0, RANGE: VALUES < {r2026}",
        f"HASH(host): 0, RANGE: {r2026} <= VALUES < {r2027}",
        f"HASH(host): 1, RANGE: VALUES < {r2026}",
        f"HASH(host): 1, RANGE: {r2026} <= VALUES < {r2027}"]
    assert all(x["replication_factor"] == 1 and x["on_disk_bytes"] > 0 for x in got)
    assert sum(x["num_rowsets"] for x in got) == sum(
        cat.tablet(tid).num_rowsets() for tid in meta.tablet_ids) >= 1
    assert sum(x["memrowset_rows"] for x in got) == 1
    # after a restart no tablet is open: SHOW TABLETS must not open (replay) any
    cat = reopen(cat, tmp_path)

    def no_open(*a, **k):
        raise AssertionError("SHOW TABLETS opened a tablet")
    monkeypatch.setattr(Tablet, "open", no_open)
    got2 = rows(cat, "show tablets metrics")
    assert [x["num_rowsets"] for x in got2] == [x["num_rowsets"] for x in got]
    assert all(x["memrowset_rows"] is None for x in got2)
    monkeypatch.undo()
    run(cat, "create table u (k int primary key)")
    assert [x["partition"] for x in rows(cat, "show tablets u")] == ["UNPARTITIONED"]
    cat.close()


@pytest.mark.parametrize("sql", [
    "describe nope", "desc nope", "show columns from nope", "show partitions nope",
    "show tablets nope", "show create table nope", "show range partitions nope",
    "alter table nope drop column x", "alter table nope rename to y", "drop table nope",
])
def test_unknown_table(cat, sql):
    e = err(cat, sql, "42P01", "nope")
    assert e.message == 'table "nope" does not exist'


# -- SHOW CREATE TABLE ----------------------------------------------------------------------

def _round_trip(cat, name: str) -> str:
    (row,) = rows(cat, f"show create table {name}")
    text = row["statement"]
    spec = create_table_spec(text)
    meta = cat.get_table(spec.name)
    assert spec.schema == meta.schema, text
    assert spec.partition_schema == meta.partition_schema, text
    assert spec.comment == meta.comment
    assert spec.replication_factor == meta.replication_factor
    return text


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n not in (
    "my_first_table_replicas", "architecture")])
def test_show_create_table_round_trips_examples(cat, name):
    spec = create_table_spec(EXAMPLES[name][0])
    run(cat, EXAMPLES[name][0])
    _round_trip(cat, spec.name)


def test_show_create_table_text(cat):
    run(cat, ARCHITECTURE_EXAMPLE.replace("'3'", "'1'"))
    assert _round_trip(cat, "metrics") == """CREATE TABLE metrics (
  host STRING NOT NULL,
  metric STRING NOT NULL,
  ts TIMESTAMP NOT NULL,
  value DOUBLE ENCODING BIT_SHUFFLE COMPRESSION LZ4,
  PRIMARY KEY (host, metric, ts)
)
PARTITION BY HASH (host, metric) PARTITIONS 4, RANGE (ts) (
    PARTITION VALUES < '2026-01-01 00:00:00',
    PARTITION '2026-01-01 00:00:00' <= VALUES < '2027-01-01 00:00:00'
)
STORED AS KUDU
TBLPROPERTIES ('kudu.num_tablet_replicas'='1')"""


def test_show_create_table_round_trips_awkward_cases(cat):
    run(cat, """create table "Odd Name" ("Key" string, "select" date, n decimal(5,2),
        primary key ("Key", "select", n))
        partition by hash ("select") partitions 2, range ("Key", n) (
          partition value = ('it''s', 1.5), partition ('a', 1) < values <= ('b', 2),
          partition ('x', 0) < values)
        comment 'a "quoted" comment' with (replication_factor = 1)""")
    text = _round_trip(cat, '"Odd Name"')
    assert "PARTITION VALUE = ('it''s', 1.50)" in text
    run(cat, """create table dflt (k bigint primary key, a string default 'it''s',
        b decimal(9,3) default -0.5, c date default '2020-02-29',
        d timestamp default '2020-01-02 03:04:05.123456', e boolean default false,
        f double default 1e-05, g varchar(3) default 'abcdef', h binary default 'bin',
        i float default 2.5, j tinyint not null default -128)""")
    _round_trip(cat, "dflt")
    # string bounds: an exclusive lower / inclusive upper on the last column
    run(cat, """create table s (s string primary key) partition by range (s)
        (partition 'a' < values <= 'c', partition values <= 'a', partition 'd' <= values)""")
    text = _round_trip(cat, "s")
    assert "PARTITION 'a' < VALUES <= 'c'" in text
    run(cat, "create table e (k int primary key) partition by range (k) ()")
    assert "RANGE (k) ()" in _round_trip(cat, "e")
    # an unbounded range only the engine API can make
    schema = Schema([ColumnSchema("k", DataType.INT64)], key=["k"])
    cat.create_table("api", schema, PartitionSchema.create(schema, (), RangeSchema(("k",))))
    assert "PARTITION UNBOUNDED" in _round_trip(cat, "api")


def test_show_create_table_after_alter(cat):
    run(cat, SALES)
    run(cat, "alter table sales_by_year add column note string default 'n/a' compression lz4")
    run(cat, "alter table sales_by_year drop column amount")
    run(cat, "alter table sales_by_year add range partition 2020 <= values")
    run(cat, "alter table sales_by_year set tblproperties ('owner'='me')")
    text = rows(cat, "show create table sales_by_year")[0]["statement"]
    spec = create_table_spec(text)
    meta = cat.get_table("sales_by_year")
    # column ids differ after ADD / DROP COLUMN; everything else is the same
    assert [dataclasses_without_id(c) for c in spec.schema.columns] == [
        dataclasses_without_id(c) for c in meta.schema.columns]
    assert spec.partition_schema.range_partitions == meta.partition_schema.range_partitions
    assert spec.properties == {"kudu.num_tablet_replicas": "1", "owner": "me"}


def dataclasses_without_id(col: ColumnSchema) -> ColumnSchema:
    return dataclasses.replace(col, id=-1)


def test_show_partitions_writes_timestamps_as_show_create_table_does(cat):
    run(cat, "create table tsr (ts timestamp primary key) partition by range (ts) "
             "(partition '2026-01-01' <= values < '2026-07-01 12:30:00.5')")
    [row] = rows(cat, "show partitions tsr")
    assert row["range_partition"] == \
        "2026-01-01 00:00:00 <= VALUES < 2026-07-01 12:30:00.500000"
    ddl = rows(cat, "show create table tsr")[0]["statement"]
    assert "PARTITION '2026-01-01 00:00:00' <= VALUES < '2026-07-01 12:30:00.500000'" in ddl
