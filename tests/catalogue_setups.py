"""The failure catalogue's cases: what each one breaks, which command it runs, what it must say.

A case is registered with :func:`case` (kind, name, argv, the fragment its one error line must
hold, a setup that breaks one thing in a copy of the workspace). The cases themselves live in
``tests/catalogue_files.py`` (every file kind) and ``tests/catalogue_commands.py`` (usage, output
faults, disk full, internal errors, signals, memory); ``tests/test_failure_catalogue.py`` runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.tamper import edit_json, edit_manifest, flip_byte, rehash_files

CONFIG = """\
[release]
name = "r"
[model]
spec = "small"
[numerics]
threads = 1
[shapes]
candidates = [2]
[tolerances.op0]
max_flip_rate = 0.01
[tolerances.op1]
max_failed_row_rate = 0.5
[tolerances.op2]
max_failed_row_rate = 0.5
"""
CFG = ("--config", "harness.toml")
QUIET = ("--no-progress",)
NOBODY = 65534
ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    argv: tuple[str, ...]
    says: str  # a fragment the one error line must hold (the file, key, value or fault named)
    setup: Callable[[Path], None] | None = None
    status: int = 2
    env: tuple[tuple[str, str], ...] = ()
    how: str = "inproc"  # inproc | subprocess | nobody (without permission on ro/) | SIGINT | SIGTERM
    wait_for: str = ""  # signals: a glob (in the workspace) that shows the command is at work

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


CASES: list[Case] = []


def case(kind: str, name: str, argv, says: str, setup=None, **kw) -> None:
    CASES.append(Case(kind, name, tuple(argv), says, setup, **kw))


# -- setup helpers: each breaks one thing in the workspace ``ws``


def json_file(rel: str, change: Callable[[dict], object], reseal: str | None = None):
    def setup(ws: Path) -> None:
        edit_json(ws / rel, change, reseal)

    return setup


def text_file(rel: str, data: str | bytes):
    def setup(ws: Path) -> None:
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)

    return setup


def manifest_edit(rel: str, change: Callable[[dict], None], reseal: bool = True):
    def setup(ws: Path) -> None:
        edit_manifest(ws / rel, change, reseal=reseal)

    return setup


def run_manifest_edit(change: Callable[[dict], None], reseal: bool = True):
    def setup(ws: Path) -> None:
        edit_manifest(run_dir(ws), change, reseal=reseal)

    return setup


def run_dir(ws: Path) -> Path:
    (run,) = (ws / "runs").iterdir()
    return run


def set_key(*path_and_value):
    *keys, value = path_and_value

    def change(d: dict) -> None:
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return change


def del_key(*keys):
    def change(d: dict) -> None:
        for k in keys[:-1]:
            d = d[k]
        del d[keys[-1]]

    return change


def first_entry(change: Callable[[dict], object]):
    """Change the ledger's (only) entry; the change may return a replacement."""

    def outer(d: dict) -> None:
        key = next(iter(d["entries"]))
        new = change(d["entries"][key])
        if new is not None:
            d["entries"][key] = new

    return outer


def forge_golden_file(name: str, change: Callable[[Path], None]):
    """Change a file of the golden, then rehash and reseal its manifest, and bind the run to the forged
    golden (a careful forger: only the file's own content can give it away)."""

    def setup(ws: Path) -> None:
        gold = ws / "goldens" / "r"
        change(gold / name)
        forged = edit_manifest(gold, lambda d: rehash_files(d, gold), reseal=True)

        def rebind(d: dict) -> None:
            d["golden_id"], d["golden_manifest_sha256"] = forged["golden_id"], forged["manifest_sha256"]

        edit_manifest(run_dir(ws), rebind, reseal=True)

    return setup


def forge_run_file(name: str, change: Callable[[Path], None]):
    def setup(ws: Path) -> None:
        change(run_dir(ws) / name)
        edit_manifest(run_dir(ws), lambda d: rehash_files(d, run_dir(ws)), reseal=True)

    return setup


def flip_page_byte(path: Path) -> None:
    """Flip one byte in the middle of the largest column chunk (page data, not a page header's
    statistics, which no reader uses): only a page checksum can catch it."""
    meta = pq.ParquetFile(path).metadata
    cols = [meta.row_group(0).column(i) for i in range(meta.num_columns)]
    col = max(cols, key=lambda c: c.total_compressed_size)
    start = min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None)
    flip_byte(path, start + col.total_compressed_size // 2)


def rewrite_parquet(src: str, dst: str, table_change=None, metadata: dict | None | str = "keep"):
    """Rewrite a corpus (or any Parquet file) with a changed table and/or schema metadata."""

    def setup(ws: Path) -> None:
        table = pq.read_table(ws / src)
        if table_change is not None:
            table = table_change(table)
        if metadata != "keep":
            table = table.replace_schema_metadata(metadata)
        pq.write_table(table, ws / dst)

    return setup


def corpus_meta(value) -> dict:
    return {b"harness.corpus": value if isinstance(value, bytes) else json.dumps(value).encode()}


def set_column(name: str, change: Callable[[list], list], typ=None):
    def table_change(table: pa.Table) -> pa.Table:
        i = table.schema.get_field_index(name)
        values = change(table.column(name).to_pylist())
        typed = pa.field(name, typ) if typ is not None else table.schema.field(i)
        return table.set_column(i, typed, pa.array(values, typed.type))

    return table_change


def row0(change: Callable[[object], object]):
    def inner(values: list) -> list:
        values = list(values)
        values[0] = change(values[0])
        return values

    return inner


def wav_bytes(
    samples: bytes, tag: int = 1, bits: int = 16, rate: int = 16_000, channels: int = 1, data_size: int | None = None
) -> bytes:
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    size = len(samples) if data_size is None else data_size
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size) + samples
    return b"RIFF" + struct.pack("<I", len(body)) + body


def copy(src: str, dst: str):
    def setup(ws: Path) -> None:
        if (ws / src).is_dir():
            shutil.copytree(ws / src, ws / dst)
        else:
            shutil.copy(ws / src, ws / dst)

    return setup


def remove(rel: str):
    def setup(ws: Path) -> None:
        p = ws / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()

    return setup


def mkdir(rel: str):
    return lambda ws: (ws / rel).mkdir(parents=True, exist_ok=True)


def truncate(rel: str, keep: int = 100):
    def setup(ws: Path) -> None:
        (ws / rel).write_bytes((ws / rel).read_bytes()[:keep])

    return setup


def plugin(module: str, geometry: dict):
    """A bring-your-own-model factory module in the workspace, declaring ``geometry``."""
    text = f"""
from lanes.models.diar_nn_g import DiarNNG

def make(seed=0, device="cpu"):
    model = DiarNNG("small", seed=seed, device=device)
    model.geometry = {geometry!r}
    return model
"""
    return text_file(f"{module}.py", text)


SMALL_GEOMETRY = {
    "sample_rate": 16000,
    "window_samples": 16000,
    "frames_per_window": 5,
    "frame_step": 2700,
    "speakers": 3,
    "max_simultaneous": 2,
    "embedding_dim": 32,
    "windows_per_block": 8,
}

RUN = "{run}"  # replaced by the run directory of the workspace
SHOW = ("golden", "show", "goldens/r")
SCORE = ("score", "--golden", "goldens/r", "--run", RUN, "--out", "s2.json", *CFG)
PROMOTE = ("promote", "--score", "score.json", *CFG)
REPORT = ("report", "--score", "score.json", "--out", "rep2")
CSHOW = ("corpus", "show", "bad.parquet", *CFG)
GM = "goldens/r"
