"""The eight TPC-H tables as KuduSQL CREATE TABLE statements.

Types follow the specification (§1.4) as Impala's TPC-H-on-Kudu schema maps them:

    identifier                 BIGINT        (tpchgen: int64)
    integer                    INT           (l_linenumber, p_size, ps_availqty,
                                              o_shippriority; tpchgen: int32)
    decimal (money, quantity,  DECIMAL(15,2) (tpchgen: decimal128(15, 2))
             discount, tax)
    date                       DATE          (tpchgen: date32)
    CHAR(n) / VARCHAR(n)       STRING        (tpchgen: string_view)

Text is STRING, as in Impala's Kudu TPC-H schema: the engine has no CHAR (kudu-facts §1.4)
and CHAR's blank padding would change `l_returnflag = 'R'`-style comparisons anyway;
VARCHAR(n) would add a length check to every insert for values tpchgen never makes too
long. Every column is NOT NULL (the spec has no NULLs).

Primary keys are the spec's (§1.4.2): lineitem (l_orderkey, l_linenumber), partsupp
(ps_partkey, ps_suppkey), the others their key column. Partitioning spreads the big tables
over hash buckets of their leading key column, so scans run on several tablets in parallel
and lineitem/orders co-partition on the order key; nation and region are unpartitioned
(one tablet; the dialect accepts a table without PARTITION BY, Impala only warns):

    lineitem  HASH (l_orderkey)  4      orders    HASH (o_orderkey) 4
    partsupp  HASH (ps_partkey)  2      part      HASH (p_partkey)  2
    customer  HASH (c_custkey)   2      supplier  1 tablet
    nation    1 tablet                  region    1 tablet

17 tablets in all, well under the 60 a CREATE TABLE may make on one tablet server.
Key columns come first in key order in the engine's schema (l_linenumber moves to second
place in lineitem); the loader inserts by column name, so this does not matter to it.
"""

from __future__ import annotations

# load order: dimensions first, lineitem (the biggest) last
TABLES: tuple[str, ...] = ("region", "nation", "supplier", "customer", "part", "partsupp",
                           "orders", "lineitem")

# table -> hash buckets on the leading key column (None: one tablet, no PARTITION BY)
PARTITIONS: dict[str, int | None] = {
    "region": None, "nation": None, "supplier": None, "customer": 2, "part": 2,
    "partsupp": 2, "orders": 4, "lineitem": 4,
}

_COLUMNS: dict[str, str] = {
    "region": """
    r_regionkey BIGINT NOT NULL,
    r_name STRING NOT NULL,
    r_comment STRING NOT NULL,
    PRIMARY KEY (r_regionkey)""",
    "nation": """
    n_nationkey BIGINT NOT NULL,
    n_name STRING NOT NULL,
    n_regionkey BIGINT NOT NULL,
    n_comment STRING NOT NULL,
    PRIMARY KEY (n_nationkey)""",
    "supplier": """
    s_suppkey BIGINT NOT NULL,
    s_name STRING NOT NULL,
    s_address STRING NOT NULL,
    s_nationkey BIGINT NOT NULL,
    s_phone STRING NOT NULL,
    s_acctbal DECIMAL(15,2) NOT NULL,
    s_comment STRING NOT NULL,
    PRIMARY KEY (s_suppkey)""",
    "customer": """
    c_custkey BIGINT NOT NULL,
    c_name STRING NOT NULL,
    c_address STRING NOT NULL,
    c_nationkey BIGINT NOT NULL,
    c_phone STRING NOT NULL,
    c_acctbal DECIMAL(15,2) NOT NULL,
    c_mktsegment STRING NOT NULL,
    c_comment STRING NOT NULL,
    PRIMARY KEY (c_custkey)""",
    "part": """
    p_partkey BIGINT NOT NULL,
    p_name STRING NOT NULL,
    p_mfgr STRING NOT NULL,
    p_brand STRING NOT NULL,
    p_type STRING NOT NULL,
    p_size INT NOT NULL,
    p_container STRING NOT NULL,
    p_retailprice DECIMAL(15,2) NOT NULL,
    p_comment STRING NOT NULL,
    PRIMARY KEY (p_partkey)""",
    "partsupp": """
    ps_partkey BIGINT NOT NULL,
    ps_suppkey BIGINT NOT NULL,
    ps_availqty INT NOT NULL,
    ps_supplycost DECIMAL(15,2) NOT NULL,
    ps_comment STRING NOT NULL,
    PRIMARY KEY (ps_partkey, ps_suppkey)""",
    "orders": """
    o_orderkey BIGINT NOT NULL,
    o_custkey BIGINT NOT NULL,
    o_orderstatus STRING NOT NULL,
    o_totalprice DECIMAL(15,2) NOT NULL,
    o_orderdate DATE NOT NULL,
    o_orderpriority STRING NOT NULL,
    o_clerk STRING NOT NULL,
    o_shippriority INT NOT NULL,
    o_comment STRING NOT NULL,
    PRIMARY KEY (o_orderkey)""",
    "lineitem": """
    l_orderkey BIGINT NOT NULL,
    l_partkey BIGINT NOT NULL,
    l_suppkey BIGINT NOT NULL,
    l_linenumber INT NOT NULL,
    l_quantity DECIMAL(15,2) NOT NULL,
    l_extendedprice DECIMAL(15,2) NOT NULL,
    l_discount DECIMAL(15,2) NOT NULL,
    l_tax DECIMAL(15,2) NOT NULL,
    l_returnflag STRING NOT NULL,
    l_linestatus STRING NOT NULL,
    l_shipdate DATE NOT NULL,
    l_commitdate DATE NOT NULL,
    l_receiptdate DATE NOT NULL,
    l_shipinstruct STRING NOT NULL,
    l_shipmode STRING NOT NULL,
    l_comment STRING NOT NULL,
    PRIMARY KEY (l_orderkey, l_linenumber)""",
}

_HASH_COLUMN = {"customer": "c_custkey", "part": "p_partkey", "partsupp": "ps_partkey",
                "orders": "o_orderkey", "lineitem": "l_orderkey",
                "supplier": "s_suppkey", "nation": "n_nationkey", "region": "r_regionkey"}


_DEFAULT = object()


def create_statement(table: str, partitions: int | None | object = _DEFAULT) -> str:
    """The CREATE TABLE statement of one table; `partitions` overrides `PARTITIONS`
    (None: unpartitioned)."""
    n = PARTITIONS[table] if partitions is _DEFAULT else partitions
    sql = f"CREATE TABLE {table} ({_COLUMNS[table]}\n)"
    if n is not None:
        sql += f"\nPARTITION BY HASH ({_HASH_COLUMN[table]}) PARTITIONS {n}"
    return sql


def create_statements() -> list[str]:
    """CREATE TABLE statements of the eight tables, in load order (`TABLES`)."""
    return [create_statement(t) for t in TABLES]
