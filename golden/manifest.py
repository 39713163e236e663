"""Manifests and atomic directories: the integrity half of the golden store.

A golden or run directory is complete only if its ``manifest.json`` exists and every file
it lists has the recorded sha256 and row count. Directories are built under a temporary
name beside their destination and renamed into place in one step, so a crash leaves either
a complete directory or none (and a ``.tmp-`` folder that loading never mistakes for one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.errors import GoldenError
from harness.jsonio import dumps

MANIFEST = "manifest.json"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_entries(directory: Path, rows: dict[str, int]) -> dict[str, dict]:
    """sha256, size and row count of every file under ``directory`` (relative names)."""
    entries = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST):
        rel = path.relative_to(directory).as_posix()
        entries[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size, "rows": rows.get(rel)}
    return entries


def content_id(entries: dict[str, dict]) -> str:
    h = hashlib.sha256()
    for name in sorted(entries):
        h.update(f"{name}\0{entries[name]['sha256']}\n".encode())
    return h.hexdigest()[:12]


def write_manifest(directory: Path, manifest: dict) -> None:
    (directory / MANIFEST).write_text(dumps(manifest, indent=2) + "\n")


def read_manifest(directory: Path, kind: str) -> dict:
    path = directory / MANIFEST
    if not directory.is_dir():
        raise GoldenError(f"{directory}: no such {kind} directory")
    if not path.is_file():
        raise GoldenError(f"{directory}: not a complete {kind} (no {MANIFEST}; an interrupted write?)")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GoldenError(f"{path}: manifest is not valid JSON ({exc})") from None
    if manifest.get("kind") != f"harness.{kind}":
        raise GoldenError(f"{path}: not a {kind} manifest (kind={manifest.get('kind')!r})")
    return manifest


def verify_files(directory: Path, manifest: dict) -> None:
    """Every listed file present with its sha256; no unlisted data file. Names the first bad file."""
    listed = manifest.get("files")
    if not isinstance(listed, dict) or not listed:
        raise GoldenError(f"{directory / MANIFEST}: lists no files")
    for name, entry in sorted(listed.items()):
        path = directory / name
        if not path.is_file():
            raise GoldenError(f"{path}: listed in the manifest but missing")
        size = path.stat().st_size
        if size != entry.get("bytes"):
            raise GoldenError(f"{path}: size {size} bytes, manifest says {entry.get('bytes')} (truncated or replaced)")
        digest = sha256_file(path)
        if digest != entry.get("sha256"):
            raise GoldenError(f"{path}: sha256 {digest[:12]}... does not match the manifest's "
                              f"{str(entry.get('sha256'))[:12]}... (file was modified)")
    extra = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*.parquet")
                   if p.relative_to(directory).as_posix() not in listed)
    if extra:
        raise GoldenError(f"{directory / extra[0]}: data file not listed in the manifest")


@contextlib.contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temporary directory beside ``final``; rename it to ``final`` on success."""
    if final.exists():
        raise GoldenError(f"{final}: already exists; nothing is ever overwritten")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
