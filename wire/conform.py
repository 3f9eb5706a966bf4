"""Arrow rows from a client (Spark, Flight, the Arrow stream endpoint) cast to a table's
Arrow types before they are written or compared (wire/flight.py, wire/stream_sink.py)."""

from __future__ import annotations

import pyarrow as pa


def conform(rows: pa.Table, target: pa.Schema) -> pa.Table:
    """Cast columns to the table's Arrow types where they differ (Spark sends int32 for an
    INT32 column but e.g. timestamp[us, tz=UTC] for TIMESTAMP); a column that does not cast
    safely is passed as is and the engine reports its rows (INVALID)."""
    by_name = {f.name: f for f in target}
    for i, f in enumerate(rows.schema):
        want = by_name.get(f.name)
        if want is None or f.type.equals(want.type):
            continue
        try:
            rows = rows.set_column(i, f.name, rows.column(i).cast(want.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
    return rows
