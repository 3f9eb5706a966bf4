"""The information_schema views (SQL standard introspection: SQLAlchemy, JDBC, pgcli)."""
from __future__ import annotations

from wire.pg_catalog.oids import (
    INFORMATION_SCHEMA,
    NAMESPACES,
    PUBLIC,
    TYPES,
    column_type,
    default_sql,
    format_type,
)
from wire.pg_catalog.pg_views import VIEW_COLUMN_OIDS
from wire.pg_catalog.registry import (
    VIEWS,
    CatalogSnapshot,
    SessionCatalog,
    register_empty_view,
    register_view,
)


# -- information_schema ----------------------------------------------------------------------
@register_view(INFORMATION_SCHEMA, "schemata", """catalog_name name, schema_name name,
    schema_owner name, default_character_set_catalog name, default_character_set_schema name,
    default_character_set_name name, sql_path varchar""", relkind="v")
def _schemata(cat: SessionCatalog, snap: CatalogSnapshot):
    for name in NAMESPACES.values():
        yield {"catalog_name": cat.database, "schema_name": name, "schema_owner": cat.user}


@register_view(INFORMATION_SCHEMA, "tables",
               """table_catalog name, table_schema name, table_name name,
    table_type varchar, self_referencing_column_name name, reference_generation varchar,
    user_defined_type_catalog name, user_defined_type_schema name,
    user_defined_type_name name, is_insertable_into varchar, is_typed varchar,
    commit_action varchar""", relkind="v")
def _is_tables(cat: SessionCatalog, snap: CatalogSnapshot):
    for r in snap.relations():
        if r.kind == "i":
            continue
        yield {"table_catalog": cat.database, "table_schema": NAMESPACES[r.namespace],
               "table_name": r.name, "table_type": "BASE TABLE" if r.kind == "r" else "VIEW",
               "is_insertable_into": "YES" if r.namespace == PUBLIC and r.kind == "r"
               else "NO",
               "is_typed": "NO"}


_IS_COLUMNS = """table_catalog name, table_schema name, table_name name, column_name name,
    ordinal_position int4, column_default varchar, is_nullable varchar, data_type varchar,
    character_maximum_length int4, character_octet_length int4, numeric_precision int4,
    numeric_precision_radix int4, numeric_scale int4, datetime_precision int4,
    interval_type varchar, interval_precision int4, character_set_catalog name,
    character_set_schema name, character_set_name name, collation_catalog name,
    collation_schema name, collation_name name, domain_catalog name, domain_schema name,
    domain_name name, udt_catalog name, udt_schema name, udt_name name, scope_catalog name,
    scope_schema name, scope_name name, maximum_cardinality int4, dtd_identifier name,
    is_self_referencing varchar, is_identity varchar, identity_generation varchar,
    identity_start varchar, identity_increment varchar, identity_maximum varchar,
    identity_minimum varchar, identity_cycle varchar, is_generated varchar,
    generation_expression varchar, is_updatable varchar"""


def _is_column(cat: SessionCatalog, schema: str, table: str, pos: int, name: str, typid: int,
               typmod: int, nullable: bool, default: str | None, updatable: bool) -> dict:
    t = TYPES[typid]
    data_type = "ARRAY" if t.category == "A" else format_type(typid, None)
    row = {"table_catalog": cat.database, "table_schema": schema, "table_name": table,
           "column_name": name, "ordinal_position": pos, "column_default": default,
           "is_nullable": "YES" if nullable else "NO", "data_type": data_type,
           "udt_catalog": cat.database, "udt_schema": "pg_catalog", "udt_name": t.name,
           "dtd_identifier": str(pos), "is_self_referencing": "NO", "is_identity": "NO",
           "identity_cycle": "NO", "is_generated": "NEVER",
           "is_updatable": "YES" if updatable else "NO"}
    if typid in (1043, 1042) and typmod >= 4:
        row["character_maximum_length"] = typmod - 4
        row["character_octet_length"] = (typmod - 4) * 4
    elif typid in (25, 1043, 1042):
        row["character_octet_length"] = 1073741824
    if typid in (21, 23, 20):
        row.update(numeric_precision={21: 16, 23: 32, 20: 64}[typid], numeric_precision_radix=2,
                   numeric_scale=0)
    elif typid in (700, 701):
        row.update(numeric_precision=24 if typid == 700 else 53, numeric_precision_radix=2)
    elif typid == 1700:
        row["numeric_precision_radix"] = 10
        if typmod >= 4:
            row.update(numeric_precision=(typmod - 4) >> 16, numeric_scale=(typmod - 4) & 0xFFFF)
    elif typid in (1082, 1114, 1184):
        row["datetime_precision"] = 0 if typid == 1082 else 6
    return row


@register_view(INFORMATION_SCHEMA, "columns", _IS_COLUMNS, relkind="v")
def _is_columns(cat: SessionCatalog, snap: CatalogSnapshot):
    for v in VIEWS.values():
        for i, (name, typ) in enumerate(v.columns):
            yield _is_column(cat, NAMESPACES[v.namespace], v.name, i + 1, name,
                             VIEW_COLUMN_OIDS[typ], -1, True, None, False)
    for t in snap.tables:
        for i, c in enumerate(t.columns):
            typid, typmod = column_type(c)
            yield _is_column(cat, "public", t.name, i + 1, c.name, typid, typmod, c.nullable,
                             default_sql(c), True)
    for uv in snap.user_views:
        for i, (name, typid, typmod) in enumerate(uv.columns):
            yield _is_column(cat, "public", uv.name, i + 1, name, typid, typmod, True, None,
                             False)


@register_view(INFORMATION_SCHEMA, "table_constraints", """constraint_catalog name,
    constraint_schema name, constraint_name name, table_catalog name, table_schema name,
    table_name name, constraint_type varchar, is_deferrable varchar,
    initially_deferred varchar, enforced varchar, nulls_distinct varchar""", relkind="v")
def _is_table_constraints(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in snap.tables:
        yield {"constraint_catalog": cat.database, "constraint_schema": "public",
               "constraint_name": f"{t.name}_pkey", "table_catalog": cat.database,
               "table_schema": "public", "table_name": t.name,
               "constraint_type": "PRIMARY KEY", "is_deferrable": "NO",
               "initially_deferred": "NO", "enforced": "YES"}


@register_view(INFORMATION_SCHEMA, "key_column_usage", """constraint_catalog name,
    constraint_schema name, constraint_name name, table_catalog name, table_schema name,
    table_name name, column_name name, ordinal_position int4,
    position_in_unique_constraint int4""", relkind="v")
def _is_key_column_usage(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in snap.tables:
        for i, k in enumerate(t.meta.schema.key_names):
            yield {"constraint_catalog": cat.database, "constraint_schema": "public",
                   "constraint_name": f"{t.name}_pkey", "table_catalog": cat.database,
                   "table_schema": "public", "table_name": t.name, "column_name": k,
                   "ordinal_position": i + 1}


@register_view(INFORMATION_SCHEMA, "views",
               """table_catalog name, table_schema name, table_name name,
    view_definition varchar, check_option varchar, is_updatable varchar,
    is_insertable_into varchar, is_trigger_updatable varchar, is_trigger_deletable varchar,
    is_trigger_insertable_into varchar""", relkind="v")
def _is_views(cat: SessionCatalog, snap: CatalogSnapshot):
    for v in snap.user_views:           # no view is updatable here (planner/views.py)
        yield {"table_catalog": cat.database, "table_schema": "public", "table_name": v.name,
               "view_definition": v.definition, "check_option": "NONE",
               "is_updatable": "NO", "is_insertable_into": "NO",
               "is_trigger_updatable": "NO", "is_trigger_deletable": "NO",
               "is_trigger_insertable_into": "NO"}
register_empty_view(INFORMATION_SCHEMA, "referential_constraints", """constraint_catalog name,
    constraint_schema name, constraint_name name, unique_constraint_catalog name,
    unique_constraint_schema name, unique_constraint_name name, match_option varchar,
    update_rule varchar, delete_rule varchar""", relkind="v")
