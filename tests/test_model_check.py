"""``harness model check``: every part of the model contract in seconds, one line per check, exit 0 / 1 / 2.

Each check is shown to fail on a model that breaks it (tests/contract_models.py, lanes/controls/defects.py) and to
hold on honest models, honest numerics included (the null model, the small reference network, one ULP per
slot, a packed path whose noise stays within the tolerances). And the part of the contract the commands need
before any work (describe()'s fingerprint) is refused by golden record, nightly, run and golden verify in
one line naming the model, with nothing written.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import ModelError
from lanes.models.model_check.check_calls import difference
from lanes.models.model_check.check_report import CHECKS
from lanes.models.model_contract import description
from tests.cli_run import harness_cli

MODELS = "tests.contract_models"


def check(capsys, monkeypatch, spec: str, *more: str) -> tuple[int, dict[str, tuple[str, str]], list[str], str]:
    """``harness model check --model SPEC``: (exit status, {check: (status, text)}, the lines, stderr)."""
    code, out, err = harness_cli(capsys, monkeypatch, "model", "check", "--model", spec, "--no-progress", *more)
    lines = out.splitlines()
    found = {}
    for line in lines[1:-1]:
        status, rest = line.split(None, 1)
        name, _, text = rest.partition(": ")
        found[name] = (status, text)
    return code, found, lines, err


def statuses(found: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {name: status for name, (status, _) in found.items()}


# ---------------------------------------------------------------------------- honest models: every check holds


@pytest.mark.parametrize("spec", [f"{MODELS}:wrapped", "small", "lanes.controls.ulp_controls:small"])
def test_an_honest_model_passes_every_check_one_line_each(capsys, monkeypatch, spec):
    code, found, lines, err = check(capsys, monkeypatch, spec)
    assert code == 0, (lines, err)
    assert lines[0].startswith(f"model check: {spec!r} on cpu, synthetic blocks A = ")
    assert list(found) == list(CHECKS), lines  # one line per check, in order
    assert {s for name, s in statuses(found).items() if name != "time per block"} == {"ok"}, lines
    assert found["time per block"][0] == "note" and "OP 0 " in found["time per block"][1]
    assert lines[-1].startswith(f"PASS: model {spec!r} meets the contract: 11 checks, 11 held"), lines[-1]
    assert "the same bits whatever audio its neighbour holds, in either slot" in found["isolation at k=2"][1]
    if spec == "small":  # the reference network has stage(): checked through it, as the pipelined lanes call it
        assert found["stage() as infer()"][1] == "block A through stage() against infer(): OP 0, 1, 2 bitwise"


def test_packed_noise_within_the_tolerances_is_a_note_not_a_leak(capsys, monkeypatch):
    """Honest numerics that do not repeat bitwise (a nondeterministic kernel): the same packed call sent again
    moves too, so the neighbour is not the cause."""
    code, found, lines, _ = check(capsys, monkeypatch, "lanes.controls.noisy_control:one_in_three")
    assert code == 0, lines
    status, text = found["isolation at k=2"]
    assert status == "note" and "does not repeat bitwise" in text and "noise, not a leak" in text, text


# ---------------------------------------------------------------------------- each check fails where it should


def test_a_leaky_model_fails_its_isolation_line(capsys, monkeypatch):
    code, found, lines, _ = check(capsys, monkeypatch, "lanes.controls:leaky")
    assert code == 1, lines
    status, text = found["isolation at k=2"]
    assert status == "FAIL" and "block A at slot 0 of [A, B] and of [A, B']" in text, text
    assert "values differ" in text and "VALID samples from its offset" in text, text
    assert {n: s for n, s in statuses(found).items() if s != "ok"} == {
        "isolation at k=2": "FAIL",
        "time per block": "note",
    }
    assert lines[-1].startswith("FAIL: model 'lanes.controls:leaky': 1 of 11 checks failed (isolation at k=2)")


def test_a_leak_of_the_whole_requests_level_fails_in_both_slots(capsys, monkeypatch):
    """cross_window_norm scales every window by the whole request's RMS: 1e-4 off, within no bitwise limit."""
    code, found, _, _ = check(capsys, monkeypatch, "lanes.controls:cross_window_norm")
    status, text = found["isolation at k=2"]
    assert code == 1 and status == "FAIL" and "slot 1" in text, text


@pytest.mark.parametrize(
    "spec,failing,says",
    [
        ("lanes.controls:wrong_shape", "OP 0 answer", "output SEGMENTATION has shape [7, 56, 7], expected [8, 56, 7]"),
        ("lanes.controls:nan_window", "finite", "values are NaN or Inf (first at window 8"),
        (f"{MODELS}:writes_its_request", "OP 0 answer", "infer wrote into its request's SPAN"),
        (f"{MODELS}:drifting", "same answer twice", "(allowed: max abs 0.0001, [tolerances.op0])"),
        (f"{MODELS}:frames_past_the_window", "geometry", "the last 16 of 56 frames start past the window"),
        (f"{MODELS}:no_fingerprint", "describe()", "describe() has no 'fingerprint'"),
    ],
)
def test_each_broken_part_fails_its_own_line(capsys, monkeypatch, spec, failing, says):
    code, found, lines, _ = check(capsys, monkeypatch, spec)
    assert code == 1, lines
    status, text = found[failing]
    assert status == "FAIL" and says in text, (failing, text)
    assert failing in lines[-1] and lines[-1].startswith(f"FAIL: model {spec!r}: "), lines[-1]


def test_run_to_run_noise_within_the_tolerances_is_a_note(capsys, monkeypatch):
    """Negative control of the 'same answer twice' failure: the same defect, a thousand times smaller."""
    code, found, lines, _ = check(capsys, monkeypatch, f"{MODELS}:drifting?step=1e-6")
    assert code == 0 and found["same answer twice"][0] == "note", lines
    assert "within [tolerances.op0] max_abs = 0.0001" in found["same answer twice"][1]


def test_a_model_that_cannot_be_built_is_exit_2_in_one_line(capsys, monkeypatch):
    code, out, err = harness_cli(
        capsys, monkeypatch, "model", "check", "--model", "no_such_module:make", "--no-progress"
    )
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("harness: error: model spec 'no_such_module:make': cannot import"), lines


# ---------------------------------------------------------------------------- two threads at once


@pytest.mark.parametrize("spec", [f"{MODELS}:locked", f"{MODELS}:one_worker"])
def test_a_model_that_cannot_be_entered_twice_passes_with_the_serialised_note(capsys, monkeypatch, spec):
    code, found, lines, _ = check(capsys, monkeypatch, spec)
    assert code == 0, lines
    status, text = found["two threads at once"]
    assert status == "note" and "the harness serialises its calls (not a failure)" in text, text
    assert lines[-1].endswith("1 with a note (two threads at once)"), lines[-1]


def test_a_reentrant_model_may_keep_two_calls_in_flight(capsys, monkeypatch):
    """Negative control of the note: the same model without its lock."""
    _, found, _, _ = check(capsys, monkeypatch, f"{MODELS}:wrapped")
    assert found["two threads at once"][0] == "ok" and "may keep two calls in flight" in found["two threads at once"][1]


# ---------------------------------------------------------------------------- describe(): the commands refuse it first


@pytest.mark.parametrize(
    "described,says",
    [
        ({"name": "m"}, "describe() has no 'fingerprint'"),
        ({"fingerprint": "FP"}, "describe() has no 'name'"),
        ({"name": "", "fingerprint": "FP"}, "describe()['name'] is '': a non-empty string is required"),
        ({"name": "m", "fingerprint": "other"}, "is not the model's fingerprint 'FP'"),
        ({"name": "m", "fingerprint": "FP", "weights": object()}, "holds a value a manifest cannot record"),
        ({"name": "m", "fingerprint": "FP", "bad": float("nan")}, "holds a value a manifest cannot record"),
        (["name", "fingerprint"], "describe() returned a list, not a dict"),
        (RuntimeError("no config"), "describe() raised RuntimeError: no config"),
    ],
)
def test_a_description_that_breaks_the_contract_is_named(described, says):
    class Model:
        fingerprint = "FP"

        def describe(self):
            if isinstance(described, Exception):
                raise described
            return described

    with pytest.raises(ModelError) as caught:
        description(Model())
    assert says in str(caught.value), str(caught.value)


def test_a_model_without_describe_is_described_by_the_harness():
    class Bare:
        fingerprint = "FP"

    assert description(Bare()).model_dump() == {"name": "Bare", "kind": "plugin", "fingerprint": "FP"}


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), err
    return lines[0]


COMMANDS = {
    "golden record": ("golden", "record", "--goldens", "{tmp}/goldens", "--no-progress"),
    "nightly": ("nightly", "--golden", "{golden}", "--out", "{tmp}/night", "--no-progress"),
    "run": ("run", "--golden", "{golden}", "--runs", "{tmp}/runs", "--no-progress"),
    "golden verify": ("golden", "verify", "{golden}", "--no-progress"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_a_model_without_fingerprint_before_writing_anything(
    capsys, monkeypatch, tmp_path, golden_copy, command
):
    """Before: golden record wrote the golden, then failed naming its own manifest, and left the files."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = [a.format(tmp=work, golden=golden_copy) for a in COMMANDS[command]]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, err = harness_cli(capsys, monkeypatch, *args, "--model", f"{MODELS}:no_fingerprint")
    line = _one_error_line(err)
    assert code == 2 and out == "", (out, err)
    assert f"model '{MODELS}:no_fingerprint': describe() has no 'fingerprint'" in line, line
    assert "harness model check" in line, line
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


def test_the_same_model_with_its_fingerprint_records(capsys, monkeypatch, tmp_path):
    """Negative control of the refusal: the model whose describe() names its fingerprint records a golden."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.toml").write_text("[corpus]\nblocks = 2\n")
    code, out, err = harness_cli(
        capsys, monkeypatch, "golden", "record", "--model", f"{MODELS}:wrapped", "--config", "h.toml", "--no-progress"
    )
    assert code == 0, err
    assert (tmp_path / "goldens" / "contract-wrapped" / "manifest.json").is_file(), out


# ---------------------------------------------------------------------------- the comparison's law


finite32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


@given(st.lists(finite32, min_size=1, max_size=40), st.data())
def test_difference_counts_exactly_the_elements_whose_bits_differ(values, data):
    a = np.array(values, dtype=np.float32)
    b = a.copy()
    flips = data.draw(st.lists(st.integers(0, len(values) - 1), unique=True, max_size=len(values)))
    for i in flips:
        b[i] = data.draw(finite32)
    diff = difference(a, b)
    differing = sum(a[i : i + 1].tobytes() != b[i : i + 1].tobytes() for i in range(len(values)))
    assert (diff is None) == (differing == 0) == (a.tobytes() == b.tobytes())
    if diff is not None:
        assert diff.differing == differing and diff.total == len(values)
        assert (difference(b, a) or diff).differing == differing  # symmetric


def test_difference_of_two_shapes_is_every_value():
    diff = difference(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))
    assert diff is not None and diff.differing == 6


# ---------------------------------------------------------------------------- the blank model file


def test_the_blank_model_file_of_the_docs_is_the_example_and_passes_as_it_is(capsys, monkeypatch, tmp_path):
    """docs/models.md shows examples/template_model.py whole; copied as the docs say, it passes every check."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    source = (root / "examples" / "template_model.py").read_text()
    docs = (root / "docs" / "models.md").read_text()
    assert f"```python\n{source}```" in docs, "docs/models.md's blank model file is not examples/template_model.py"
    shutil.copy(root / "examples" / "template_model.py", tmp_path / "mymodel.py")
    monkeypatch.chdir(tmp_path)
    code, found, lines, _ = check(capsys, monkeypatch, "mymodel:make_model")
    assert code == 0 and lines[-1].endswith("11 checks, 11 held"), lines
