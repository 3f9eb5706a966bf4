"""CREATE TABLE: KuduSQL parsing (planner.dialect) and mapping to the engine (planner.ddl).

The statements are kudu-facts §1.2's CREATE TABLE examples (elided `...` filled in) and the
ARCHITECTURE.md "SQL surface" example; each one round-trips through the generator and,
where the engine supports it, is created in a real catalog.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlglot

from engine import errors as engine_errors
from engine.catalog import Catalog
from engine.catalog.partition import HashBucketSchema, RangeSchema, RangeSpec
from engine.types import DataType
from planner.ddl import create_table_spec, parse
from planner.dialect import KuduPartitionByProperty, KuduRangeBound, KuduSQL
from planner.errors import SqlError

ARCHITECTURE_EXAMPLE = """
CREATE TABLE metrics (
  host STRING NOT NULL, metric STRING NOT NULL, ts TIMESTAMP NOT NULL,
  value DOUBLE ENCODING BIT_SHUFFLE COMPRESSION LZ4,
  PRIMARY KEY (host, metric, ts))
PARTITION BY HASH (host, metric) PARTITIONS 4,
             RANGE (ts) (PARTITION VALUES < '2026-01-01',
                         PARTITION '2026-01-01' <= VALUES < '2027-01-01')
STORED AS KUDU                                   -- optional
TBLPROPERTIES ('kudu.num_tablet_replicas' = '3'); -- also: WITH (replication_factor = 3)
"""

# kudu-facts §1.2, CREATE TABLE examples, `...` filled in; name -> (sql, tablets)
EXAMPLES = {
    "my_first_table": ("""CREATE TABLE my_first_table (id BIGINT, name STRING, PRIMARY KEY(id))
        PARTITION BY HASH PARTITIONS 16 STORED AS KUDU""", 16),
    "my_first_table_replicas": ("""CREATE TABLE my_first_table (id BIGINT, name STRING,
        PRIMARY KEY(id)) PARTITION BY HASH PARTITIONS 16 STORED AS KUDU
        TBLPROPERTIES ('kudu.num_tablet_replicas' = '3')""", 16),
    "cust_behavior_range": ("""CREATE TABLE cust_behavior (_id BIGINT PRIMARY KEY,
        salary STRING, edu_level INT)
        PARTITION BY RANGE (_id) (
            PARTITION VALUES < 1439560049342,
            PARTITION 1439560049342 <= VALUES < 1439566253755,
            PARTITION 1439566253755 <= VALUES < 1439572458168,
            PARTITION 1439591071407 <= VALUES )
        STORED AS KUDU""", 4),
    "customers": ("""CREATE TABLE customers (state STRING, name STRING, purchase_count int,
          PRIMARY KEY (state, name))
        PARTITION BY RANGE (state) (PARTITION VALUE = 'al', PARTITION VALUE = 'ak',
                                    PARTITION VALUE = 'wy')
        STORED AS KUDU""", 3),
    "cust_behavior_hash_range": ("""CREATE TABLE cust_behavior (id BIGINT, sku STRING,
        salary STRING, PRIMARY KEY (id, sku))
        PARTITION BY HASH (id) PARTITIONS 4,
        RANGE (sku) ( PARTITION VALUES < 'g', PARTITION 'g' <= VALUES < 'o',
                      PARTITION 'o' <= VALUES < 'u', PARTITION 'u' <= VALUES )
        STORED AS KUDU""", 16),
    "two_hash_levels": ("""CREATE TABLE cust_behavior (id BIGINT, sku STRING,
        PRIMARY KEY (id, sku))
        PARTITION BY HASH (id) PARTITIONS 4, HASH (sku) PARTITIONS 4 STORED AS KUDU""", 16),
    "sales_by_year": ("""CREATE TABLE sales_by_year (year INT, sale_id INT, amount INT,
        PRIMARY KEY (year, sale_id))
        PARTITION BY RANGE (year) (PARTITION VALUE = 2012, PARTITION VALUE = 2013,
          PARTITION VALUE = 2014, PARTITION VALUE = 2015, PARTITION VALUE = 2016)
        STORED AS KUDU""", 5),
    "default_vals": ("""CREATE TABLE default_vals (id BIGINT PRIMARY KEY,
        name STRING NOT NULL DEFAULT 'unknown', address STRING DEFAULT upper('no fixed address'),
        age INT DEFAULT -1, earthling BOOLEAN DEFAULT TRUE, optional_col STRING DEFAULT NULL)
        PARTITION BY HASH(id) PARTITIONS 2 STORED AS KUDU""", 2),
    "various_encodings": ("""CREATE TABLE various_encodings (id BIGINT PRIMARY KEY,
        c1 BIGINT ENCODING PLAIN_ENCODING, c2 BIGINT ENCODING AUTO_ENCODING,
        c3 TINYINT ENCODING BIT_SHUFFLE, c4 DOUBLE ENCODING BIT_SHUFFLE, c5 BOOLEAN ENCODING RLE,
        c6 STRING ENCODING DICT_ENCODING, c7 STRING ENCODING PREFIX_ENCODING)
        PARTITION BY HASH(id) PARTITIONS 2 STORED AS KUDU""", 2),
    # the original uses SNAPPY and ZLIB, which this engine lacks (see test below)
    "blog_posts_lz4": ("""CREATE TABLE blog_posts (user_id STRING ENCODING DICT_ENCODING,
        post_id BIGINT ENCODING BIT_SHUFFLE, subject STRING ENCODING PLAIN_ENCODING,
        body STRING COMPRESSION LZ4, spanish_translation STRING COMPRESSION LZ4,
        esperanto_translation STRING COMPRESSION NO_COMPRESSION,
        PRIMARY KEY (user_id, post_id))
        PARTITION BY HASH(user_id, post_id) PARTITIONS 2 STORED AS KUDU""", 2),
    "block_size": ("""CREATE TABLE bs (id BIGINT PRIMARY KEY, col1 BIGINT BLOCK_SIZE 4096)
        STORED AS KUDU""", 1),
    "architecture": (ARCHITECTURE_EXAMPLE, 8),
}

BLOG_POSTS = """CREATE TABLE blog_posts (user_id STRING ENCODING DICT_ENCODING,
  post_id BIGINT ENCODING BIT_SHUFFLE, subject STRING ENCODING PLAIN_ENCODING,
  body STRING COMPRESSION LZ4, spanish_translation STRING COMPRESSION SNAPPY,
  esperanto_translation STRING COMPRESSION ZLIB, PRIMARY KEY (user_id, post_id))
  PARTITION BY HASH(user_id, post_id) PARTITIONS 2 STORED AS KUDU"""

CUSTOM_HASH_RANGE = """create table custom_hash_range (id int, c2 int, primary key(id, c2))
partition by hash(id) partitions 3, hash(c2) partitions 4,
range (c2) ( partition 0 <= values < 10
           , partition 10 <= values < 20 hash(id) partitions 2 hash(c2) partitions 3 )
stored as kudu"""

NON_UNIQUE = """CREATE TABLE kudu_tbl1 (id INT NON UNIQUE PRIMARY KEY, name STRING)
PARTITION BY HASH (id) PARTITIONS 3 STORED as KUDU"""

AUTO_TABLE = """CREATE TABLE auto_table (a BIGINT, b STRING)
PARTITION BY HASH(a, b) PARTITIONS 2 STORED AS KUDU"""


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog.open(str(tmp_path / "data"))
    yield cat
    close = getattr(cat, "close", None)
    if close:
        close()


def _reparse(sql: str) -> None:
    """parse -> generate -> parse gives the same tree."""
    (ast,) = parse(sql)
    again = sqlglot.parse_one(ast.sql(dialect=KuduSQL), dialect=KuduSQL)
    assert again == ast, ast.sql(dialect=KuduSQL)


# -- parsing --------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [v[0] for v in EXAMPLES.values()]
                         + [BLOG_POSTS, CUSTOM_HASH_RANGE, NON_UNIQUE, AUTO_TABLE],
                         ids=list(EXAMPLES) + ["blog_posts", "custom_hash_range",
                                               "non_unique", "auto_table"])
def test_examples_parse_and_round_trip(sql):
    _reparse(sql)


def test_range_bound_nodes():
    (ast,) = parse("""create table t (a int, b string, primary key (a, b))
        partition by range (a, b) (partition value = (1, 'a'), partition 10 < values <= 30,
        partition values <= 5, partition -3 <= values)""")
    (pb,) = ast.find_all(KuduPartitionByProperty)
    bounds = list(pb.find_all(KuduRangeBound))
    assert bounds[0].args["value"].sql() == "(1, 'a')"
    assert (bounds[1].args["lower_op"], bounds[1].args["upper_op"]) == ("<", "<=")
    assert bounds[2].args.get("lower") is None and bounds[2].args["upper_op"] == "<="
    assert bounds[3].args.get("upper") is None and bounds[3].args["lower"].sql() == "-3"


def test_postgres_and_impala_type_spellings():
    spec = create_table_spec("""create table t (k bigint primary key,
        a tinyint, b smallint, c int, d integer, e int8, f float, g real, h double,
        i double precision, j decimal(10,2), k2 numeric(5), l decimal, m string, n text,
        o varchar(7), p varchar, q binary, r bytea, s boolean, u bool, v date, w timestamp)""")
    got = {c.name: (c.type, c.precision, c.scale, c.length) for c in spec.schema.columns}
    D = DataType
    assert got == {
        "k": (D.INT64, None, None, None), "a": (D.INT8, None, None, None),
        "b": (D.INT16, None, None, None), "c": (D.INT32, None, None, None),
        "d": (D.INT32, None, None, None), "e": (D.INT64, None, None, None),
        "f": (D.FLOAT, None, None, None), "g": (D.FLOAT, None, None, None),
        "h": (D.DOUBLE, None, None, None), "i": (D.DOUBLE, None, None, None),
        "j": (D.DECIMAL, 10, 2, None), "k2": (D.DECIMAL, 5, 0, None),
        "l": (D.DECIMAL, 9, 0, None), "m": (D.STRING, None, None, None),
        "n": (D.STRING, None, None, None), "o": (D.VARCHAR, None, None, 7),
        "p": (D.STRING, None, None, None), "q": (D.BINARY, None, None, None),
        "r": (D.BINARY, None, None, None), "s": (D.BOOL, None, None, None),
        "u": (D.BOOL, None, None, None), "v": (D.DATE, None, None, None),
        "w": (D.TIMESTAMP, None, None, None),
    }


# -- mapping --------------------------------------------------------------------------------

def test_architecture_example_mapping():
    spec = create_table_spec(ARCHITECTURE_EXAMPLE)
    assert spec.name == "metrics"
    assert spec.schema.key_names == ["host", "metric", "ts"]
    value = spec.schema.column("value")
    assert (value.type, value.encoding, value.compression) == (
        DataType.DOUBLE, "BIT_SHUFFLE", "LZ4")
    args = spec.partition_schema_args
    assert args.hash_schemas == (HashBucketSchema(("host", "metric"), 4),)
    assert args.range_schema == RangeSchema(("ts",))
    assert args.range_partitions == (
        RangeSpec(None, dt.datetime(2026, 1, 1)),
        RangeSpec(dt.datetime(2026, 1, 1), dt.datetime(2027, 1, 1)))
    assert spec.replication_factor == 3
    assert spec.properties == {"kudu.num_tablet_replicas": "3"}
    assert len(spec.partition_schema.partitions) == 8


def test_key_columns_first_in_key_order_and_not_null():
    spec = create_table_spec(
        "create table t (v string, b int, a bigint, primary key (a, b))")
    assert spec.schema.names == ["a", "b", "v"]
    assert [c.nullable for c in spec.schema.columns] == [False, False, True]


def test_hash_without_columns_is_all_key_columns_and_distribute_by():
    spec = create_table_spec("create table t (a int, b string, c int, primary key (a, b)) "
                             "partition by hash partitions 3")
    assert spec.partition_schema.hash_schemas[0].columns == ("a", "b")
    d = create_table_spec("create table t (a int, b string, c int, primary key (a, b)) "
                          "distribute by hash (b, a) into 16 buckets")
    p = create_table_spec("create table t (a int, b string, c int, primary key (a, b)) "
                          "partition by hash (b, a) partitions 16")
    assert d.partition_schema_args == p.partition_schema_args
    assert len(d.partition_schema.partitions) == 16


def test_range_bounds_to_range_specs():
    spec = create_table_spec("""create table t (a int, b string, primary key (a, b))
        partition by range (a, b) (partition value = (1, 'a'), partition (2, 'a') < values
        <= (3, 'z'))""")
    assert spec.partition_schema_args.range_partitions == (
        RangeSpec.value((1, "a")), RangeSpec((2, "a"), (3, "z"), False, True))
    spec = create_table_spec("""create table t (d date primary key, v int)
        partition by range (d) (partition date '2020-01-01' <= values < '2021-01-01')""")
    assert spec.partition_schema_args.range_partitions == (
        RangeSpec(dt.date(2020, 1, 1), dt.date(2021, 1, 1)),)
    # Impala rewrites 10 < VALUES <= 30 to 11 <= VALUES < 31 (the engine canonicalises)
    spec = create_table_spec("create table t (a int primary key) partition by range (a) "
                             "(partition 10 < values <= 30)")
    (p,) = spec.partition_schema.partitions
    assert (p.range.lower, p.range.upper) == ((11,), (31,))


def test_defaults_and_comments():
    spec = create_table_spec(EXAMPLES["default_vals"][0])
    d = {c.name: c.default for c in spec.schema.columns}
    assert d == {"id": None, "name": "unknown", "address": "NO FIXED ADDRESS", "age": -1,
                 "earthling": True, "optional_col": None}
    spec = create_table_spec("""create table if not exists "Mixed" (ID int primary key
        comment 'the key', x decimal(5,2) default 1.5, t timestamp default
        '2020-01-02 03:04:05') comment 'a table' with (replication_factor = 1)""")
    assert spec.name == "Mixed" and spec.if_not_exists and spec.comment == "a table"
    assert spec.column_comments == {"id": "the key"}
    assert spec.schema.column("x").default == decimal.Decimal("1.50")
    assert spec.schema.column("t").default == dt.datetime(2020, 1, 2, 3, 4, 5)
    assert spec.replication_factor == 1 and spec.unpartitioned


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n != "my_first_table_replicas"
                                  and n != "architecture"])
def test_examples_create_in_catalog(catalog, name):
    sql, tablets = EXAMPLES[name]
    spec = create_table_spec(sql)
    catalog.create_table(spec.name, spec.schema, spec.partition_schema,
                         replication_factor=spec.replication_factor, comment=spec.comment,
                         properties=spec.properties, if_not_exists=spec.if_not_exists)
    assert len(spec.partition_schema.partitions) == tablets
    meta = catalog.table(spec.name).metadata
    assert meta.schema.names == spec.schema.names
    assert len(meta.partition_schema.partitions) == tablets


def test_replication_factor_3_refused_on_one_node(catalog):
    spec = create_table_spec(ARCHITECTURE_EXAMPLE)
    with pytest.raises(engine_errors.EngineError) as ei:
        catalog.create_table(spec.name, spec.schema, spec.partition_schema,
                             replication_factor=spec.replication_factor)
    assert "3" in str(ei.value) and "server" in str(ei.value).lower()
    spec = create_table_spec(ARCHITECTURE_EXAMPLE.replace("'3'", "'1'"))
    assert spec.replication_factor == 1
    catalog.create_table(spec.name, spec.schema, spec.partition_schema,
                         replication_factor=spec.replication_factor)
    assert catalog.table("metrics") is not None


# -- errors ---------------------------------------------------------------------------------

def _err(sql: str) -> SqlError:
    with pytest.raises(SqlError) as ei:
        create_table_spec(sql)
    return ei.value


@pytest.mark.parametrize("sql, sqlstate, at, text", [
    # syntax errors: position is the offending token (1-based), or just past the end
    ("create table t (a int primary key) partition by hash partitions", "42601", None,
     "Expected a number"),
    ("create table t (a int primary key) partition by foo", "42601", "foo", "HASH or RANGE"),
    ("create table t (a int primary key) partition by range (a) (partition values)",
     "42601", ")", "< or <="),
    ("create table t (a int primary key) bogus words", "42601", "bogus", "bogus"),
    ("create table t (a int primary key,\n  b int) partition by hash (a) partitions x",
     "42601", "x", "number"),
    # unknown and unsupported types
    ("create table t (a int primary key, b footype)", "42704", "footype", '"footype"'),
    ("create table t (a int primary key, b char(3))", "0A000", None, "not supported"),
    # invalid table definitions
    (AUTO_TABLE, "42P16", None, "primary key is required"),
    ("create table t (a int, b int, primary key (a)) partition by hash (b) partitions 3",
     "42P16", "b) partitions",
     ("Column 'b' in 'HASH (b) PARTITIONS 3' is not a key column. Only key columns can be "
     "used in PARTITION BY.")),
    (("create table t (a int, b int, primary key (a)) partition by range (b) "
     "(partition values < 3)"), "42P16", "b) (", "is not a key column"),
    (("create table t (a int, b int, primary key (a, b)) partition by hash (a) partitions 2, "
     "hash (a, b) partitions 2"), "42P16", None, "must not contain columns in common"),
    ("create table t (a int primary key) partition by hash (a) partitions 1", "42P16", None,
     "at least two"),
    ("create table t (a int primary key, b int primary key)", "42P16", None, "compound"),
    ("create table t (a int primary key, primary key (a))", "42P16", None, "Multiple"),
    ("create table t (a double primary key)", "42P16", None, "not allowed in a primary key"),
    ("create table t (a int null primary key)", "42P16", None, "cannot be nullable"),
    ("create table t (a int primary key) partition by range (a) (partition value = (1, 2))",
     "42P16", "1, 2))", "range key (a) has 1"),
    ("create table t (a int primary key) partition by range (a) (partition 5 <= values < 1)",
     "42P16", None, ""),
    (("create table t (a int primary key) partition by range (a) "
     "(partition values < 'x')"), "42P16", "'x'", "invalid range bound"),
    ("create table t (a int primary key, b bigint encoding dict_encoding)", "22023", None,
     "DICT_ENCODING"),
    ("create table t (a int primary key, b int default 'x')", "22023", "'x'", "DEFAULT"),
    ("create table t (a tinyint primary key default 300)", "22023", "300", "out of range"),
    ("create table t (a int primary key) with (replication_factor = 'many')", "22023", None,
     "replication factor"),
    # Impala features this engine lacks
    (BLOG_POSTS, "0A000", "SNAPPY", "SNAPPY"),
    (CUSTOM_HASH_RANGE, "0A000", "hash(id) partitions 2", "range-specific hash"),
    (NON_UNIQUE, "0A000", None, "NON UNIQUE"),
    ("create table t (a int primary key) stored as parquet", "0A000", None, "KUDU"),
])
def test_errors(sql, sqlstate, at, text):
    e = _err(sql)
    assert e.sqlstate == sqlstate, repr(e)
    if sqlstate == "42601":  # PostgreSQL's words; the grammar's expectation is the hint
        assert e.message.startswith("syntax error at "), repr(e)
    assert text in e.message + (e.hint or ""), repr(e)
    if at is not None:
        assert e.position - 1 in (sql.index(at), sql.rindex(at)), (repr(e), sql[e.position - 1:])
    else:
        assert e.position is None or 1 <= e.position <= len(sql) + 1


def test_syntax_error_at_end_points_past_last_token():
    sql = "create table t (a int primary key) partition by hash partitions"
    assert _err(sql).position == len(sql) + 1


def test_not_a_create_table():
    assert _err("select 1").sqlstate == "42601"
