"""The cluster client (docs/cluster.md): the catalog contract over RPC.

    client.py   ClusterClient (masters, request ids, propagated timestamps, retries),
                RemoteCatalog (the TableCatalog contract of engine/catalog/leases.py plus
                the DDL the SQL layer calls), RemoteTablet (the Tablet methods Table uses,
                each an RPC to the tablet's leader)
    cluster_info.py   servers and replicas as the leader master knows them (SHOW TABLETS,
                the kudu_system tables, the SQL front end's status page)
"""
