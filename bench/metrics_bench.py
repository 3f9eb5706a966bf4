"""What the tablet server's metrics cost per RPC (engine/metrics): the instrumented write
handler (1000-row batch: rows counted by op type, latency observed) and an instrumented
DoAction handler, against the same handlers bare, in one run (best of 7).

    python -m bench.metrics_bench
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from engine.metrics.metrics import ServerMetrics


def _per_call_us(fn, *args, n: int = 20000) -> float:
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main() -> None:
    m = ServerMetrics("tserver")
    rows = pa.table({"k": np.arange(1000), "__op": pa.array(np.ones(1000, dtype=np.int8))})
    result = {"timestamp": 1, "num_applied": 1000, "row_errors": []}

    def bare_write(cmd, t):
        return result

    def bare_action(p):
        return None
    write = m.instrument_write(bare_write, "__op")
    action = m.instrument({"x": bare_action})["x"]
    w = _per_call_us(write, {}, rows) - _per_call_us(bare_write, {}, rows)
    a = _per_call_us(action, None) - _per_call_us(bare_action, None)
    print(f"metrics cost per write RPC (1000-row batch): {w:.1f} us")
    print(f"metrics cost per DoAction RPC: {a:.1f} us")


if __name__ == "__main__":
    main()
