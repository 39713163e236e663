"""An external packer's identity covers its whole command: the variables it sets, its program, and every
argument's text (a file's: its content), in order. Two commands that differ in one flag are two packers, in the
ledger and in ``harness shapes --may``; one command is one packer, however often it is started.

The packers are real processes (tests/protocol_packer.py: every mode names itself protocol-test/0.1, and
``--variant`` changes nothing but the command line), and the evidence is a real run of the fast lane through
one of them, scored and promoted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.data.blocks import Block
from harness.data.schemas import Score
from harness.laws import LAW_GEOMETRY
from harness.ledger.ledger_store import commit
from harness.ledger.promotion import apply_score
from harness.packers import ExternalPacker, PackerUnavailable, command, identity
from harness.pipeline.promote import promote_file
from harness.pipeline.run import RunOptions, plan_for
from harness.pipeline.run import run_shapes as run_plan
from harness.pipeline.score import score_run, write_score
from tests.cli_run import harness_cli
from tests.pipeline import record
from tests.test_promotion import CONFIG, LOOSE, RELEASE
from tests.test_promotion_truth import as_packer

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SCRIPT = ROOT / "tests" / "protocol_packer.py"
PLAIN = f"{PY} {SCRIPT} --mode plain"
GOOD, OTHER = f"{PLAIN} --variant good", f"{PLAIN} --variant idx-not-rebased"


def _sha(path: Path | str) -> str:
    return hashlib.sha256(Path(os.path.realpath(path)).read_bytes()).hexdigest()


def _text(kind: str, text: str) -> str:
    return f"{kind} {len(text.encode())} {text}\n"


def identity_of(cmd: str) -> str:
    with ExternalPacker(cmd, LAW_GEOMETRY, timeout_s=60) as packer:
        return packer.identity


def _block() -> Block:
    return Block.create(
        "b0",
        0,
        np.linspace(-1, 1, 70, dtype=np.float32),
        np.arange(8, dtype=np.int64) * 8,
        np.full(8, 6, np.int32),
        LAW_GEOMETRY,
    )


# ------------------------------------------------------------------ the rule, on real processes


def test_two_commands_that_differ_in_one_flag_are_two_packers_and_one_command_twice_is_one():
    with (
        ExternalPacker(GOOD, LAW_GEOMETRY, timeout_s=60) as good,
        ExternalPacker(GOOD, LAW_GEOMETRY, timeout_s=60) as again,
        ExternalPacker(OTHER, LAW_GEOMETRY, timeout_s=60) as other,
    ):
        assert good.declared == other.declared == ("protocol-test", "0.1")  # one binary, one name and version
        assert good.identity == again.identity, "the same command started twice must be the same packer"
        assert good.identity != other.identity, (
            f"{GOOD!r} and {OTHER!r} differ in a flag but share the identity {good.identity}: evidence for one "
            "would be used for the other"
        )
        facts = good.describe()
    lines = (
        f"{_sha(shutil.which(PY) or PY)}\n{_sha(SCRIPT)}\n"
        + _text("arg", "--mode")
        + _text("arg", "plain")
        + _text("arg", "--variant")
        + _text("arg", "good")
    )
    digest = hashlib.sha256(lines.encode()).hexdigest()
    assert facts["identity"] == f"external:protocol-test/0.1@sha256:{digest[:16]}" and facts["digest"] == digest
    assert [p["kind"] for p in facts["digest_parts"]] == ["program", "file", "arg", "arg", "arg", "arg"]
    assert [p.get("text") for p in facts["digest_parts"][2:]] == ["--mode", "plain", "--variant", "good"]


def test_a_file_argument_counts_by_its_content_not_its_path(tmp_path):
    """The same build checked out elsewhere is the same packer; one byte of it changed is another."""
    example = ROOT / "examples" / "packer_engine_example.py"
    copy = tmp_path / "elsewhere.py"
    shutil.copy(example, copy)
    assert identity_of(f"{PY} {copy} --bug leak") == identity_of(f"{PY} {example} --bug leak")
    copy.write_text(copy.read_text() + "\n# one more line\n")
    assert identity_of(f"{PY} {copy} --bug leak") != identity_of(f"{PY} {example} --bug leak")


def test_variables_the_command_line_sets_reach_the_packer_and_are_part_of_its_identity(tmp_path, monkeypatch):
    monkeypatch.delenv("RECORD_META", raising=False)
    log = tmp_path / "meta.jsonl"
    with ExternalPacker(f"RECORD_META={log} {PLAIN}", LAW_GEOMETRY, timeout_s=60) as packer:
        packer.pack([_block()])
        facts = packer.describe()
    assert [json.loads(line)["verb"] for line in log.read_text().splitlines()] == ["hello", "pack"]
    assert facts["digest_parts"][0] == {"kind": "env", "text": f"RECORD_META={log}"}
    assert facts["command"] == f"RECORD_META={log} {PLAIN}"
    plain = identity_of(PLAIN)
    assert facts["identity"] != plain
    assert identity_of(f"RECORD_META={tmp_path / 'other.jsonl'} {PLAIN}") not in (plain, facts["identity"])
    # a set of variables, by name: their order on the line does not matter, a repeated name keeps its last value
    assert identity_of(f"A=1 B=2 {PLAIN}") == identity_of(f"B=2 A=1 {PLAIN}") == identity_of(f"A=0 B=2 A=1 {PLAIN}")
    assert identity_of(f"A=1 B=2 {PLAIN}") != identity_of(f"A=1 B=3 {PLAIN}")


def test_the_program_is_looked_up_with_the_path_the_command_line_sets(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "engine-packer"
    wrapper.write_text(f'#!/bin/sh\nexec {PY} {SCRIPT} "$@"\n')
    wrapper.chmod(0o755)
    cmd = f"PATH={bin_dir}:{os.environ.get('PATH', '')} engine-packer --mode plain"
    with ExternalPacker(cmd, LAW_GEOMETRY, timeout_s=60) as packer:
        packer.pack([_block()])
        program = packer.describe()["digest_parts"][1]
    assert program == {"kind": "program", "path": os.path.realpath(wrapper), "sha256": _sha(wrapper)}
    with pytest.raises(PackerUnavailable, match="cannot start 'engine-packer'"):  # not on the harness's own PATH
        ExternalPacker("engine-packer --mode plain", LAW_GEOMETRY, timeout_s=60)


@pytest.mark.parametrize(
    "cmd,words",
    [
        ("FOO=1", "packer command 'FOO=1': sets FOO but names no program to run"),
        ("FOO=1 BAR='a b'", "sets FOO, BAR but names no program"),
    ],
)
def test_a_command_of_variables_only_is_one_line_exit_2(cmd, words, capsys, monkeypatch):
    with pytest.raises(PackerUnavailable, match=words):
        ExternalPacker(cmd, LAW_GEOMETRY)
    code, out, err = harness_cli(capsys, monkeypatch, "laws", "--packer-cmd", cmd, "--examples", "1")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("harness: error: ") and words in lines[0], err


# ------------------------------------------------------------------ the laws of the command digest

STATED = "ab" * 32  # the program's digest, stated: no file is read, the laws are about the rest of the command
WORDS = st.text(max_size=10)
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
PROGRAMS = WORDS.filter(lambda w: bool(w) and not command.ASSIGNMENT.match(w))


@contextlib.contextmanager
def _in_an_empty_folder() -> Iterator[None]:
    """No word names an existing file there: every argument counts by its text."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(here)


def _digest(cmd: str) -> str:
    with _in_an_empty_folder():
        return identity.command_digest(command.parse(cmd), "test", STATED).digest


@settings(max_examples=60, derandomize=True)
@given(env=st.lists(st.tuples(NAMES, WORDS), max_size=3), program=PROGRAMS, args=st.lists(WORDS, max_size=4))
def test_a_command_line_parses_back_to_its_variables_and_words(env, program, args):
    line = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env), shlex.join([program, *args])])
    parsed = command.parse(line)
    assert parsed.argv == (program, *args)
    assert parsed.env == tuple(sorted(dict(env).items()))  # by name; a name set twice keeps its last value


@settings(max_examples=60, derandomize=True)
@given(program=PROGRAMS, args=st.lists(WORDS, min_size=1, max_size=4), at=st.integers(0, 3), other=WORDS)
def test_changing_one_argument_changes_the_digest_and_the_same_command_keeps_it(program, args, at, other):
    at %= len(args)
    changed = [*args[:at], other, *args[at + 1 :]]
    same, moved = _digest(shlex.join([program, *args])), _digest(shlex.join([program, *changed]))
    assert same == _digest(shlex.join([program, *args]))
    assert (same == moved) == (changed == args), (args, changed)
    # where an argument ends is part of the command too: "a b" is not "a" "b"
    if len(args) >= 2:
        assert _digest(shlex.join([program, f"{args[0]} {args[1]}", *args[2:]])) != same


def test_negative_control_a_digest_of_the_hashed_files_alone_cannot_tell_two_flags_apart():
    """The law above, on a digest that leaves the arguments' text out (the lines of the files alone): broken."""

    def files_only(cmd: str) -> str:
        with _in_an_empty_folder():
            parts = [p.to_json() for p in identity.command_digest(command.parse(cmd), "test", STATED).parts]
        return hashlib.sha256(
            "".join(
                f"{p.get('sha256') or p.get('stated')}\n" for p in parts if p["kind"] in ("program", "file")
            ).encode()
        ).hexdigest()

    good, other = "engine-packer --variant good", "engine-packer --variant idx_not_rebased"
    assert files_only(good) == files_only(other)  # the law would catch this digest
    assert _digest(good) != _digest(other)


@settings(max_examples=40, derandomize=True)
@given(
    env=st.dictionaries(NAMES, WORDS, min_size=1, max_size=4),
    program=PROGRAMS,
    args=st.lists(WORDS, max_size=2),
    data=st.data(),
)
def test_the_variables_order_does_not_matter_and_their_values_do(env, program, args, data):
    items = list(env.items())
    shuffled = data.draw(st.permutations(items))
    tail = shlex.join([program, *args])
    one = _digest(" ".join(f"{k}={shlex.quote(v)}" for k, v in items) + " " + tail)
    assert one == _digest(" ".join(f"{k}={shlex.quote(v)}" for k, v in shuffled) + " " + tail)
    assert one != _digest(tail)
    name, value = items[0]
    other = data.draw(WORDS.filter(lambda w: w != value))
    assert one != _digest(" ".join(f"{k}={shlex.quote(other if k == name else v)}" for k, v in items) + " " + tail)


# ------------------------------------------------------------------ what the engine reads


@pytest.fixture(scope="module")
def promoted(tmp_path_factory) -> dict:
    """k=2 run through the packer GOOD (its fast lane, and its laws judged in a process of its own), scored and
    promoted into ledger.json / promoted-shapes.json."""
    ws = tmp_path_factory.mktemp("command-identity")
    backend, _, golden = record("small", ws, blocks=6, numerics=CONFIG.numerics, config=CONFIG)
    cfg = CONFIG.with_overrides(candidates=(2,))
    with ExternalPacker(GOOD, backend.geometry, timeout_s=60) as packer:
        run = run_plan(golden, backend, plan_for(cfg), ws / "runs", cfg, RunOptions(packer=packer, laws_examples=2))
        good = packer.identity
    score_path = ws / "score.json"
    write_score(score_path, score_run(golden, run, LOOSE))
    ledger, manifest = ws / "ledger.json", ws / "promoted-shapes.json"
    promote_file(score_path, CONFIG.with_overrides(tolerances=LOOSE), ledger, manifest)
    score = Score.model_validate(json.loads(score_path.read_text()))
    assert score.packer["identity"] == score.laws.packer_identity == good and score.laws.verdict == "hold"
    return {"ws": ws, "score": score, "good": good, "ledger": ledger, "manifest": manifest}


def _may(
    capsys, monkeypatch, promoted: dict, packer: str, ledger: Path | None = None, manifest: Path | None = None
) -> tuple[int, str]:
    code, out, err = harness_cli(
        capsys,
        monkeypatch,
        "shapes",
        "--may",
        "--ledger",
        str(ledger or promoted["ledger"]),
        "--manifest",
        str(manifest or promoted["manifest"]),
        "--k",
        "2",
        "--op",
        "0",
        "--device",
        promoted["score"].device_kind,
        "--packer",
        packer,
    )
    assert not err.strip(), err
    return code, out.strip()


def test_evidence_for_one_flag_never_allows_the_other(promoted, capsys, monkeypatch):
    good, other = promoted["good"], identity_of(OTHER)
    code, why = _may(capsys, monkeypatch, promoted, good)
    assert code == 0 and why.startswith(f"yes: packer {good} may use k=2"), why  # the control: its own evidence
    code, why = _may(capsys, monkeypatch, promoted, other)
    assert code == 1, f"--may answered {why!r} for {OTHER!r} with the evidence of {GOOD!r}"
    assert why.startswith(f"no: packer {other} has no evidence") and f"promoted only for packer(s) {good}" in why


def test_a_ledger_keyed_by_the_files_only_digest_loads_and_its_evidence_does_not_allow_the_new_identity(
    promoted, capsys, monkeypatch
):
    """Identities made when only the command's files were hashed (argv[0] and every file argument): a ledger of
    them loads and still answers for them, and never for the identity of the same command now."""
    files_only = hashlib.sha256(f"{_sha(shutil.which(PY) or PY)}\n{_sha(SCRIPT)}\n".encode()).hexdigest()
    old = f"external:protocol-test/0.1@sha256:{files_only[:16]}"
    assert old != promoted["good"]
    ledger, manifest = promoted["ws"] / "old" / "ledger.json", promoted["ws"] / "old" / "promoted-shapes.json"
    ledger.parent.mkdir()
    score = as_packer(promoted["score"], old)
    commit(ledger, manifest, RELEASE, lambda book: apply_score(book, score, score.run.created, RELEASE))
    code, why = _may(capsys, monkeypatch, promoted, old, ledger, manifest)
    assert code == 0 and why.startswith(f"yes: packer {old} may use k=2"), why
    code, why = _may(capsys, monkeypatch, promoted, promoted["good"], ledger, manifest)
    assert code == 1 and why.startswith(f"no: packer {promoted['good']} has no evidence"), why


# ------------------------------------------------------------------ the harness's own packer, pinned

# The reference packer's identity is the sha256 of its source file (harness.packers.packing.harness_identity): any
# edit of that file, an import moved by a refactor included, is another packer whose shapes every ledger must
# promote again. Change the pin only on purpose, and say so in the release notes.
REFERENCE_PACKER_SHA256 = "450c0d0ffdecd10bf390d77b683462f8e3ebafcf66f2a743cae582f3c9879ba0"


def test_the_reference_packer_is_the_one_every_ledger_promoted():
    from harness import __version__
    from harness.packers import packing

    source = Path(packing.__file__).read_bytes()
    assert hashlib.sha256(source).hexdigest() == REFERENCE_PACKER_SHA256, (
        "harness/packers/packing.py changed: the harness's own packer gets another identity and every shape "
        "promoted for it must be judged again; keep the file as it was, or update REFERENCE_PACKER_SHA256 on purpose"
    )
    assert packing.harness_identity() == f"harness/{__version__}+{REFERENCE_PACKER_SHA256[:12]}"
    # negative control: one byte more is another packer
    assert hashlib.sha256(source + b"\n").hexdigest() != REFERENCE_PACKER_SHA256
