"""Replication and the write-ahead log: the Log (WAL segments) and Raft per tablet
(RaftConsensus over the Log, proven by the deterministic simulator). See docs/consensus.md."""
