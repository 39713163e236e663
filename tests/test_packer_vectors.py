"""`harness laws --export-vectors DIR`: language-neutral packing test vectors, re-verified here.

The vectors are the harness packer's answers; this test re-derives every one from its request (and checks
the example external packer, standing in for the engine, against them over the wire), and shows the export
refuses a non-empty folder (naming --replace) and leaves nothing behind when it fails. --replace swaps a
vectors folder in one step: a kill at any step leaves the old vectors or the new ones, whole; a folder that is
not exported vectors, or holds anything more, is never replaced. The engine's side, `cargo test` of the Cargo
example, is tests/test_packer_cargo.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.data.blocks import Block, BlockRows
from harness.laws import LAW_GEOMETRY
from harness.packers import ExternalPacker
from harness.packers import vector_files as vectors
from harness.packers.packing import harness_identity
from tests.cli_run import laws_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = f"{sys.executable} {ROOT / 'examples' / 'packer_engine_example.py'}"


_laws_cli = laws_cli


def _one_line_exit_2(code: int, out: str, err: str, words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and words in lines[0], err


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vectors") / "v"
    vectors.export(out, LAW_GEOMETRY)
    return out


def _blocks_of(vector: dict) -> list[Block]:
    f = LAW_GEOMETRY.frames_per_window
    return [
        Block.create(
            b["block_id"],
            b["OP"],
            np.array(b["SPAN"], np.float32),
            np.array(b["OFFSETS"], np.int64),
            np.array(b["VALID"], np.int32),
            LAW_GEOMETRY,
            BlockRows(
                None if b["WEIGHTS"] is None else np.array(b["WEIGHTS"], np.float32).reshape(-1, f),
                None if b["IDX"] is None else np.array(b["IDX"], np.int32),
                None if b["speakers"] is None else np.array(b["speakers"], np.int32),
            ),
        )
        for b in vector["request"]["blocks"]
    ]


def test_the_cli_exports_vectors_that_re_verify_against_the_harness_packer(tmp_path, capsys, monkeypatch):
    out = tmp_path / "vectors"
    code, stdout, err = _laws_cli(capsys, monkeypatch, "--export-vectors", str(out))
    assert code == 0, stdout + err
    assert "wrote 12 packing test vectors, 6 session vectors (sessions.json) and index.json" in stdout
    index = json.loads((out / "index.json").read_text())
    assert index["wire_version"] == "2" and index["derived_by"] == harness_identity()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.json", "sessions.json", *(v["file"] for v in index["vectors"])]
    )
    sessions = (out / "sessions.json").read_text()
    assert index["sessions"] == {"file": "sessions.json", "sha256": hashlib.sha256(sessions.encode()).hexdigest()}
    covered = set()
    for entry in index["vectors"]:
        text = (out / entry["file"]).read_text()
        assert hashlib.sha256(text.encode()).hexdigest() == entry["sha256"]
        data = json.loads(text)
        vectors.check_vector(data, LAW_GEOMETRY)
        packed = data["packed"]
        covered.add(f"op{packed['OP']}")
        covered |= {"one block"} if len(data["request"]["blocks"]) == 1 else {"many blocks"}
        if data["request"]["pad_to"] and any(s["padding"] for s in packed["segments"]):
            covered.add("padded")
        for b in data["request"]["blocks"]:
            if not any(b["VALID"]):
                covered.add("empty block")
            if len(b["SPAN"]) in b["OFFSETS"]:
                covered.add("window at the very end of a span")
            if b["IDX"] == []:
                covered.add("0 rows")
            if b["OP"] and b["speakers"] is None:
                covered.add("speakers unknown")
    assert covered == {
        "op0",
        "op1",
        "op2",
        "one block",
        "many blocks",
        "padded",
        "empty block",
        "window at the very end of a span",
        "0 rows",
        "speakers unknown",
    }


def test_a_tampered_vector_is_caught_by_the_re_check(exported):
    data = json.loads((exported / "op1-many-blocks.json").read_text())
    data["packed"]["IDX"][-1] += 1
    with pytest.raises(AssertionError, match="'packed' is not what the harness's packer answers"):
        vectors.check_vector(data, LAW_GEOMETRY)


def test_the_example_engine_packer_passes_the_vectors(exported):
    """What an engine's own test does with the vectors, here over the wire with the example packer."""
    index = json.loads((exported / "index.json").read_text())
    with ExternalPacker(EXAMPLE, LAW_GEOMETRY, timeout_s=30) as packer:
        for entry in index["vectors"]:
            data = json.loads((exported / entry["file"]).read_text())
            got = packer.pack(_blocks_of(data), pad_to=data["request"]["pad_to"])
            want = data["packed"]
            assert got.offsets.tolist() == want["OFFSETS"] and got.span.tolist() == want["SPAN"], entry["name"]
            assert [s.block_id for s in got.segments] == [s["block_id"] for s in want["segments"]]
            u = data["unpack"]
            parts = packer.unpack(got, {u["output"]: np.array(u["data"], np.float32).reshape(u["shape"])})
            assert [p.reshape(-1).tolist() for p in parts] == [p["data"] for p in data["unpacked"]], entry["name"]


def test_export_refuses_a_non_empty_folder_and_accepts_an_empty_one(tmp_path, capsys, monkeypatch):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    _one_line_exit_2(*_laws_cli(capsys, monkeypatch, "--export-vectors", str(full)), "the folder is not empty")
    _one_line_exit_2(*_laws_cli(capsys, monkeypatch, "--export-vectors", str(full)), "or --replace to replace")
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = _laws_cli(capsys, monkeypatch, "--export-vectors", str(empty))
    assert code == 0, out + err
    assert (empty / "index.json").is_file()
    _one_line_exit_2(
        *_laws_cli(
            capsys, monkeypatch, "--export-vectors", str(tmp_path / "x"), "--packer", "harness.packers.packing:pack"
        ),
        "the vectors are the harness's own packer's answers",
    )


@pytest.mark.parametrize("fault", ["enospc:vectors:op1-one-block", "enospc:rename:vectors"])
def test_a_failed_export_leaves_nothing(tmp_path, capsys, monkeypatch, fault):
    monkeypatch.setenv("HARNESS_FAULT", fault)
    out = tmp_path / "deep" / "vectors"
    _one_line_exit_2(*_laws_cli(capsys, monkeypatch, "--export-vectors", str(out)), "No space left on device")
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary one, not even the parent it would have made


# ------------------------------------------------------------------ --replace: one step, never half written


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _stale_vectors(folder: Path) -> dict[str, bytes]:
    """An earlier export, told apart from this harness's by one vector that is not its answer (a packer change)."""
    vectors.export(folder, LAW_GEOMETRY)
    data = json.loads((folder / "op1-many-blocks.json").read_text())
    data["packed"]["IDX"][-1] += 1
    text = json.dumps(data, indent=1) + "\n"
    (folder / "op1-many-blocks.json").write_text(text)
    index = json.loads((folder / "index.json").read_text())
    for entry in index["vectors"]:
        if entry["file"] == "op1-many-blocks.json":
            entry["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (folder / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    return _files(folder)


def test_replace_swaps_an_exported_folder_for_the_new_vectors(tmp_path, capsys, monkeypatch, exported):
    folder = tmp_path / "engine" / "vectors"
    old = _stale_vectors(folder)
    code, out, err = _laws_cli(capsys, monkeypatch, "--export-vectors", str(folder), "--replace")
    assert code == 0, out + err
    assert out.splitlines()[-1].startswith(f"replaced, in one step, the vectors {folder} held: 14 files"), out
    assert _files(folder) == _files(exported) != old  # the new export, byte for byte; the old one gone
    assert sorted(p.name for p in folder.parent.iterdir()) == ["vectors"]  # nothing beside it


def test_replace_through_a_link_replaces_the_folder_it_points_at(tmp_path, capsys, monkeypatch, exported):
    real = tmp_path / "real"
    _stale_vectors(real)
    link = tmp_path / "link"
    link.symlink_to(real)
    code, out, err = _laws_cli(capsys, monkeypatch, "--export-vectors", str(link), "--replace")
    assert code == 0, out + err
    assert link.is_symlink() and _files(real) == _files(exported)


@pytest.mark.parametrize(
    "extra,words",
    [
        ("README.md", "1 of its 15 entries are not vectors of its index.json (README.md) and would be lost"),
        (None, "it has no index.json, so it is not a folder of exported vectors"),
    ],
)
def test_replace_refuses_a_folder_that_holds_more_than_exported_vectors(tmp_path, capsys, monkeypatch, extra, words):
    """A mistyped path loses nothing: a folder of other files, or exported vectors beside a file of the user's."""
    folder = tmp_path / "vectors"
    if extra is None:
        folder.mkdir()
        (folder / "main.rs").write_text("fn main() {}\n")
    else:
        _stale_vectors(folder)
        (folder / extra).write_text("mine\n")
    before = _files(folder)
    _one_line_exit_2(*_laws_cli(capsys, monkeypatch, "--export-vectors", str(folder), "--replace"), words)
    assert _files(folder) == before and sorted(p.name for p in tmp_path.iterdir()) == ["vectors"]


@pytest.mark.parametrize("point,kept", [("swap:vectors", "old"), ("swapped:vectors", "new")])
def test_a_kill_during_replace_leaves_the_old_or_the_new_vectors_whole(tmp_path, exported, point, kept):
    """SIGKILL just before the swap and just after it (before the old content is removed): the folder holds one
    export, whole; the next --replace removes the hidden sibling the kill left."""
    folder = tmp_path / "vectors"
    old = _stale_vectors(folder)
    env = {**os.environ, "HARNESS_FAULT": f"kill:{point}", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "harness.cli", "laws", "--export-vectors", str(folder), "--replace"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr
    assert _files(folder) == (old if kept == "old" else _files(exported))
    litter = [p.name for p in tmp_path.iterdir() if p.name != "vectors"]
    assert len(litter) == 1 and litter[0].startswith(".vectors.tmp-"), litter
    env.pop("HARNESS_FAULT")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _files(folder) == _files(exported) and [p.name for p in tmp_path.iterdir()] == ["vectors"]


def test_replace_where_the_file_system_cannot_swap_changes_nothing(tmp_path, capsys, monkeypatch):
    from harness.base import folder_swap

    folder = tmp_path / "vectors"
    old = _stale_vectors(folder)
    monkeypatch.setattr(folder_swap, "swap_paths", lambda a, b: False)  # no renameat2 (another OS, an old kernel)
    _one_line_exit_2(
        *_laws_cli(capsys, monkeypatch, "--export-vectors", str(folder), "--replace"),
        "cannot replace the test vectors in one step: this file system has no renameat2 RENAME_EXCHANGE",
    )
    assert _files(folder) == old and [p.name for p in tmp_path.iterdir()] == ["vectors"]


def test_replace_without_export_and_outputs_with_export_are_refused(tmp_path, capsys, monkeypatch):
    _one_line_exit_2(*_laws_cli(capsys, monkeypatch, "--replace"), "--replace: replaces an existing vectors folder")
    _one_line_exit_2(
        *_laws_cli(capsys, monkeypatch, "--export-vectors", str(tmp_path / "v"), "--json", str(tmp_path / "l.json")),
        "--export-vectors judges no packer, so there is no verdict for --json or --junit",
    )
    assert list(tmp_path.iterdir()) == []
