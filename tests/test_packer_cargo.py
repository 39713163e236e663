"""The Cargo example (examples/packer-vectors): `cargo test` reads the exported vectors folder that
PACKER_TEST_VECTORS names and runs one test per vector and per session.

Runs where cargo is installed (and runs: a rustup shim without a toolchain does not), skipping, saying why,
where not. The documented lines run as the page writes them, twice (a re-export with --replace, then cargo
again); negative controls show `cargo test` failing by name: a packer that does not rebase IDX, a session
answered against the rules, a vector edited after the export (the index's sha256), no folder named at all.
The builds go to a temporary CARGO_TARGET_DIR; nothing is written into the checkout (Cargo.lock is committed,
and --locked keeps it as it is).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.doc_blocks import ROOT, harness_env, page_blocks, run_block

CRATE = ROOT / "examples" / "packer-vectors"
PAGE = ROOT / "docs" / "packer-protocol.md"
CARGO_TIMEOUT = 600  # a cold debug build of the std-only crate takes seconds; a loaded CI machine, more


def _cargo() -> str:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed: the Cargo example examples/packer-vectors is not built here")
    done = subprocess.run([cargo, "--version"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"cargo is on PATH but does not run ({last}): the Cargo example is not built here")
    return cargo


@pytest.fixture(scope="module")
def cargo() -> str:
    return _cargo()


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cargo-target")


def cargo_test(cargo: str, crate: Path, target: Path, vectors: Path | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CARGO_TARGET_DIR": str(target), "RUST_BACKTRACE": "0", "CARGO_TERM_COLOR": "never"}
    env.pop("PACKER_TEST_VECTORS", None)
    if vectors is not None:
        env["PACKER_TEST_VECTORS"] = str(vectors)
    return subprocess.run(
        [cargo, "test", "--offline", "--locked", "--manifest-path", str(crate / "Cargo.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=CARGO_TIMEOUT,
    )


def results(output: str) -> dict[str, str]:
    """Test name -> ok / FAILED of the generated tests (tests/vectors.rs), from cargo's lines
    ``test <name> ... <result>``; the library's own unit tests (``json::tests::...``) must pass, always."""
    found = dict(re.findall(r"^test (\S+) \.\.\. (ok|FAILED)$", output, re.MULTILINE))
    units = {name: result for name, result in found.items() if "::" in name}
    assert set(units.values()) <= {"ok"}, f"the crate's unit tests failed: {units}\n{output}"
    return {name: result for name, result in found.items() if "::" not in name}


def expected_tests(vectors: Path) -> set[str]:
    index = json.loads((vectors / "index.json").read_text())
    sessions = json.loads((vectors / index["sessions"]["file"]).read_text())
    return (
        {"index"}
        | {f"vector_{v['name'].replace('-', '_')}" for v in index["vectors"]}
        | {f"session_{s['name'].replace('-', '_')}" for s in sessions["sessions"]}
    )


def copy_crate(to: Path) -> Path:
    shutil.copytree(CRATE, to, ignore=shutil.ignore_patterns("target"))
    return to


def test_the_documented_lines_export_the_vectors_and_cargo_test_runs_one_test_per_vector(cargo, target, tmp_path):
    """docs/packer-protocol.md's two lines, as written, in a fresh folder holding the checkout's examples/: run
    twice (the second export replaces the first with --replace); every vector and session passes by name."""
    (block,) = [b for b in page_blocks(PAGE) if b.lang == "bash" and any("cargo test" in x.text for x in b.lines)]
    assert block.not_run is not None and "tests/test_packer_cargo.py" in block.not_run  # the page says who runs it
    work = tmp_path / "work"
    work.mkdir()
    copy_crate(work / "examples" / "packer-vectors")
    transcript = run_block(block, work, harness_env(CARGO_TARGET_DIR=str(target), RUST_BACKTRACE="0"))
    assert len(transcript) == 4, transcript  # both lines, twice
    assert "replaced, in one step, the vectors packing-vectors held" in transcript[2], transcript[2]
    found = results(transcript[-1])
    want = expected_tests(work / "packing-vectors")
    assert len(want) == 19 and set(found) == want and set(found.values()) == {"ok"}, transcript[-1]
    assert "warning:" not in transcript[1], transcript[1]  # the crate builds without a warning
    assert not (work / "examples" / "packer-vectors" / "target").exists()  # the build went to CARGO_TARGET_DIR


def test_cargo_test_fails_by_name_on_a_wrong_packing_a_wrong_session_and_an_edited_vector(cargo, target, tmp_path):
    """Negative controls, in one build: the crate's packer with IDX not rebased, against a folder whose sessions.json
    expects a pack before hello to be served (re-sealed in the index) and whose op0-one-block.json was edited
    after the export (not re-sealed). Each fails by name, saying what differed; every other test still passes."""
    from harness.laws import LAW_GEOMETRY
    from harness.packers.vector_files import export

    vectors = tmp_path / "vectors"
    export(vectors, LAW_GEOMETRY)
    index = json.loads((vectors / "index.json").read_text())
    sessions = json.loads((vectors / "sessions.json").read_text())
    (case,) = [c for c in sessions["sessions"] if c["name"] == "request-before-hello"]
    assert case["steps"][0]["answer"] == "error"
    case["steps"][0]["answer"] = "packed"  # what a loop without the rule does
    text = json.dumps(sessions, indent=1) + "\n"
    (vectors / "sessions.json").write_text(text)
    index["sessions"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()  # re-sealed: only the answer differs
    (vectors / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    edited = vectors / "op0-one-block.json"
    edited.write_text(edited.read_text() + " ")  # same content, other bytes: only the index sees it

    crate = copy_crate(tmp_path / "crate")
    source = crate / "src" / "packing.rs"
    rebased = "extend(b.idx.iter().flatten().map(|i| i + shift))"
    assert source.read_text().count(rebased) == 1
    source.write_text(source.read_text().replace(rebased, "extend(b.idx.iter().flatten().map(|i| i + 0 * shift))"))

    done = cargo_test(cargo, crate, target, vectors)
    out = done.stdout + done.stderr
    found = results(out)
    assert done.returncode != 0 and set(found) == expected_tests(vectors), out
    failed = {name for name, result in found.items() if result == "FAILED"}
    # IDX moves only after the first block: the voiceprint vectors of several blocks with rows, and the sessions
    # that serve a pack of one (a served request is packed, not only answered with a verb); the rest still pass
    wrong_packing = {"vector_op1_many_blocks", "vector_op1_padded_speakers_unknown", "vector_op2_many_blocks"}
    served = {"session_second_hello", "session_not_a_request"}
    assert failed == wrong_packing | served | {"index", "session_request_before_hello"}, out
    assert "op1-many-blocks.json: packed IDX: " in out and "values differ, first at [" in out, out
    assert 'session request-before-hello step 0 ("pack"): answered error, expected packed' in out, out
    assert "op0-one-block.json: sha256 " in out and "is not the" in out, out


def test_cargo_test_without_a_folder_fails_saying_how_to_name_one(cargo, target):
    """A `cargo test` that checked nothing never passes: without PACKER_TEST_VECTORS its one test fails, saying so."""
    done = cargo_test(cargo, CRATE, target, None)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and results(out) == {"vectors_folder": "FAILED"}, out
    assert "PACKER_TEST_VECTORS is not set: export the vectors (harness laws --export-vectors DIR)" in out, out
    assert not (CRATE / "target").exists()
