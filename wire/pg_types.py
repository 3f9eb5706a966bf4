"""PostgreSQL types on the wire: OIDs, Arrow <-> OID mapping, and the value codecs.

Result columns are Arrow arrays; they go out as whole columns, never value by value:

    Arrow type          OID   name         text format              binary format
    int8, int16         21    int2         pc.cast -> string        >i2
    int32               23    int4         pc.cast -> string        >i4
    int64               20    int8         pc.cast -> string        >i8
    float32 / float64   700 / 701          shortest round trip,     >f4 / >f8
                                           PostgreSQL's exponent
                                           rule (see _float_text)
    decimal128(p, s)    1700  numeric      pc.cast -> string        base-10000 digits
                              typmod ((p << 16) | s) + 4            (numpy, p <= 18)
    string              25    text         as is                    UTF-8 bytes
    binary              17    bytea        \\x + hex (numpy)         raw bytes
    bool                16    bool         t / f                    1 byte
    date32              1082  date         YYYY-MM-DD               >i4 days since 2000-01-01
    timestamp[us]       1114  timestamp    YYYY-MM-DD HH:MM:SS[.f]  >i8 us since 2000-01-01
    timestamp[us, tz]   1184  timestamptz  ... +00 (UTC)            same
    null                25    text         NULL                     NULL
    anything else       25    text         pc.cast -> string        as text

`data_rows(batch, formats)` turns a RecordBatch into the bytes of its DataRow messages in
one go: each column becomes a binary array of wire fields (int32 length, -1 for NULL, then
the value), and `binary_join_element_wise` glues a per-row header ('D', length, column
count) and the fields of every column into one buffer (~100 ns a row for three columns;
measured in bench/wire_bench.py). COPY TO's binary rows are the same fields behind an int16
column count.

Parameters arrive one value at a time (`decode_param`): text or binary, by OID, into the
Python values `Session.execute` binds. When a parameter's OID is 0 (unspecified) the type
the statement implies (`Session.describe`) decides; with neither, the text stays a str.

Intervals go out as interval (1186): PostgreSQL's text form ('1 year 2 mons 3 days
04:05:06') or its binary form (int64 microseconds, int32 days, int32 months).

Not done: arrays for asyncpg (it introspects array types with a WITH RECURSIVE query over
pg_catalog, which kudusql refuses), times as results beyond their text form, BC dates
(PostgreSQL prints "0044-03-15 BC", we print Arrow's "-0043-03-15").

This module is the face the rest of wire/ uses (`from wire import pg_types as T`); the code
lives in one module per part, each importing only those above it in this list:

    type_oids      OIDs, Arrow <-> OID, RowDescription fields, result formats, conform
    text_codec     whole-column text encoders (`encode_text`)
    binary_codec   whole-column binary encoders (`encode_binary`)
    datarows       DataRow batches (`data_rows`, `join_rows`), per-value encoders
    params         Bind parameter decoders (`decode_param`, `parse_text`, `parse_binary`)

Nothing in those modules imports this one.
"""
from __future__ import annotations

from wire.type_oids import (  # noqa: F401 - re-exported
    ARRAY_OF,
    BOOL,
    BPCHAR,
    BYTEA,
    CHAR,
    DATE,
    ELEMENT_OF,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    JSON,
    JSONB,
    NAME,
    NUMERIC,
    OID,
    PG_EPOCH_DAYS,
    PG_EPOCH_US,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    TYPES,
    UNKNOWN,
    UUID,
    VARCHAR,
    VOID,
    arrow_type_for,
    conform,
    field_descriptions,
    ParamError,
    result_formats,
    type_oid,
)
from wire.text_codec import (  # noqa: F401 - re-exported
    apply_float_digits,
    encode_text,
)
from wire.binary_codec import (  # noqa: F401 - re-exported
    encode_binary,
    _numeric_value,
    parse_array_text,
)
from wire.datarows import (  # noqa: F401 - re-exported
    _S16,
    _S32,
    SMALL_BATCH_ROWS,
    data_row,
    data_row_py,
    data_rows,
    _data_rows_small,
    encode_columns,
    join_rows,
    value_code,
    value_encoder,
)
from wire.params import (  # noqa: F401 - re-exported
    BOOL_FALSE_WORDS,
    BOOL_TRUE_WORDS,
    decode_param,
    parse_binary,
    parse_bool,
    parse_bytea,
    parse_text,
)
