"""Wire protocol 2: the geometry on every request, the hello handshake and a packer's identity, and the
process hygiene of an external packer (its whole process group ends with it).

Packers are real processes: examples/packer_engine_example.py and tests/protocol_packer.py. Timeouts are
generous (a packer's Python start-up on a loaded machine is not a request's budget).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness import __version__
from harness.base.errors import HarnessError
from harness.data.blocks import NO_ROWS, Block, BlockRows
from harness.laws import LAW_GEOMETRY
from harness.packers import CallablePacker, ExternalPacker, HarnessPacker, PackerUnavailable, packer_from_options, wire
from harness.packers.packing import pack
from tests.cli_run import laws_cli

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EXAMPLE = ROOT / "examples" / "packer_engine_example.py"
PROTOCOL = f"{PY} {ROOT / 'tests' / 'protocol_packer.py'} --mode"


def _blocks(k: int, op: int = 0) -> list[Block]:
    rng = np.random.default_rng(3)
    out = []
    for i in range(k):
        rows = NO_ROWS
        if op:
            rows = BlockRows(
                rng.random((2, LAW_GEOMETRY.frames_per_window)).astype(np.float32),
                np.array([0, 5], np.int32),
                np.array([1, 0], np.int32),
            )
        out.append(
            Block.create(
                f"b{i}",
                op,
                rng.standard_normal(70).astype(np.float32),
                np.arange(8, dtype=np.int64) * 8,
                np.full(8, 6, np.int32),
                LAW_GEOMETRY,
                rows,
            )
        )
    return out


_laws_cli = laws_cli


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _gone_within(pid: int, seconds: float = 30.0) -> bool:
    """A generous bound, not a timing check: the group is ended before close() returns."""
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pid)


# ------------------------------------------------------------------ the geometry is on the wire


def test_every_request_carries_the_geometry(tmp_path, monkeypatch):
    log = tmp_path / "meta.jsonl"
    monkeypatch.setenv("RECORD_META", str(log))
    with ExternalPacker(f"{PROTOCOL} record-meta", LAW_GEOMETRY, timeout_s=30) as packer:
        packed = packer.pack(_blocks(2), pad_to=3)
        packer.unpack(packed, {"SEGMENTATION": np.zeros((packed.windows, 2), np.float32)})
        packer.pack(_blocks(1, op=1))
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [m["verb"] for m in seen] == ["hello", "pack", "unpack", "pack"]
    want = {
        "window_samples": "64",
        "frames_per_window": "5",
        "windows_per_block": "8",
        "weights_frames": "5",
        "sample_rate": "16000",
        "embedding_dim": "3",
    }
    for meta in seen:
        assert {k: meta.get(k) for k in want} == want, meta
        assert meta["version"] == wire.VERSION == "2"
    assert seen[1]["pad_to"] == "3"
    # OP 0's WEIGHTS is null in every row, yet its type says F (5), not a placeholder width
    assert seen[1]["WEIGHTS type"] == "list<item: fixed_size_list<item: float>[5]>"


def test_the_example_packer_pads_by_the_geometry_it_is_told():
    """Padding blocks of the example come from the metadata's windows_per_block and weights_frames."""
    with ExternalPacker(f"{PY} {EXAMPLE}", LAW_GEOMETRY, timeout_s=30) as packer:
        for op in (0, 1):
            blocks = _blocks(1, op=op)
            theirs, mine = packer.pack(blocks, pad_to=3), pack(blocks, pad_to=3)
            assert theirs.segments == mine.segments and theirs.windows == mine.windows == 24
            if op:
                assert theirs.weights.shape == (2, LAW_GEOMETRY.frames_per_window)


# ------------------------------------------------------------------ identity


def _expected_external_identity(script: Path, name: str = "example-engine-packer") -> str:
    files = [Path(os.path.realpath(shutil.which(PY))), script.resolve()]
    total = hashlib.sha256("".join(hashlib.sha256(f.read_bytes()).hexdigest() + "\n" for f in files).encode())
    return f"external:{name}/1.0.0@sha256:{total.hexdigest()[:16]}"


def test_an_external_packers_identity_is_its_declared_name_and_a_digest_of_what_runs(tmp_path):
    script = tmp_path / "engine_packer.py"
    shutil.copy(EXAMPLE, script)
    with ExternalPacker(f"{PY} {script}", LAW_GEOMETRY, timeout_s=30) as packer:
        first = packer.describe()
    assert first["identity"] == _expected_external_identity(script)
    assert (first["packer_name"], first["packer_version"]) == ("example-engine-packer", "1.0.0")
    assert first["digest"].startswith(first["identity"].rsplit(":", 1)[1]) and len(first["digest"]) == 64
    assert [f["path"] for f in first["digest_files"]] == [os.path.realpath(shutil.which(PY)), str(script.resolve())]
    # one byte of the script changed: another packer
    data = bytearray(script.read_bytes())
    data[data.index(b"numpy and pyarrow only")] ^= 0x20
    script.write_bytes(bytes(data))
    with ExternalPacker(f"{PY} {script}", LAW_GEOMETRY, timeout_s=30) as packer:
        second = packer.describe()["identity"]
    assert second != first["identity"] and second == _expected_external_identity(script)


def test_a_stated_digest_stands_for_the_program_and_the_rest_of_the_command_still_counts():
    digest = "AB" * 32
    with packer_from_options(f"{PY} {EXAMPLE}", None, LAW_GEOMETRY, timeout_s=30, digest=digest) as packer:
        facts = packer.describe()
    script = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    total = hashlib.sha256(f"{'ab' * 32}\n{script}\n".encode()).hexdigest()
    assert facts["identity"] == f"external:example-engine-packer/1.0.0@sha256:{total[:16]}"
    assert facts["digest"] == total and facts["digest_source"].startswith("--packer-digest")
    assert facts["digest_parts"] == [
        {"kind": "program", "stated": "ab" * 32},
        {"kind": "file", "path": str(EXAMPLE.resolve()), "sha256": script},
    ]
    # stating the program's own sha256 is the identity the harness finds by hashing it
    program = hashlib.sha256(Path(os.path.realpath(shutil.which(PY))).read_bytes()).hexdigest()
    with packer_from_options(f"{PY} {EXAMPLE}", None, LAW_GEOMETRY, timeout_s=30, digest=program) as packer:
        assert packer.describe()["identity"] == _expected_external_identity(EXAMPLE)
    with pytest.raises(PackerUnavailable, match="--packer-digest 'abc': expected a sha256, 64 hex digits"):
        ExternalPacker(f"{PY} {EXAMPLE}", LAW_GEOMETRY, digest="abc")
    with pytest.raises(HarnessError, match="give --packer-cmd too"):
        packer_from_options(None, None, LAW_GEOMETRY, digest=digest)


def test_the_harness_and_callable_packers_identities_are_bound_to_their_source():
    source = hashlib.sha256((ROOT / "harness" / "packers" / "packing.py").read_bytes()).hexdigest()
    assert HarnessPacker().describe()["identity"] == f"harness/{__version__}+{source[:12]}"
    facts = CallablePacker("harness.packers.packing:pack", LAW_GEOMETRY).describe()
    assert facts["identity"] == f"callable:harness.packers.packing:pack@sha256:{source[:16]}"
    assert facts["digest"] == source


# ------------------------------------------------------------------ the handshake, refused


@pytest.mark.parametrize(
    "mode,words",
    [
        ("no-hello", "answered the hello handshake, but refused it: unknown verb 'hello'"),
        (
            "old-version",
            "answered the hello handshake with a message off the protocol: message has wire version '1', expected '2'",
        ),
        ("nameless", "metadata packer_version is None: required"),
    ],
)
def test_a_packer_that_does_not_answer_hello_is_refused_saying_what_the_protocol_requires(mode, words):
    with pytest.raises(PackerUnavailable) as err:
        ExternalPacker(f"{PROTOCOL} {mode}", LAW_GEOMETRY, timeout_s=30)
    text = str(err.value)
    assert words in text and "\n" not in text
    assert (
        "must answer the harness's 'hello' message with a 'hello' message whose schema metadata has version=2, "
        "packer_name and packer_version" in text
    )


def test_harness_laws_refuses_a_packer_without_the_handshake_in_one_line_exit_2(capsys, monkeypatch):
    code, out, err = _laws_cli(capsys, monkeypatch, "--packer-cmd", f"{PROTOCOL} no-hello", "--examples", "1")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and "'hello'" in lines[0], err
    code, out, err = _laws_cli(capsys, monkeypatch, "--packer-cmd", f"{PY} {EXAMPLE}", "--packer-digest", "xyz")
    assert code == 2 and err.strip().startswith("harness: error: ") and "--packer-digest 'xyz'" in err


# ------------------------------------------------------------------ process hygiene


def test_closing_an_external_packer_ends_the_children_it_forked(tmp_path, monkeypatch):
    monkeypatch.setenv("CHILD_PID_FILE", str(tmp_path / "child"))
    packer = ExternalPacker(f"{PROTOCOL} fork-child", LAW_GEOMETRY, timeout_s=30)
    packer.pack(_blocks(1))
    child = int((tmp_path / "child").read_text())
    assert _running(child)
    packer.close()
    assert _gone_within(child), f"the packer's child {child} is still running after close()"


def test_a_forking_packer_leaves_no_process_after_harness_laws(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CHILD_PID_FILE", str(tmp_path / "child"))
    code, out, err = _laws_cli(capsys, monkeypatch, "--packer-cmd", f"{PROTOCOL} fork-child", "--examples", "2")
    assert code == 0, out + err
    child = int((tmp_path / "child").read_text())
    assert _gone_within(child), f"the packer's child {child} outlived `harness laws`"


def test_serve_has_a_real_help():
    done = subprocess.run(
        [PY, "-m", "harness.packers.serve", "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m harness.packers.serve") and "hello" in done.stdout
    assert "Traceback" not in done.stderr
