"""Replication and the write-ahead log. Today: the Log (single replica); Raft comes later."""
