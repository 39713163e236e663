"""JSON the harness writes (manifests, scores, ledgers, reports): one encoder, atomic writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np


def json_default(value: object) -> object:
    """numpy scalars and arrays, and paths, as plain JSON values."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(data: object, indent: int | None = 1) -> str:
    return json.dumps(data, indent=indent, sort_keys=True, default=json_default)


def write_json_atomic(path: Path, data: object, indent: int | None = 1) -> Path:
    """Write to a temporary file beside ``path`` and rename: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(dumps(data, indent) + "\n")
    tmp.replace(path)
    return path
