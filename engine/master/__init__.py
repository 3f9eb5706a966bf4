"""The master (docs/cluster.md): the catalog of a cluster, replicated by Raft.

    sys_catalog.py  SysCatalog: the catalog state machine over a Raft group of masters
    master.py       Master: the process (RPC handlers, tablet-server registry, placement)
"""
