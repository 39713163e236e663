"""Helpers that edit harness files the way a careless hand or a careful forger would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from golden.manifest import MANIFEST, sha256_file
from golden.store import golden_id_of
from harness.base.jsonio import seal


def edit_manifest(directory: Path, change: Callable[[dict], None], reseal: bool = False) -> dict:
    """Change a golden's or run's manifest in place; with ``reseal`` also recompute its digest (and a
    golden's id), as a forger who read the docs would."""
    path = Path(directory) / MANIFEST
    data = json.loads(path.read_text())
    change(data)
    if reseal:
        data = {k: v for k, v in data.items() if k != "manifest_sha256"}
        if data.get("kind") == "harness.golden":
            data["golden_id"] = golden_id_of(data)
        data = seal(data, "manifest_sha256")
    path.write_text(json.dumps(data, indent=2))
    return data


def rehash_files(data: dict, directory: Path) -> None:
    """Make the manifest's file entries match the files on disk (a forger's second step)."""
    for name, entry in data["files"].items():
        p = Path(directory) / name
        if p.is_file():
            entry["sha256"], entry["bytes"] = sha256_file(p), p.stat().st_size


def edit_json(path: Path, change: Callable[[dict], object], field: str | None = None) -> dict:
    """Change any harness JSON file; with ``field`` re-seal it under that digest field."""
    data = json.loads(Path(path).read_text())
    result = change(data)
    if result is not None:
        data = result
    if field is not None:
        data = seal({k: v for k, v in data.items() if k != field}, field)
    Path(path).write_text(json.dumps(data, indent=1))
    return data


def flip_byte(path: Path, at: int | None = None) -> None:
    data = bytearray(Path(path).read_bytes())
    i = len(data) // 2 if at is None else at
    data[i] ^= 0xFF
    Path(path).write_bytes(bytes(data))
