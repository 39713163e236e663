"""`harness laws --export-vectors DIR`: language-neutral packing test vectors, re-verified here.

The vectors are the harness packer's answers; this test re-derives every one from its request (and checks
the example external packer, standing in for the engine, against them over the wire), and shows the export
refuses a non-empty folder and leaves nothing behind when it fails.
"""

from __future__ import annotations

import hashlib
import json
import shutil
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


@pytest.fixture(scope="module")
def rust_check(tmp_path_factory) -> Path:
    """examples/packer_vectors_check.rs built with rustc alone (std only, no warning)."""
    if shutil.which("rustc") is None:
        pytest.skip("rustc is not installed")
    binary = tmp_path_factory.mktemp("rust") / "packer_vectors_check"
    built = subprocess.run(
        ["rustc", "--edition", "2021", str(ROOT / "examples" / "packer_vectors_check.rs"), "-o", str(binary)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0 and "warning" not in built.stderr, built.stderr
    return binary


def test_the_std_only_rust_check_passes_the_vectors_and_catches_a_wrong_answer(exported, rust_check, tmp_path):
    """examples/packer_vectors_check.rs: what an engine's `cargo test` does with the vectors, std only."""
    binary = rust_check
    done = subprocess.run([str(binary), str(exported)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "12 of 12 vectors pass" in done.stdout, done.stdout + done.stderr
    assert "6 of 6 sessions pass" in done.stdout, done.stdout
    wrong = tmp_path / "wrong"
    shutil.copytree(exported, wrong)
    data = json.loads((wrong / "op1-many-blocks.json").read_text())
    data["packed"]["IDX"][-1] += 1  # the answer a rebase bug would give
    (wrong / "op1-many-blocks.json").write_text(json.dumps(data))
    done = subprocess.run([str(binary), str(wrong)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "FAIL op1-many-blocks.json: packed IDX differs" in done.stdout, done.stdout


def test_the_std_only_rust_check_catches_a_session_answered_out_of_the_rules(exported, rust_check, tmp_path):
    """The Rust check's message loop against sessions.json: a vector that expects a pack before hello to be
    served (what a loop without the rule does) fails it, naming the session and step."""
    binary = rust_check
    wrong = tmp_path / "wrong"
    shutil.copytree(exported, wrong)
    data = json.loads((wrong / "sessions.json").read_text())
    (case,) = [c for c in data["sessions"] if c["name"] == "request-before-hello"]
    assert case["steps"][0]["answer"] == "error"
    case["steps"][0]["answer"] = "packed"
    (wrong / "sessions.json").write_text(json.dumps(data))
    done = subprocess.run([str(binary), str(wrong)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "12 of 12 vectors pass" in done.stdout, done.stdout
    assert 'FAIL session request-before-hello: step 0 ("pack"): answered error, expected packed' in done.stdout, (
        done.stdout
    )
