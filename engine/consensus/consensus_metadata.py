"""ConsensusMetadata: a replica's durable Raft state outside the log (Kudu's cmeta).

    current_term      the latest term this replica has seen
    voted_for         whom it voted for in current_term (None: nobody yet)
    committed_config  the latest committed configuration (configurations still pending
                      are recovered from the log; this one survives log GC)

Raft's safety rests on these never going backwards across a crash: a replica that forgot
its vote could vote twice in one term. The node hands a new value to its host in
`Ready.metadata`; the host stores it *before* sending any message of that Ready.

Two stores: `FileMetadataStore` writes JSON with the atomic write-fsync-rename-fsync-dir
sequence (`engine.fs.write_json_atomic`), so after a crash the file holds the old or the new
state, never a mix; `MemoryMetadataStore` is the simulator's (what was saved survives a
simulated crash).
"""

from __future__ import annotations

import dataclasses
import json
import os

from engine import errors
from engine.consensus.messages import RaftConfig
from engine.fs import write_json_atomic

CMETA_FILE = "consensus-meta.json"


@dataclasses.dataclass(frozen=True)
class ConsensusMetadata:
    current_term: int
    voted_for: str | None
    committed_config: RaftConfig

    def to_dict(self) -> dict:
        return {"current_term": self.current_term, "voted_for": self.voted_for,
                "committed_config": self.committed_config.to_dict()}

    @staticmethod
    def from_dict(d: dict) -> "ConsensusMetadata":
        return ConsensusMetadata(d["current_term"], d["voted_for"],
                                 RaftConfig.from_dict(d["committed_config"]))


class MetadataStore:
    def load(self) -> ConsensusMetadata | None:
        raise NotImplementedError

    def save(self, cmeta: ConsensusMetadata) -> None:
        raise NotImplementedError


class MemoryMetadataStore(MetadataStore):
    def __init__(self, initial: ConsensusMetadata | None = None):
        self._saved = initial
        self.saves = 0

    def load(self) -> ConsensusMetadata | None:
        return self._saved

    def save(self, cmeta: ConsensusMetadata) -> None:
        self._saved = cmeta
        self.saves += 1


class FileMetadataStore(MetadataStore):
    def __init__(self, directory: str, fsync: bool = True):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, CMETA_FILE)
        self.fsync = fsync

    def load(self) -> ConsensusMetadata | None:
        try:
            with open(self.path) as f:
                return ConsensusMetadata.from_dict(json.load(f))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError) as e:
            raise errors.Corruption(f"{self.path}: {e}") from e

    def save(self, cmeta: ConsensusMetadata) -> None:
        write_json_atomic(self.path, cmeta.to_dict(), self.fsync)
