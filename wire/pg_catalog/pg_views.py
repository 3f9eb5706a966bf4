"""The pg_catalog views: pg_class, pg_attribute, pg_type, pg_index, pg_constraint, ...

Each is a function yielding one dict per row (missing columns are NULL), registered with
its PostgreSQL columns by `register_view`; the catalogs kudusql has nothing for
(triggers, sequences, publications, ...) are `register_empty_view`. Rows come from the
snapshot's metadata only, by Python loops over tables and columns (small: never
proportional to data).
"""
from __future__ import annotations

import re

from wire.pg_catalog.oids import (
    BOOTSTRAP_SUPERUSER,
    BTREE_AM,
    C_COLLATION,
    DATABASE_OID,
    DEFAULT_COLLATION,
    DEFAULT_TABLESPACE,
    GLOBAL_TABLESPACE,
    HASH_AM,
    HEAP_AM,
    NAMESPACES,
    PG_CATALOG,
    POSIX_COLLATION,
    PUBLIC,
    SYSTEM_RELATION_OIDS,
    TYPES,
    UTF8_ENCODING,
    column_type,
    default_sql,
)
from wire.pg_catalog.registry import (
    VIEWS,
    CatalogSnapshot,
    SessionCatalog,
    index_definition,
    register_empty_view,
    register_view,
)
from wire.settings import DEFAULTS, MS_SETTINGS, SERVER_VERSION, SERVER_VERSION_NUM


# -- pg_catalog views ------------------------------------------------------------------------
@register_view(PG_CATALOG, "pg_namespace", "oid oid, nspname name, nspowner oid, nspacl aclitem[]")
def _pg_namespace(cat: SessionCatalog, snap: CatalogSnapshot):
    for oid, name in NAMESPACES.items():
        yield {"oid": oid, "nspname": name, "nspowner": BOOTSTRAP_SUPERUSER}


@register_view(PG_CATALOG, "pg_class", """oid oid, relname name, relnamespace oid, reltype oid,
    reloftype oid, relowner oid, relam oid, relfilenode oid, reltablespace oid, relpages int4,
    reltuples float4, relallvisible int4, reltoastrelid oid, relhasindex bool, relisshared bool,
    relpersistence char, relkind char, relnatts int2, relchecks int2, relhasrules bool,
    relhastriggers bool, relhassubclass bool, relrowsecurity bool, relforcerowsecurity bool,
    relispopulated bool, relreplident char, relispartition bool, relrewrite oid,
    relfrozenxid xid, relminmxid xid, relacl aclitem[], reloptions text[],
    relpartbound pg_node_tree""")
def _pg_class(cat: SessionCatalog, snap: CatalogSnapshot):
    for r in snap.relations():
        yield {"oid": r.oid, "relname": r.name, "relnamespace": r.namespace, "reltype": 0,
               "reloftype": 0, "relowner": BOOTSTRAP_SUPERUSER, "relam": r.am,
               "relfilenode": r.oid if r.kind != "v" else 0, "reltablespace": 0,
               "relpages": 0, "reltuples": -1.0, "relallvisible": 0, "reltoastrelid": 0,
               "relhasindex": r.has_index, "relisshared": False, "relpersistence": "p",
               "relkind": r.kind, "relnatts": r.natts, "relchecks": 0, "relhasrules": False,
               "relhastriggers": False, "relhassubclass": False, "relrowsecurity": False,
               "relforcerowsecurity": False, "relispopulated": True,
               "relreplident": "n" if r.kind in ("v", "i") else "d", "relispartition": False,
               "relrewrite": 0, "relfrozenxid": 0, "relminmxid": 0}


def _attribute(relid: int, attnum: int, name: str, typid: int, typmod: int, notnull: bool,
               hasdef: bool) -> dict:
    t = TYPES[typid]
    return {"attrelid": relid, "attname": name, "atttypid": typid, "attstattarget": -1,
            "attlen": t.length, "attnum": attnum, "attndims": 1 if t.category == "A" else 0,
            "attcacheoff": -1, "atttypmod": typmod, "attbyval": t.byval, "attalign": t.align,
            "attstorage": t.storage, "attcompression": "", "attnotnull": notnull,
            "atthasdef": hasdef, "atthasmissing": False, "attidentity": "",
            "attgenerated": "", "attisdropped": False, "attislocal": True, "attinhcount": 0,
            "attcollation": t.collation}


VIEW_COLUMN_OIDS = {"oid": 26, "regproc": 24, "xid": 28, "int8": 20, "int4": 23, "int2": 21,
                     "float4": 700, "float8": 701, "bool": 16, "timestamptz": 1184,
                     "name": 19, "text": 25, "char": 18, "pg_node_tree": 194, "aclitem": 1033,
                     "varchar": 1043, "int2vector": 22, "oidvector": 30, "int2[]": 1005,
                     "oid[]": 1028, "regtype[]": 2211, "text[]": 1009, "name[]": 1003,
                     "char[]": 1002, "aclitem[]": 1034, "float4[]": 1021, "regclass": 2205,
                     "regtype": 2206}


@register_view(PG_CATALOG, "pg_attribute", """attrelid oid, attname name, atttypid oid,
    attstattarget int4, attlen int2, attnum int2, attndims int4, attcacheoff int4,
    atttypmod int4, attbyval bool, attalign char, attstorage char, attcompression char,
    attnotnull bool, atthasdef bool, atthasmissing bool, attidentity char, attgenerated char,
    attisdropped bool, attislocal bool, attinhcount int4, attcollation oid, attacl aclitem[],
    attoptions text[], attfdwoptions text[], attmissingval text""")
def _pg_attribute(cat: SessionCatalog, snap: CatalogSnapshot):
    for v in VIEWS.values():
        for i, (name, typ) in enumerate(v.columns):
            yield _attribute(v.oid, i + 1, name, VIEW_COLUMN_OIDS[typ], -1, False, False)
    for uv in snap.user_views:
        for i, (name, typid, typmod) in enumerate(uv.columns):
            yield _attribute(uv.oid, i + 1, name, typid, typmod, False, False)
    for t in snap.tables:
        for i, c in enumerate(t.columns):
            typid, typmod = column_type(c)
            yield _attribute(t.oid, i + 1, c.name, typid, typmod, not c.nullable,
                             c.default is not None)
        for i, attnum in enumerate(t.key_attnums):
            c = t.columns[attnum - 1]
            typid, typmod = column_type(c)
            yield _attribute(t.index_oid, i + 1, c.name, typid, typmod, False, False)


@register_view(PG_CATALOG, "pg_type", """oid oid, typname name, typnamespace oid, typowner oid,
    typlen int2, typbyval bool, typtype char, typcategory char, typispreferred bool,
    typisdefined bool, typdelim char, typrelid oid, typsubscript regproc, typelem oid,
    typarray oid, typinput regproc, typoutput regproc, typreceive regproc, typsend regproc,
    typmodin regproc, typmodout regproc, typanalyze regproc, typalign char, typstorage char,
    typnotnull bool, typbasetype oid, typtypmod int4, typndims int4, typcollation oid,
    typdefaultbin pg_node_tree, typdefault text, typacl aclitem[]""")
def _pg_type(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in sorted(TYPES.values(), key=lambda t: t.oid):
        yield {"oid": t.oid, "typname": t.name, "typnamespace": PG_CATALOG,
               "typowner": BOOTSTRAP_SUPERUSER, "typlen": t.length, "typbyval": t.byval,
               "typtype": t.typtype, "typcategory": t.category,
               "typispreferred": t.oid in (16, 25, 701, 1184, 1186, 2205),
               "typisdefined": True, "typdelim": ",", "typrelid": 0, "typsubscript": 0,
               "typelem": t.elem, "typarray": t.array, "typinput": 0, "typoutput": 0,
               "typreceive": 0, "typsend": 0, "typmodin": 0, "typmodout": 0,
               "typanalyze": 0, "typalign": t.align, "typstorage": t.storage,
               "typnotnull": False, "typbasetype": 0, "typtypmod": -1, "typndims": 0,
               "typcollation": t.collation}


@register_view(PG_CATALOG, "pg_index", """indexrelid oid, indrelid oid, indnatts int2,
    indnkeyatts int2, indisunique bool, indnullsnotdistinct bool, indisprimary bool,
    indisexclusion bool, indimmediate bool, indisclustered bool, indisvalid bool,
    indcheckxmin bool, indisready bool, indislive bool, indisreplident bool,
    indkey int2vector, indcollation oidvector, indclass oidvector, indoption int2vector,
    indexprs pg_node_tree, indpred pg_node_tree""")
def _pg_index(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in snap.tables:
        keys = t.key_attnums
        cols = [t.columns[k - 1] for k in keys]
        yield {"indexrelid": t.index_oid, "indrelid": t.oid, "indnatts": len(keys),
               "indnkeyatts": len(keys), "indisunique": True, "indnullsnotdistinct": False,
               "indisprimary": True, "indisexclusion": False, "indimmediate": True,
               "indisclustered": False, "indisvalid": True, "indcheckxmin": False,
               "indisready": True, "indislive": True, "indisreplident": False,
               "indkey": keys,
               "indcollation": [TYPES[column_type(c)[0]].collation for c in cols],
               "indclass": [_OPCLASS.get(column_type(c)[0], 0) for c in cols],
               "indoption": [0] * len(keys)}


# btree operator classes of the key types (pg_opclass oids)
_OPCLASS = {21: 1979, 23: 1978, 20: 1980, 25: 3126, 1043: 3126, 17: 421, 1082: 3122,
            1114: 3128, 1700: 3125, 16: 424, 700: 1970, 701: 1971}


@register_view(PG_CATALOG, "pg_constraint",
               """oid oid, conname name, connamespace oid, contype char,
    condeferrable bool, condeferred bool, convalidated bool, conrelid oid, contypid oid,
    conindid oid, conparentid oid, confrelid oid, confupdtype char, confdeltype char,
    confmatchtype char, conislocal bool, coninhcount int4, connoinherit bool, conkey int2[],
    confkey int2[], conpfeqop oid[], conppeqop oid[], conffeqop oid[], confdelsetcols int2[],
    conexclop oid[], conbin pg_node_tree""")
def _pg_constraint(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in snap.tables:
        yield {"oid": t.constraint_oid, "conname": f"{t.name}_pkey", "connamespace": PUBLIC,
               "contype": "p", "condeferrable": False, "condeferred": False,
               "convalidated": True, "conrelid": t.oid, "contypid": 0,
               "conindid": t.index_oid, "conparentid": 0, "confrelid": 0,
               "confupdtype": " ", "confdeltype": " ", "confmatchtype": " ",
               "conislocal": True, "coninhcount": 0, "connoinherit": True,
               "conkey": t.key_attnums}


@register_view(PG_CATALOG, "pg_attrdef", "oid oid, adrelid oid, adnum int2, adbin pg_node_tree")
def _pg_attrdef(cat: SessionCatalog, snap: CatalogSnapshot):
    # adbin holds the expression's SQL text: pg_get_expr(adbin, relid) returns it as is
    for t in snap.tables:
        for attnum, oid in sorted(t.attrdef_oids.items()):
            yield {"oid": oid, "adrelid": t.oid, "adnum": attnum,
                   "adbin": default_sql(t.columns[attnum - 1])}


@register_view(PG_CATALOG, "pg_description",
               "objoid oid, classoid oid, objsubid int4, description text")
def _pg_description(cat: SessionCatalog, snap: CatalogSnapshot):
    yield {"objoid": PUBLIC, "classoid": SYSTEM_RELATION_OIDS["pg_namespace"], "objsubid": 0,
           "description": "standard public schema"}
    for t in snap.tables:
        if t.meta.comment:
            yield {"objoid": t.oid, "classoid": SYSTEM_RELATION_OIDS["pg_class"],
                   "objsubid": 0, "description": t.meta.comment}


@register_view(PG_CATALOG, "pg_shdescription", "objoid oid, classoid oid, description text")
def _pg_shdescription(cat: SessionCatalog, snap: CatalogSnapshot):
    return ()


@register_view(PG_CATALOG, "pg_database", """oid oid, datname name, datdba oid, encoding int4,
    datlocprovider char, datistemplate bool, datallowconn bool, datconnlimit int4,
    datfrozenxid xid, datminmxid xid, dattablespace oid, datcollate text, datctype text,
    daticulocale text, datcollversion text, datacl aclitem[]""")
def _pg_database(cat: SessionCatalog, snap: CatalogSnapshot):
    yield {"oid": DATABASE_OID, "datname": cat.database, "datdba": BOOTSTRAP_SUPERUSER,
           "encoding": UTF8_ENCODING, "datlocprovider": "c", "datistemplate": False,
           "datallowconn": True, "datconnlimit": -1, "datfrozenxid": 0, "datminmxid": 1,
           "dattablespace": DEFAULT_TABLESPACE, "datcollate": "C.UTF-8",
           "datctype": "C.UTF-8"}


_ROLE_COLUMNS = """rolname name, rolsuper bool, rolinherit bool, rolcreaterole bool,
    rolcreatedb bool, rolcanlogin bool, rolreplication bool, rolconnlimit int4,
    rolpassword text, rolvaliduntil timestamptz, rolbypassrls bool, rolconfig text[], oid oid"""


def _role(cat: SessionCatalog) -> dict:
    return {"oid": BOOTSTRAP_SUPERUSER, "rolname": cat.user, "rolsuper": True,
            "rolinherit": True, "rolcreaterole": True, "rolcreatedb": True,
            "rolcanlogin": True, "rolreplication": True, "rolconnlimit": -1,
            "rolpassword": "********", "rolbypassrls": True}


@register_view(PG_CATALOG, "pg_roles", _ROLE_COLUMNS, relkind="v")
def _pg_roles(cat: SessionCatalog, snap: CatalogSnapshot):
    yield _role(cat)


@register_view(PG_CATALOG, "pg_authid", "oid oid, " + _ROLE_COLUMNS.rsplit(",", 1)[0])
def _pg_authid(cat: SessionCatalog, snap: CatalogSnapshot):
    yield {**_role(cat), "rolpassword": None}


@register_view(PG_CATALOG, "pg_user",
               """usename name, usesysid oid, usecreatedb bool, usesuper bool,
    userepl bool, usebypassrls bool, passwd text, valuntil timestamptz, useconfig text[]""",
       relkind="v")
def _pg_user(cat: SessionCatalog, snap: CatalogSnapshot):
    yield {"usename": cat.user, "usesysid": BOOTSTRAP_SUPERUSER, "usecreatedb": True,
           "usesuper": True, "userepl": True, "usebypassrls": True, "passwd": "********"}


@register_view(PG_CATALOG, "pg_auth_members",
               "roleid oid, member oid, grantor oid, admin_option bool")
def _pg_auth_members(cat: SessionCatalog, snap: CatalogSnapshot):
    return ()


@register_view(PG_CATALOG, "pg_am", "oid oid, amname name, amhandler regproc, amtype char")
def _pg_am(cat: SessionCatalog, snap: CatalogSnapshot):
    for oid, name, kind in ((HEAP_AM, "heap", "t"), (BTREE_AM, "btree", "i"),
                            (HASH_AM, "hash", "i")):
        yield {"oid": oid, "amname": name, "amhandler": 0, "amtype": kind}


@register_view(PG_CATALOG, "pg_tablespace",
               """oid oid, spcname name, spcowner oid, spcacl aclitem[],
    spcoptions text[]""")
def _pg_tablespace(cat: SessionCatalog, snap: CatalogSnapshot):
    for oid, name in ((DEFAULT_TABLESPACE, "pg_default"), (GLOBAL_TABLESPACE, "pg_global")):
        yield {"oid": oid, "spcname": name, "spcowner": BOOTSTRAP_SUPERUSER}


@register_view(PG_CATALOG, "pg_collation", """oid oid, collname name, collnamespace oid,
    collowner oid, collprovider char, collisdeterministic bool, collencoding int4,
    collcollate text, collctype text, colliculocale text, collversion text""")
def _pg_collation(cat: SessionCatalog, snap: CatalogSnapshot):
    for oid, name, prov, enc, coll in ((DEFAULT_COLLATION, "default", "d", -1, None),
                                       (C_COLLATION, "C", "c", -1, "C"),
                                       (POSIX_COLLATION, "POSIX", "c", -1, "POSIX")):
        yield {"oid": oid, "collname": name, "collnamespace": PG_CATALOG,
               "collowner": BOOTSTRAP_SUPERUSER, "collprovider": prov,
               "collisdeterministic": True, "collencoding": enc, "collcollate": coll,
               "collctype": coll}


@register_view(PG_CATALOG, "pg_settings", """name text, setting text, unit text, category text,
    short_desc text, extra_desc text, context text, vartype text, source text, min_val text,
    max_val text, enumvals text[], boot_val text, reset_val text, sourcefile text,
    sourceline int4, pending_restart bool""", relkind="v")
def _pg_settings(cat: SessionCatalog, snap: CatalogSnapshot):
    """One row per setting the session has (a wire connection: every name SHOW ALL lists,
    as SET left it; `setting` in the base unit, time settings in ms), with PostgreSQL's
    `source` (default / client / session / override) and `reset_val` (what RESET gives
    back: the startup value, else the default)."""
    settings = cat.settings
    values = getattr(settings, "values", None)      # wire.settings.Settings
    names = dict.fromkeys(list(DEFAULT_SETTINGS) + list(values or ()))
    for name in sorted(names, key=str.lower):
        boot = DEFAULTS.get(name, DEFAULT_SETTINGS.get(name, ""))
        value = settings.get(name)
        value = boot if value is None else value
        if values is not None:
            source, reset = settings.source(name), settings.reset_value(name)
        else:
            source, reset = "default", boot
        vartype = "integer" if re.fullmatch(r"-?\d+", boot) else \
            "bool" if boot in ("on", "off") else "string"
        yield {"name": name, "setting": value, "category": "Ungrouped", "context": "user",
               "unit": "ms" if name in MS_SETTINGS else None,
               "vartype": vartype, "source": source, "boot_val": boot,
               "reset_val": boot if reset is None else reset, "pending_restart": False,
               "short_desc": ""}


@register_view(PG_CATALOG, "pg_prepared_statements", """name text, statement text,
    prepare_time timestamptz, parameter_types text[], from_sql bool, generic_plans int8,
    custom_plans int8""", relkind="v")
def _pg_prepared_statements(cat: SessionCatalog, snap: CatalogSnapshot):
    """SQL-level PREPAREs (from_sql) and the extended protocol's named statements; the
    parameter types are their names (PostgreSQL's regtype[] prints the same)."""
    yield from cat.prepared()


# views of the session's state, built at each read (the others are cached per catalog
# snapshot, which a SET does not change: pg_settings read once kept showing those values)
SESSION_VIEWS = {"pg_catalog$pg_prepared_statements", "pg_catalog$pg_settings"}


DEFAULT_SETTINGS = {
    "application_name": "", "block_size": "8192", "bytea_output": "hex",
    "client_encoding": "UTF8", "DateStyle": "ISO, MDY",
    "default_transaction_isolation": "read committed", "default_transaction_read_only": "off",
    "extra_float_digits": "1", "integer_datetimes": "on", "IntervalStyle": "postgres",
    "is_superuser": "on", "jit": "off", "lc_collate": "C.UTF-8", "lc_ctype": "C.UTF-8",
    "max_identifier_length": "63", "max_index_keys": "32", "search_path": '"$user", public',
    "server_encoding": "UTF8", "server_version": SERVER_VERSION,
    "server_version_num": SERVER_VERSION_NUM, "standard_conforming_strings": "on",
    "statement_timeout": "0", "TimeZone": "UTC", "transaction_isolation": "read committed",
    "transaction_read_only": "off",
}


@register_view(PG_CATALOG, "pg_proc", """oid oid, proname name, pronamespace oid, proowner oid,
    prolang oid, procost float4, prorows float4, provariadic oid, prosupport regproc,
    prokind char, prosecdef bool, proleakproof bool, proisstrict bool, proretset bool,
    provolatile char, proparallel char, pronargs int2, pronargdefaults int2, prorettype oid,
    proargtypes oidvector, proallargtypes oid[], proargmodes char[], proargnames text[],
    proargdefaults pg_node_tree, protrftypes oid[], prosrc text, probin text,
    prosqlbody pg_node_tree, proconfig text[], proacl aclitem[]""")
def _pg_proc(cat: SessionCatalog, snap: CatalogSnapshot):
    # a few built-ins, enough for completion lists; catalog functions are not listed
    for oid, name, kind, ret, args, retset in (
            (1, "version", "f", 25, [], False), (2, "now", "f", 1184, [], False),
            (3, "count", "a", 20, [2276], False), (4, "sum", "a", 1700, [1700], False),
            (5, "avg", "a", 1700, [1700], False), (6, "min", "a", 2283, [2283], False),
            (7, "max", "a", 2283, [2283], False), (8, "lower", "f", 25, [25], False),
            (9, "upper", "f", 25, [25], False), (10, "length", "f", 23, [25], False),
            (11, "coalesce", "f", 2283, [2283], False), (12, "abs", "f", 1700, [1700], False),
            (13, "round", "f", 1700, [1700, 23], False),
            (14, "generate_series", "f", 20, [20, 20], True),
            (15, "unnest", "f", 2283, [2277], True)):
        yield {"oid": 8000 + oid, "proname": name, "pronamespace": PG_CATALOG,
               "proowner": BOOTSTRAP_SUPERUSER, "prolang": 12, "procost": 1.0,
               "prorows": 1000.0 if retset else 0.0, "provariadic": 0, "prosupport": 0,
               "prokind": kind, "prosecdef": False, "proleakproof": False,
               "proisstrict": True, "proretset": retset, "provolatile": "i",
               "proparallel": "s", "pronargs": len(args), "pronargdefaults": 0,
               "prorettype": ret, "proargtypes": args, "prosrc": name}


register_empty_view(PG_CATALOG, "pg_inherits", "inhrelid oid, inhparent oid, inhseqno int4, "
                                  "inhdetachpending bool")
register_empty_view(PG_CATALOG, "pg_extension",
                    """oid oid, extname name, extowner oid, extnamespace oid,
    extrelocatable bool, extversion text, extconfig oid[], extcondition text[]""")
register_empty_view(PG_CATALOG, "pg_depend",
                    """classid oid, objid oid, objsubid int4, refclassid oid,
    refobjid oid, refobjsubid int4, deptype char""")
register_empty_view(PG_CATALOG, "pg_range", """rngtypid oid, rngsubtype oid, rngmultitypid oid,
    rngcollation oid, rngsubopc oid, rngcanonical regproc, rngsubdiff regproc""")
register_empty_view(PG_CATALOG, "pg_enum",
                    "oid oid, enumtypid oid, enumsortorder float4, enumlabel name")
register_empty_view(PG_CATALOG, "pg_sequence", """seqrelid oid, seqtypid oid, seqstart int8,
    seqincrement int8, seqmax int8, seqmin int8, seqcache int8, seqcycle bool""")
register_empty_view(PG_CATALOG, "pg_trigger", """oid oid, tgrelid oid, tgparentid oid, tgname name,
    tgfoid oid, tgtype int2, tgenabled char, tgisinternal bool, tgconstrrelid oid,
    tgconstrindid oid, tgconstraint oid, tgdeferrable bool, tginitdeferred bool,
    tgnargs int2, tgattr int2vector, tgqual pg_node_tree, tgoldtable name, tgnewtable name""")
register_empty_view(PG_CATALOG, "pg_policy", """oid oid, polname name, polrelid oid, polcmd char,
    polpermissive bool, polroles oid[], polqual pg_node_tree, polwithcheck pg_node_tree""")
register_empty_view(PG_CATALOG, "pg_statistic_ext", """oid oid, stxrelid oid, stxname name,
    stxnamespace oid, stxowner oid, stxstattarget int4, stxkeys int2vector, stxkind char[],
    stxexprs pg_node_tree""")
register_empty_view(PG_CATALOG, "pg_publication", """oid oid, pubname name, pubowner oid,
    puballtables bool, pubinsert bool, pubupdate bool, pubdelete bool, pubtruncate bool,
    pubviaroot bool""")
register_empty_view(PG_CATALOG, "pg_publication_namespace", "oid oid, pnpubid oid, pnnspid oid")
register_empty_view(PG_CATALOG, "pg_publication_rel", """oid oid, prpubid oid, prrelid oid,
    prqual pg_node_tree, prattrs int2vector""")
register_empty_view(PG_CATALOG, "pg_opclass",
                    """oid oid, opcmethod oid, opcname name, opcnamespace oid,
    opcowner oid, opcfamily oid, opcintype oid, opcdefault bool, opckeytype oid""")
register_empty_view(PG_CATALOG, "pg_foreign_table", "ftrelid oid, ftserver oid, ftoptions text[]")
register_empty_view(PG_CATALOG, "pg_partitioned_table",
                    """partrelid oid, partstrat char, partnatts int2,
    partdefid oid, partattrs int2vector, partclass oidvector, partcollation oidvector,
    partexprs pg_node_tree""")
@register_view(PG_CATALOG, "pg_views", "schemaname name, viewname name, viewowner name, "
                              "definition text", relkind="v")
def _pg_views(cat: SessionCatalog, snap: CatalogSnapshot):
    for v in snap.user_views:
        yield {"schemaname": "public", "viewname": v.name, "viewowner": cat.user,
               "definition": v.definition}

register_empty_view(PG_CATALOG, "pg_matviews",
                    """schemaname name, matviewname name, matviewowner name,
    tablespace name, hasindexes bool, ispopulated bool, definition text""", relkind="v")


@register_view(PG_CATALOG, "pg_tables", """schemaname name, tablename name, tableowner name,
    tablespace name, hasindexes bool, hasrules bool, hastriggers bool, rowsecurity bool""",
       relkind="v")
def _pg_tables(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in snap.tables:
        yield {"schemaname": "public", "tablename": t.name, "tableowner": cat.user,
               "hasindexes": True, "hasrules": False, "hastriggers": False,
               "rowsecurity": False}


@register_view(PG_CATALOG, "pg_indexes", """schemaname name, tablename name, indexname name,
    tablespace name, indexdef text""", relkind="v")
def _pg_indexes(cat: SessionCatalog, snap: CatalogSnapshot):
    for t in snap.tables:
        yield {"schemaname": "public", "tablename": t.name, "indexname": f"{t.name}_pkey",
               "indexdef": index_definition(t, 0)}
