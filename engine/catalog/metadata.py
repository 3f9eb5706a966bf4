"""TableMetadata: one version of one table's entry in the catalog.

Immutable: every DDL publishes a new object, so an operation that read a table's metadata
once uses one schema and one partitioning throughout, whatever DDL runs meanwhile (the
catalog's leases check that the version they reference tablets for is still current).

What it maps is the table's *partition directory*: `partition_schema.partitions[i]` is held
by tablet `tablet_ids[i]`, so routing a row or pruning a scan (PartitionSchema) gives
partition indexes, and this gives the tablets. `schema_version` counts ADD / DROP COLUMNs;
every tablet of the table is at that version or (while `pending_schema` is set) the next.
`to_dict` / `from_dict` are its form in catalog.json.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine import errors
from engine.catalog.partition import PartitionSchema
from engine.schema import Schema


@dataclasses.dataclass(frozen=True)
class TableMetadata:
    """One table, immutable: every DDL publishes a new object."""

    id: str
    name: str
    schema: Schema
    partition_schema: PartitionSchema
    replication_factor: int
    tablet_ids: tuple[str, ...]  # tablet_ids[i] holds partition_schema.partitions[i]
    comment: str | None = None
    properties: dict = dataclasses.field(default_factory=dict)
    # Bumped by every ADD / DROP COLUMN; every tablet's schema version is at least this.
    schema_version: int = 0
    # An ADD / DROP COLUMN under way (or interrupted by a crash): the target schema, whose
    # version is schema_version + 1. Tablets may already have it; the table is not used
    # until the alter is finished (rolled forward), see the module docstring.
    pending_schema: Schema | None = None

    @property
    def partitions(self):
        return self.partition_schema.partitions

    def tablets(self) -> list[tuple[Any, str]]:
        """[(Partition, tablet id)] in partition order."""
        return list(zip(self.partition_schema.partitions, self.tablet_ids))

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "schema": self.schema.to_dict(),
                "partition_schema": self.partition_schema.to_dict(),
                "replication_factor": self.replication_factor,
                "tablets": [{"tablet_id": tid, "hash_buckets": list(p.hash_buckets),
                             "partition_key_start": p.partition_key_start.hex()}
                            for p, tid in self.tablets()],
                "comment": self.comment, "properties": dict(self.properties),
                "schema_version": self.schema_version,
                "pending_schema": None if self.pending_schema is None
                else self.pending_schema.to_dict()}

    @staticmethod
    def from_dict(d: dict) -> "TableMetadata":
        schema = Schema.from_dict(d["schema"])
        ps = PartitionSchema.from_dict(d["partition_schema"], schema)
        tablets = d["tablets"]
        parts = ps.partitions
        if len(tablets) != len(parts) or any(
                tuple(t["hash_buckets"]) != p.hash_buckets or
                bytes.fromhex(t["partition_key_start"]) != p.partition_key_start
                for t, p in zip(tablets, parts)):
            raise errors.Corruption(
                f"catalog: the tablets of table {d['name']!r} do not match its partitions")
        pending = d.get("pending_schema")
        return TableMetadata(d["id"], d["name"], schema, ps, d["replication_factor"],
                             tuple(t["tablet_id"] for t in tablets), d.get("comment"),
                             dict(d.get("properties") or {}), d.get("schema_version", 0),
                             None if pending is None else Schema.from_dict(pending))
