"""File-system primitives for crash safety, used by every layer that persists state.

`write_json_atomic` is the write-fsync-rename-fsync-dir sequence: after a crash the file
holds either the old or the new content, never a mix. `fsync_dir` makes a rename or an
unlink in a directory durable.
"""

from __future__ import annotations

import json
import os
from typing import Any


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str, obj: Any, fsync: bool = True, indent: int | None = None
                      ) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")
