"""The cluster client's tablet scanner: fault tolerant, and replica selection for snapshots.

`scan_tablet(remote_tablet, ticket, stats)` is what `RemoteTablet.scan` returns: a generator
of one tablet's record batches, read over DoGet from a tablet server.

Fault tolerance (Kudu's fault-tolerant scanner). With `ClusterClient.fault_tolerant_scans`
(the default) the scan is *ordered*: the tablet server returns the tablet's rows in
primary-key order and tags every batch with its last key (encoded, the bytes every replica
compares) and the snapshot timestamp (Tablet.open_scan, OrderMode.ORDERED). When the stream
breaks — the server is killed, unreachable, refuses, or the stream's deadline passes — the
scanner opens the same scan on another replica with `resume_after` = the last key it
yielded and the same snapshot: exactly the rows not yet returned, none lost, none repeated.
A READ_LATEST scan (no snapshot) is pinned by the server to its latest committed timestamp
and the scanner reuses the timestamp of the first batch for every resumption. Without fault
tolerance (`fault_tolerant_scans=False`) the scan is unordered (a little cheaper) and a
failure after the first batch raises 57P03 ("run the statement again"); before the first
batch it is retried elsewhere either way.

Replica selection (Kudu's ReplicaSelection), `ClusterClient.replica_selection`:
- LEADER_ONLY (default): a scan opens on the tablet's leader (NOT_THE_LEADER hints are
  followed). A resumed scan has a pinned snapshot, so it may continue on any replica that
  is safe at it — the believed leader first, then the others — and need not wait for the
  election after the leader died.
- CLOSEST_REPLICA: a scan with a snapshot (every scan the SQL layer makes: Table picks one
  per statement; time travel AS OF) opens on the closest replica — one on this host
  first, the others in random order (spreading readers over replicas) — leader or follower.
  A follower answers once its safe time has passed the snapshot (it waits up to
  `SAFE_WAIT_S`, asking its leader which log index covers the snapshot; then the scanner
  tries the next replica). A scan without a snapshot still reads the leader.
Both return the same rows for the same snapshot (docs/cluster.md, Scans).

Deadlines: a stream may run `SCAN_STREAM_TIMEOUT_S` (an ordered scan then simply resumes,
so a long scan is a chain of streams); the scan fails with 57P03 when no batch arrived for
the client's `timeout_s` (default 30 s) while every replica was tried with backoff.
"""

from __future__ import annotations

import random
import socket
import time
from typing import Iterator

import pyarrow as pa

from engine import errors
from engine.rpc import codec
from engine.rpc.rpc import RemoteError, Unreachable

LEADER_ONLY = "LEADER_ONLY"
CLOSEST_REPLICA = "CLOSEST_REPLICA"
REPLICA_SELECTIONS = (LEADER_ONLY, CLOSEST_REPLICA)
# how long one DoGet stream of an ordered scan may run before it is resumed in a new one
SCAN_STREAM_TIMEOUT_S = 10.0
# how long a follower waits for its safe time to pass a snapshot before refusing
SAFE_WAIT_S = 2.0

_RETRYABLE = (RemoteError, Unreachable)
_local_hosts: set[str] | None = None


class TabletUnavailable(errors.ServiceUnavailable):
    sqlstate = "57P03"


def parse_replica_selection(value: str) -> str:
    v = str(value).strip().upper().replace("-", "_")
    if v in ("CLOSEST", "NEAREST"):
        v = CLOSEST_REPLICA
    if v in ("LEADER",):
        v = LEADER_ONLY
    if v not in REPLICA_SELECTIONS:
        raise errors.InvalidArgument(f"replica selection is LEADER_ONLY or CLOSEST_REPLICA, "
                                     f"not {value!r}")
    return v


def local_hosts() -> set[str]:
    """Names and addresses of this host (a replica there is the closest)."""
    global _local_hosts
    if _local_hosts is None:
        hosts = {"127.0.0.1", "localhost", "::1"}
        try:
            name = socket.gethostname()
            hosts.add(name)
            hosts.update(i[4][0] for i in socket.getaddrinfo(name, None))
        except OSError:
            pass
        _local_hosts = hosts
    return _local_hosts


def _host(addr: str) -> str:
    return addr.rsplit(":", 1)[0].strip("[]")


def closest_first(replicas: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    """Replicas on this host first, each group in random order."""
    local = local_hosts()
    shuffled = list(replicas)
    rng.shuffle(shuffled)
    return sorted(shuffled, key=lambda r: _host(r[1]) not in local)


def scan_tablet(rt, ticket: dict, stats=None) -> Iterator[pa.RecordBatch]:
    """One tablet's batches, resumed on another replica when a server fails (see above)."""
    c = rt.client
    ordered = bool(getattr(c, "fault_tolerant_scans", True))
    selection = getattr(c, "replica_selection", LEADER_ONLY)
    ticket = dict(ticket, ordered=ordered)
    rng = random.Random()
    last_key: bytes | None = None
    pinned = ticket.get("snapshot")
    if pinned is not None:
        c.observe_ts(pinned[0])  # what this client read: its later writes are stamped after
    yielded = False
    deadline = time.monotonic() + c.timeout_s
    delay, last_err = 0.02, None
    tried: set[str] = set()
    loc = rt.catalog.locations(rt.tablet_id, rt.meta.id)
    while True:
        any_replica = pinned is not None and (selection == CLOSEST_REPLICA or yielded)
        order = closest_first(loc.replicas, rng) if (
            any_replica and selection == CLOSEST_REPLICA) else loc.order()
        cands = [r for r in order if r[0] not in tried]
        if not cands:
            tried.clear()
            if time.monotonic() + delay > deadline:
                raise _unavailable(rt, last_err, c.timeout_s)
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
            try:
                rt.catalog.refresh_locations(rt.meta.id)
            except errors.NotFound:
                raise  # the table was dropped meanwhile
            except errors.EngineError as e:
                last_err = e
            loc = rt.catalog.locations(rt.tablet_id, rt.meta.id)
            continue
        uuid, addr = cands[0]
        t = dict(ticket, ts=c.last_ts, snapshot=pinned, any_replica=any_replica,
                 safe_wait_s=SAFE_WAIT_S, batch_rows=getattr(c, "scan_batch_rows", None))
        if last_key is not None:
            t["resume_after"] = last_key
        stream = None
        try:
            stream = c.rpc.get(addr, t, timeout_s=SCAN_STREAM_TIMEOUT_S if ordered
                               else max(c.timeout_s, SCAN_STREAM_TIMEOUT_S))
            opened = False
            for batch, meta in stream.chunks():
                if not opened:
                    opened = True
                    k = (rt.tablet_id, addr)
                    c.scan_streams[k] = c.scan_streams.get(k, 0) + 1
                    if stats is not None:       # EXPLAIN ANALYZE names the servers read
                        stats.servers += (f"{uuid}@{addr}",)
                if meta is not None:
                    m = codec.decode(meta)
                    last_key = m["key"]
                    if pinned is None:
                        pinned = [m["ts"], True]
                        c.observe_ts(m["ts"])
                if not any_replica:
                    loc.leader = uuid
                if stats is not None:
                    stats.rows_returned += batch.num_rows
                yielded = True
                deadline = time.monotonic() + c.timeout_s  # progress
                delay = 0.02
                yield batch
            return
        except _RETRYABLE as e:
            last_err = e
            if yielded and not ordered:
                raise TabletUnavailable(
                    f"the scan of tablet {rt.tablet_id} of table \"{rt.meta.name}\" was "
                    f"interrupted ({e}); run the statement again") from None
            if yielded:
                c.scan_resumes = getattr(c, "scan_resumes", 0) + 1
            tried.add(uuid)
            hint = getattr(e, "leader_uuid", None)
            if hint and hint not in tried and any(r[0] == hint for r in loc.replicas):
                loc.leader = hint
        finally:
            if stream is not None:
                stream.cancel()


def _unavailable(rt, last_err, timeout_s: float) -> errors.EngineError:
    return TabletUnavailable(
        f"tablet {rt.tablet_id} of table \"{rt.meta.name}\" is unavailable: no replica "
        f"answered the scan within {timeout_s:.0f} s (last error: {last_err})")
