"""`harness laws` end to end: the harness's packer, the example external packer (good and defective),
Python callables, and packers that cannot be run (exit 2, one line)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.cli_run import laws_cli

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EXAMPLE = f"{PY} {ROOT / 'examples' / 'packer_engine_example.py'}"
DEFECTIVE = f"{PY} {ROOT / 'examples' / 'packer_engine_defective.py'}"


run = laws_cli


def test_help(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "--help")
    assert code == 0
    for words in ("--packer-cmd", "--packer", "--examples", "--seed", "--timeout", "Exit 0"):
        assert words in out


def test_the_harness_packer_holds_every_law(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "--examples", "30")
    assert code == 0, out
    assert "packer 'harness'" in out and "all 8 laws hold" in out


def test_the_example_external_packer_holds_every_law(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "--packer-cmd", EXAMPLE, "--examples", "25")
    assert code == 0, out + err
    assert "all 8 laws hold" in out
    assert "index tensors emitted by the packer" in out
    assert "concatenation form only" in out  # associativity of a blocks-only packer: said, not skipped


def test_the_defective_external_packer_is_caught_with_a_minimal_example(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "--packer-cmd", DEFECTIVE, "--examples", "40")
    assert code == 1, out + err
    assert err == ""
    summary = out.split("\n\n")[0]
    for law in ("well-formed", "round-trip", "own-samples", "rebased-inside", "per-window-function"):
        assert any(line.split()[0] == law and "BROKEN" in line for line in summary.splitlines()[1:]), summary
    section = out[out.index("law round-trip BROKEN") :]
    section = section[: section.index("\n\n")]
    assert "minimal block set: 2 block(s), OP" in section
    assert "request the packer produced:" in section and "layout: b0 SPAN[0:" in section
    assert "what differed: block 'b1' split back from the request by its layout: OFFSETS" in section
    assert re.match(r"\d of 8 laws broken or not judged: well-formed, round-trip, own-samples", out.splitlines()[-1])


def test_a_python_callable_packer(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "--packer", "harness.packers.packing:pack", "--examples", "20")
    assert code == 0 and "all 8 laws hold" in out
    code, out, _ = run(capsys, monkeypatch, "--packer", "harness.laws.law_controls:leaky_packer", "--examples", "20")
    assert code == 1 and "law own-samples BROKEN" in out


@pytest.mark.parametrize(
    "args,words",
    [
        (["--packer-cmd", "/nonexistent/engine-packer"], "packer '/nonexistent/engine-packer': cannot start"),
        (
            ["--packer-cmd", f"{PY} -c 'import sys; sys.stdin.buffer.read(4); sys.exit(3)'"],
            "exited with status 3 before answering the hello handshake",
        ),  # wire protocol 2 starts with a handshake
        (
            ["--packer-cmd", f"{PY} {ROOT / 'tests' / 'protocol_packer.py'} --mode hang-after", "--timeout", "1"],
            "did not answer a pack request of 1 OP 0 block(s) ['smoke'] within 1 s; killed",
        ),
        (["--packer", "no_such_module_xyz:pack"], "--packer 'no_such_module_xyz:pack': cannot import"),
        (["--packer", "harness.packers.packing:pack", "--packer-cmd", EXAMPLE], "give one packer, not both"),
    ],
)
def test_a_packer_that_cannot_be_run_is_one_line_with_status_2(capsys, monkeypatch, args, words):
    code, out, err = run(capsys, monkeypatch, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and words in lines[0], err


# ------------------------------------------------------------------ broken packers through the CLI

MISBEHAVING = f"{PY} {ROOT / 'tests' / 'misbehaving_packer.py'} --mode"


@pytest.mark.parametrize("name,blocks", [("truncate_at_16_packer", 17), ("truncate_at_40_packer", 41)])
def test_a_packer_that_truncates_requests_is_broken_at_default_settings(capsys, monkeypatch, name, blocks):
    code, out, err = run(capsys, monkeypatch, "--packer", f"harness.laws.law_controls:{name}")
    assert code == 1, out + err
    summary = out.split("\n\n")[0].splitlines()[2:]
    assert len(summary) == 8 and all("BROKEN" in line for line in summary), out
    assert "not judged" not in out.split("\n\n")[0] and "laws hold" not in out
    assert f"minimal counterexample of {blocks} block(s)" in out
    assert out.rstrip().splitlines()[-1].startswith("8 of 8 laws broken or not judged")
    # one bug, one finding per request it broke: shown once each, never once per law
    sections = out.split("\n\n")[1:-1]
    assert len(sections) == 2 and all(s.startswith("laws ") and "BROKEN by one finding" in s for s in sections), out
    assert sum(s.count("what differed:") for s in sections) == 2


@pytest.mark.parametrize("name", ["padded_index_packer", "padding_length_packer"])
def test_index_tensors_wrong_only_when_padded_are_caught_at_default_settings(capsys, monkeypatch, name):
    code, out, err = run(capsys, monkeypatch, "--packer", f"harness.laws.law_controls:{name}")
    assert code == 1, out + err
    assert any(line.split()[:2] == ["ragged-index", "BROKEN"] for line in out.splitlines()), out
    assert "law ragged-index BROKEN" in out and "padding item(s) of 0" in out


@pytest.mark.parametrize("examples", [[], ["--examples", "1"]])
def test_the_laws_pack_64_blocks_whatever_examples_is(capsys, monkeypatch, examples):
    from tests import recording_packer

    recording_packer.SEEN.clear()
    code, out, err = run(capsys, monkeypatch, "--packer", "tests.recording_packer:RecordingPacker", *examples)
    assert code == 0 and "all 8 laws hold" in out, out + err
    assert max(n for n, _ in recording_packer.SEEN) >= 64
    assert max(p or 0 for _, p in recording_packer.SEEN) >= 64


@pytest.mark.parametrize(
    "mode,request_", [("die-every-3rd", "an unpack request of "), ("die-3rd-pack", "a pack request of ")]
)
def test_a_packer_that_crashes_during_the_laws_is_exit_2_naming_the_request(capsys, monkeypatch, mode, request_):
    """A crash is not a law's "minimal counterexample of 1 block" (exit 1), but the packer's failure."""
    code, out, err = run(capsys, monkeypatch, "--packer-cmd", f"{MISBEHAVING} {mode}")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), err
    assert f"exited with status 3 before answering {request_}" in lines[0], lines[0]
    assert "segmentation fault" in lines[0]
    assert "minimal counterexample" not in out


def test_harness_laws_leaves_no_hypothesis_folder_in_the_working_folder(tmp_path):
    """hypothesis's cache goes to the user's cache folder (or HYPOTHESIS_STORAGE_DIRECTORY), not ./.hypothesis."""
    import os
    import subprocess

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "laws", "--examples", "2"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert list(work.iterdir()) == []  # nothing made where the user stands
    assert (tmp_path / "cache" / "diar-lane-harness" / "hypothesis").is_dir()
