"""A packer session's rules (docs/packer-protocol.md, "Sessions"), on real processes, both ways.

The packer's side: hello first and once; a request before it, a second hello, another wire version or a verb
that is not a request is answered with ``error`` and the packer reads on; metadata keys it does not know are
ignored (sessions.json says it message by message; the example packer and the harness's reference packer keep
it, a packer without the rules is caught). The harness's side: one hello per process, first; every request of
a process carries its hello's geometry (the laws get a process of their own at theirs), ``sample_rate`` in Hz;
answers may carry keys the protocol does not list and a hello may hold an empty record batch; a packer that
crashes during the laws is not restarted.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.laws import LAW_GEOMETRY
from harness.packers import ExternalPacker, PackerFailed, process, session_vectors, wire
from harness.packers import vector_files as vectors
from harness.packers.packing import pack, unpack
from harness.pipeline import laws_gate
from tests.cli_run import laws_cli

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EXAMPLE = f"{PY} {ROOT / 'examples' / 'packer_engine_example.py'}"
SERVED = f"{PY} -m harness.packers.serve"
PROTOCOL = f"{PY} {ROOT / 'tests' / 'protocol_packer.py'} --mode"
MISBEHAVING = f"{PY} {ROOT / 'tests' / 'misbehaving_packer.py'} --mode"
# a model's geometry that is not the laws' in any key the wire carries
MODEL = Geometry(
    sample_rate=8_000,
    window_samples=96,
    frames_per_window=6,
    frame_step=16,
    speakers=3,
    max_simultaneous=2,
    embedding_dim=4,
    windows_per_block=8,
)


def _blocks(geometry: Geometry, k: int = 2) -> list[Block]:
    rng = np.random.default_rng(5)
    w = geometry.window_samples
    return [
        Block.create(
            f"b{i}",
            0,
            rng.standard_normal(w + 9).astype(np.float32),
            np.arange(8, dtype=np.int64) * 4,
            np.full(8, w // 2, np.int32),
            geometry,
        )
        for i in range(k)
    ]


def _talk(cmd: str, messages: list[bytes]) -> list[wire.Message | str]:
    """One packer process: each message written, then its answer read; the answers in order ("exited" once the
    process has stopped answering, for that message and every later one)."""
    proc = subprocess.Popen(
        shlex.split(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    stdin, stdout = process.pipes(proc)
    answers: list[wire.Message | str] = []
    try:
        for message in messages:
            try:
                stdin.write(message)
                stdin.flush()
                answers.append(wire.read_any(process.DeadlineReader(stdout.fileno(), time.monotonic() + 60)))
            except (EOFError, BrokenPipeError):
                answers += ["exited"] * (len(messages) - len(answers))
                break
    finally:
        stdin.close()
        proc.wait(timeout=30)
    return answers


# ------------------------------------------------------------------ the packer's side: sessions.json


@pytest.fixture(scope="module")
def sessions() -> tuple[dict, dict]:
    requests = {name: (blocks, pad_to) for name, _, blocks, pad_to in vectors.cases(LAW_GEOMETRY)}
    return session_vectors.sessions(requests, LAW_GEOMETRY).model_dump(mode="json"), requests


def _replay(cmd: str, data: dict, requests: dict) -> list[str]:
    """Every session of ``data`` through a fresh ``cmd`` process; one line per answer not as expected."""
    wrong = []
    for case in data["sessions"]:
        steps = case["steps"]
        answers = _talk(cmd, [session_vectors.message(s, requests, LAW_GEOMETRY) for s in steps])
        for i, (step, got) in enumerate(zip(steps, answers, strict=True)):
            verb = got if isinstance(got, str) else got.verb
            if verb != step["answer"] or (not isinstance(got, str) and got.meta.get("version") != "2"):
                wrong.append(f"{case['name']} step {i}: {verb}")
            elif verb == wire.ERROR and not isinstance(got, str):
                assert wire.error_text(got) != "(no message)", f"{case['name']} step {i}: an error says why"
    return wrong


def test_the_session_vectors_are_what_the_rules_derive_and_a_changed_answer_is_caught(sessions):
    data, requests = sessions
    session_vectors.check_sessions(json.loads(json.dumps(data)), requests, LAW_GEOMETRY)
    assert {c["name"] for c in data["sessions"]} >= {
        "request-before-hello",
        "second-hello",
        "other-version",
        "not-a-request",
        "unknown-keys",
    }
    changed = json.loads(json.dumps(data))
    changed["sessions"][2]["steps"][2]["answer"] = "hello"  # a second hello served
    with pytest.raises(AssertionError, match=r"session 'second-hello' step 2: .* is not"):
        session_vectors.check_sessions(changed, requests, LAW_GEOMETRY)


@pytest.mark.parametrize("cmd", [EXAMPLE, SERVED], ids=["example-packer", "reference-packer"])
def test_the_example_and_the_reference_packer_answer_every_session_as_the_vectors_say(cmd, sessions):
    assert _replay(cmd, *sessions) == []


def test_a_packer_without_the_session_rules_is_caught_by_the_same_replay(sessions):
    """Negative control: tests/protocol_packer.py serves whatever comes, in any order, of any version."""
    wrong = _replay(f"{PROTOCOL} plain", *sessions)
    for expected in (
        "request-before-hello step 0: packed",
        "second-hello step 2: hello",
        "other-version step 0: hello",
    ):
        assert expected in wrong, wrong


# ------------------------------------------------------------------ the harness's side: one geometry a session


@pytest.mark.parametrize("cmd", [SERVED, f"{PROTOCOL} check-geometry"], ids=["reference-packer", "strict-packer"])
def test_a_packer_may_refuse_a_request_whose_geometry_is_not_its_hellos(cmd):
    """What the next test relies on: these packers do refuse another geometry (and read on)."""
    blocks = _blocks(LAW_GEOMETRY)
    hello, same, other = (
        wire.encode_hello(LAW_GEOMETRY, "test"),
        wire.encode_pack(blocks, None, LAW_GEOMETRY),
        wire.encode_pack(blocks, None, MODEL),
    )
    answers = _talk(cmd, [hello, other, same])
    verbs = [a if isinstance(a, str) else a.verb for a in answers]
    assert verbs == ["hello", "error", "packed"], verbs
    assert "differs from the hello's" in wire.error_text(answers[1])  # type: ignore[arg-type]


def test_a_session_keeps_its_geometry_and_the_laws_are_judged_in_a_process_of_their_own(tmp_path, monkeypatch):
    log = tmp_path / "meta.jsonl"
    monkeypatch.setenv("RECORD_META", str(log))
    with ExternalPacker(f"{PROTOCOL} check-geometry", MODEL, timeout_s=60) as packer:
        verdict = laws_gate.judge_laws(packer, examples=2, max_blocks=2)
        blocks = _blocks(MODEL)
        packed = packer.pack(blocks, pad_to=3)  # the lanes' process, at the model's geometry, after the laws
        with pytest.raises(AttributeError):
            packer.geometry = LAW_GEOMETRY  # type: ignore[misc]
    assert verdict.verdict == "hold", verdict  # a packer that refuses a changed geometry holds the laws
    assert verdict.packer_identity == packer.identity
    assert packed.segments == pack(blocks, pad_to=3).segments
    by_process: dict[int, list[dict]] = defaultdict(list)
    for line in log.read_text().splitlines():
        meta = json.loads(line)
        by_process[meta["pid"]].append(meta)
    rates = set()
    for pid, seen in by_process.items():
        hello = seen[0]
        assert hello["verb"] == "hello" and [m["verb"] for m in seen].count("hello") == 1, (pid, seen)
        for meta in seen:
            assert meta["version"] == "2"
            assert {k: meta[k] for k in wire.GEOMETRY_KEYS} == {k: hello[k] for k in wire.GEOMETRY_KEYS}, (
                f"process {pid}: a {meta['verb']} request at another geometry than its hello's"
            )
        rates.add(hello["sample_rate"])
    assert len(by_process) == 2 and rates == {"16000", "8000"}  # the laws' and the model's, in Hz


# ------------------------------------------------------------------ answers the harness reads


@pytest.mark.parametrize("mode", ["extra-meta", "batch-hello"])
def test_answers_with_unlisted_metadata_keys_and_a_hello_with_an_empty_batch_are_read(mode):
    blocks = _blocks(LAW_GEOMETRY, 3)
    with ExternalPacker(f"{PROTOCOL} {mode}", LAW_GEOMETRY, timeout_s=60) as packer:
        assert packer.declared == ("protocol-test", "0.1")
        packed = packer.pack(blocks, pad_to=4)
        out = np.arange(packed.windows * 2, dtype=np.float32).reshape(packed.windows, 2)
        parts = packer.unpack(packed, {"SEGMENTATION": out})
    mine = pack(blocks, pad_to=4)
    assert packed.segments == mine.segments
    for a, b in zip(parts, unpack(mine, {"SEGMENTATION": out}), strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ a crash ends the laws: no restart


def test_a_packer_that_crashes_during_the_laws_is_not_restarted(tmp_path, capsys, monkeypatch):
    starts = tmp_path / "starts"
    cmd = f"START_LOG={starts} {MISBEHAVING} die-3rd-pack"
    code, out, err = laws_cli(capsys, monkeypatch, "--packer-cmd", cmd, "--examples", "2")
    assert code == 2 and "exited with status 3 before answering a pack request" in err, out + err
    assert len(starts.read_text().split()) == 1, "harness laws started the packer again after its crash"
    starts.unlink()
    with ExternalPacker(cmd, MODEL, timeout_s=60) as packer:  # a run's laws gate: its own process, not restarted
        with pytest.raises(PackerFailed, match="exited with status 3 before answering a pack request"):
            laws_gate.judge_laws(packer, examples=2, max_blocks=2)
    assert len(starts.read_text().split()) == 2  # the lanes' process and the laws' one, each started once
