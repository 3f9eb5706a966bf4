"""TPC-H data generation: `tpchgen-cli` (a Rust port of dbgen) writing parquet, cached.

    generate(0.01, "dir")  ->  dir/region.parquet ... dir/lineitem.parquet + dir/_COMPLETE
                               (or dir/<table>/<table>.<i>.parquet with parts > 1)

The output is complete only once `_COMPLETE` exists (written last, atomically, naming the
scale factor and the files). A later call with the same scale factor returns the cached
files; a directory without the marker (an interrupted run) or with another scale factor
is regenerated: tpchgen writes into a temporary directory inside `out_dir`, whose files
are then moved into place, so a crash never leaves half-written files under their final
names.

tpchgen's parquet types: identifiers int64, the four small integers (l_linenumber, p_size,
ps_availqty, o_shippriority) int32, money and quantities decimal128(15, 2), dates date32,
text string_view; every column is non-nullable. The engine's conversion
(engine/convert.py) accepts all of them, but the partitioned write path cannot split
string_view columns between tablets, so the loader casts them to string (tpch/load.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from tpch.schema import TABLES

MARKER = "_COMPLETE"


class TpchgenNotFound(RuntimeError):
    pass


def find_tpchgen() -> str:
    """`tpchgen-cli` next to the running Python (a venv's bin/) or on PATH."""
    cand = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    if os.access(cand, os.X_OK):
        return cand
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    raise TpchgenNotFound("tpchgen-cli not found next to the Python executable nor on PATH; "
                          "install the test or bench extra: pip install -e '.[test]'")


def _table_files(out_dir: str, table: str, parts: int) -> list[str]:
    if parts <= 1:
        return [os.path.join(out_dir, f"{table}.parquet")]
    return [os.path.join(out_dir, table, f"{table}.{i}.parquet") for i in range(1, parts + 1)]


def cached(out_dir: str, sf: float) -> dict[str, list[str]] | None:
    """The files of a complete generation at scale factor `sf` in `out_dir`, else None."""
    try:
        with open(os.path.join(out_dir, MARKER)) as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return None
    if marker.get("sf") != sf or sorted(marker.get("files", {})) != sorted(TABLES):
        return None
    files = {t: [os.path.join(out_dir, p) for p in marker["files"][t]] for t in TABLES}
    if not all(os.path.exists(p) for ps in files.values() for p in ps):
        return None
    return files


def generate(sf: float, out_dir: str, parts: int = 1, threads: int | None = None,
             log=None) -> dict[str, list[str]]:
    """Generate (or reuse) the eight TPC-H tables at scale factor `sf` as parquet in
    `out_dir`; table -> its parquet files (one file each unless `parts` > 1).

    `threads`: tpchgen's --num-threads (default: its own, the CPU count); `log`: a
    callable taking a message (e.g. print) for what is happening.
    """
    if sf <= 0:
        raise ValueError(f"scale factor must be > 0, not {sf}")
    out_dir = os.path.abspath(out_dir)
    files = cached(out_dir, sf)
    if files is not None:
        return files
    os.makedirs(out_dir, exist_ok=True)
    marker = os.path.join(out_dir, MARKER)
    if os.path.exists(marker):
        os.remove(marker)  # another scale factor or missing files: regenerate
    exe = find_tpchgen()
    tmp = tempfile.mkdtemp(prefix=".gen-", dir=out_dir)
    t0 = time.perf_counter()
    if log:
        log(f"generating TPC-H SF {sf:g} with {exe} into {out_dir} ...")
    try:
        cmd = [exe, "parquet", "-s", f"{sf:g}", f"--output-dir={tmp}", "--quiet"]
        if parts > 1:
            cmd.append(f"--parts={parts}")
        if threads:
            cmd.append(f"--num-threads={threads}")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        files = {t: _table_files(out_dir, t, parts) for t in TABLES}
        for t in TABLES:
            if parts > 1:
                dest = os.path.join(out_dir, t)
                shutil.rmtree(dest, ignore_errors=True)
                os.replace(os.path.join(tmp, t), dest)
            else:
                os.replace(os.path.join(tmp, f"{t}.parquet"), files[t][0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    missing = [p for ps in files.values() for p in ps if not os.path.exists(p)]
    if missing:
        raise RuntimeError(f"tpchgen-cli did not write {missing}")
    rel = {t: [os.path.relpath(p, out_dir) for p in ps] for t, ps in files.items()}
    with open(marker + ".tmp", "w") as f:
        json.dump({"sf": sf, "parts": parts, "files": rel}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(marker + ".tmp", marker)
    if log:
        log(f"generated SF {sf:g} in {time.perf_counter() - t0:.1f}s")
    return files


def parquet_files(parquet_dir: str) -> dict[str, list[str]]:
    """table -> parquet files of a directory written by `generate` (or laid out like it:
    `<table>.parquet` or `<table>/*.parquet`)."""
    out = {}
    for t in TABLES:
        single = os.path.join(parquet_dir, f"{t}.parquet")
        if os.path.exists(single):
            out[t] = [single]
            continue
        sub = os.path.join(parquet_dir, t)
        parts = sorted(os.path.join(sub, f) for f in os.listdir(sub)
                       if f.endswith(".parquet")) if os.path.isdir(sub) else []
        if not parts:
            raise FileNotFoundError(f"no parquet for table {t!r} under {parquet_dir}")
        out[t] = parts
    return out
