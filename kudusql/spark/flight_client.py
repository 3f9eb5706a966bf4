"""The two Flight calls the PySpark source and the streaming sink make to an embedded
database's Flight endpoint (wire/flight.py): an action with a JSON body and a JSON
answer, and a do_put of record batches answered by one JSON summary."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as fl


def command(**kw) -> fl.FlightDescriptor:
    """A Flight descriptor whose command is `kw` as JSON (the server's request format)."""
    return fl.FlightDescriptor.for_command(json.dumps(kw).encode())


def action(location: str, kind: str, body: dict):
    """Run action `kind` with `body` (JSON) on the server at `location`; its JSON answer."""
    with fl.connect(location) as c:
        res = list(c.do_action(fl.Action(kind, json.dumps(body).encode())))
    return json.loads(res[0].body.to_pybytes())


def put(location: str, descriptor: fl.FlightDescriptor, first: pa.RecordBatch | None,
        rest: Iterator[pa.RecordBatch]) -> dict:
    """do_put of `first` and then the non-empty batches of `rest` (with no `first`: an
    empty put under an empty schema); the server's JSON summary of the write."""
    with fl.connect(location) as c:
        w, r = c.do_put(descriptor, first.schema if first is not None else pa.schema([]))
        if first is not None:
            w.write_batch(first)
            for b in rest:
                if b.num_rows:
                    w.write_batch(b)
        w.done_writing()
        buf = r.read()
        w.close()
    return json.loads(buf.to_pybytes())
