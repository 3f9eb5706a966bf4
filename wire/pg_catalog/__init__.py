"""pg_catalog and information_schema: PostgreSQL's system catalogs as views over the engine
catalog, so that psql, SQLAlchemy, pgcli, asyncpg and JDBC can introspect kudusql.

    session = db.session(catalog=PgCatalog(db.catalog, user="kudusql", database="kudusql"))

`PgCatalog` wraps the engine catalog (`engine.catalog.Catalog`) for one session. Name
resolution follows PostgreSQL's search_path with pg_catalog implicitly first:

    pg_catalog.pg_class   (the binder's `pg_catalog$pg_class`) -> the pg_class view
    pg_class              -> the pg_class view, even if a user table has that name
    information_schema.tables                                   -> the view
    tables, public.tables -> the user table (information_schema is not on the search path)

Everything else - user tables, DDL - is delegated to the engine catalog.

The package, one module per part (imports point down this list; the view modules register
their views when imported, then `registry.seal()` numbers them):

    catalog             PgCatalog: name resolution, DDL guard, snapshots, regclass lookups
    functions           the catalog functions (HostFunctions bound by name)
    information_schema  the information_schema views
    pg_views            the pg_catalog views
    registry            the view registry (`_view`, VIEWS, SystemView), the catalog
                        snapshot (`_Snapshot`, user tables with their OIDs)
    oids                fixed OIDs, TYPES, format_type, column types, identifier quoting

A view is a `SystemView` (`virtual = True`): `.schema` (an engine `Schema`; its first
column is a nominal key) and `.to_arrow(columns)`; the planner filters and joins its rows
in the executor.

Views are built from metadata only (never table data), on demand, from a `_Snapshot` of the
engine catalog that is rebuilt when a DDL published new table metadata; a statement's views
therefore agree with each other. Rows are built by Python loops over tables and columns:
catalog metadata is small (tables x columns), never proportional to data.

OIDs. Built-in objects use PostgreSQL 15's OIDs (pg_catalog 11, public 2200, pg_class 1259,
int4 23, ...). A user table's OIDs are derived from its engine table id, which survives
renames and restarts:

    table oid        16384 + blake2b("table:" + id) mod (2^31 - 16384)
    primary key      "index:" (the pg_class index row and pg_index) and "constraint:"
    column default   "attrdef:<column id>:" + id

so an OID is the same in every statement and every session. Two ids hashing to one OID
(odds ~ n^2 / 2^32) are resolved by probing upwards in table-id order within a snapshot.

What is modelled. Each table is a relation (relkind 'r') with its columns in declared order
(attnum 1..n), NOT NULL and DEFAULT from the Kudu schema; its primary key is a unique btree
index `<table>_pkey` (relkind 'i', pg_index, pg_constraint 'p') - Kudu's primary key index
(rows sorted by key, a B-tree of keys per rowset), the only index there is, so `\\di` lists
exactly one per table; a table comment is its
pg_description. A user view (CREATE VIEW: planner/views.py) is a relation of relkind 'v'
with its columns in pg_attribute (types as its results are described on the wire), a row
of pg_views and information_schema.views (never updatable), and its query as written from
pg_get_viewdef, so psql's `\\dv` and `\\d+ view` work; its OID is derived from the view's
id (`"view:" + id`). Kudu types map to int2 (INT8, INT16), int4, int8, float4, float8,
numeric(p,s), text (STRING), varchar(n), bytea, bool, date and timestamp. The system views
themselves are listed in pg_class / pg_attribute (pg_catalog ones as tables, the rest as
views), so `\\d pg_class` works. There are no foreign keys, sequences, triggers, policies,
inheritance, extensions or other schemas: those views exist with PostgreSQL's columns and
no rows. Columns of array types (indkey, conkey, proargtypes, ...) are Arrow lists.
pg_prepared_statements is session state, not catalog metadata: built on every read from
the connection's `prepared` callable (never cached in the snapshot).

Functions. Catalog functions are served here as `planner.expr.HostFunction`s that the
binder binds by name (`function(name)`): format_type, pg_get_expr, pg_get_indexdef,
pg_get_constraintdef, pg_get_userbyid, pg_table_is_visible, obj_description, ...,
version(), current_user, current_schema(s), current_setting / set_config, and the reg*
casts: `'t'::regclass` is the table's OID (42P01 for an unknown name), `x::regclass::text`
its name (`regclassout`); likewise regtype, regnamespace, regrole and regproc. Set-returning
catalog functions (pg_partition_ancestors) return arrays that the binder unnests.

Not modelled: privileges (every has_*_privilege is true), pg_stat_*, column comments,
row types of tables (reltype is 0), int2vector / oidvector lower bound 0 (read as 1).
"""
from __future__ import annotations

# the view modules register their views when imported; seal() then gives them their OIDs
from wire.pg_catalog import information_schema, pg_views  # noqa: F401 - registration
from wire.pg_catalog.registry import VIEWS, SystemView, seal

seal()

from wire.pg_catalog.catalog import PgCatalog  # noqa: E402 - after the views are sealed
from wire.pg_catalog.oids import TYPES, derived_oid, format_type, quote_ident  # noqa: E402

__all__ = ["TYPES", "VIEWS", "PgCatalog", "SystemView", "derived_oid", "format_type",
           "quote_ident"]
