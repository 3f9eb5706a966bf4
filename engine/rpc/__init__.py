"""The cluster's RPC layer over Arrow Flight (docs/cluster.md).

    codec.py    payloads: JSON structure + raw byte blobs, registered dataclasses only
    rpc.py      RpcServer (a FlightServerBase: DoAction for control and Raft, DoPut for
                writes, DoGet for scans), RpcClient (per-call deadlines, error mapping),
                the cluster secret, optional TLS (TlsConfig, load_tls,
                create_self_signed_cert; TlsMismatch for a misconfigured side), and the
                traffic failpoint used by fault tests
"""
