"""`harness audit` end to end on CPU with the small model: a capture that passes, and its negative controls.

Captures are made the way the engine makes them (harness.pipeline.capture: blocks packed k at a time, served,
voiceprint rows from the served segmentation): with the harness's packer and the golden model (passes); with an
off-by-one packer (caught by the laws before any model is called); served by another model (named first, and the
scores fail); with a NaN in a served output (fails, NaN never passes).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from html import unescape as html_unescape
from pathlib import Path

import numpy as np
import pytest
from junitparser import Failure, JUnitXml, Skipped
from pydantic import ValidationError

from examples.capture_simulated_engine import idx_not_rebased_packer, one_short_packer
from harness import cli
from harness.base.errors import SchemaError
from harness.base.jsonio import write_json_atomic
from harness.capture import CapturedRequest, CaptureReader, CaptureWriter
from harness.capture.result import read_audit
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from harness.data.schemas.config_file import ModelSection
from harness.pipeline.audit import audit_capture
from harness.pipeline.capture import serve_and_capture
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model

NUMERICS = NumericSettings(threads=1)
CFG = release_config(model=ModelSection(spec="small"), numerics=NUMERICS)


class Counting:
    """A backend that counts the model calls made through it."""

    def __init__(self, backend) -> None:
        self.backend, self.calls = backend, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def call(self, *args):
        self.calls += 1
        return self.backend.call(*args)

    def call_many(self, calls):
        return [self.call(*c) for c in calls]


class Factory:
    """``make_backend`` for the audit: counts whether the model was even built."""

    def __init__(self, backend) -> None:
        self.backend, self.built = Counting(backend), 0

    def __call__(self):
        self.built += 1
        return self.backend


def rewrite(src: Path, dst: Path, change) -> Path:
    reader = CaptureReader(src)
    with CaptureWriter(dst, reader.geometry, reader.meta.engine) as writer:
        for request in reader.requests():
            writer.add(change(request))
        writer.close()
    return dst


@pytest.fixture(scope="module")
def golden_backend():
    return InProcessBackend(load_model("small"), NUMERICS)


@pytest.fixture(scope="module")
def captures(tmp_path_factory, golden_backend):
    root = tmp_path_factory.mktemp("captures")
    g = golden_backend.geometry
    blocks = synth_corpus(g, 12).blocks
    full = [b for b in synth_corpus(g, 24).blocks if (b.valid > 0).all()][:8]  # no block ends on padding
    other = InProcessBackend(load_model("small", seed=1), NUMERICS)
    paths = {
        "good": root / "good.parquet",
        "off-by-one": root / "off-by-one.parquet",
        "idx": root / "idx.parquet",
        "other-model": root / "other-model.parquet",
    }
    serve_and_capture(paths["good"], blocks, golden_backend, 4)
    serve_and_capture(paths["off-by-one"], full, golden_backend, 2, one_short_packer)
    serve_and_capture(paths["idx"], blocks, golden_backend, 4, idx_not_rebased_packer)
    serve_and_capture(paths["other-model"], blocks, other, 4)
    paths["op0-only"] = root / "op0-only.parquet"
    serve_and_capture(paths["op0-only"], blocks, golden_backend, 3, ops=(Op.SEGMENTATION,))

    def nan(request: CapturedRequest) -> CapturedRequest:
        if request.request_id != "r000003":  # the second OP 0 request
            return request
        output = request.output.copy()
        output[11, 7, 2] = np.nan  # window 3 of its second block
        return dataclasses.replace(request, output=output)

    paths["nan"] = rewrite(paths["good"], root / "nan.parquet", nan)
    paths["unlabelled"] = rewrite(
        paths["good"],
        root / "unlabelled.parquet",
        lambda r: dataclasses.replace(r, packed=dataclasses.replace(r.packed, speakers=None)),
    )
    paths["same-labels"] = rewrite(
        paths["good"],
        root / "same-labels.parquet",
        lambda r: dataclasses.replace(
            r,
            packed=dataclasses.replace(
                r.packed, speakers=None if r.packed.speakers is None else np.zeros_like(r.packed.speakers)
            ),
        ),
    )  # (window, speaker) twice in a block
    return paths


def audit(captures, name, backend, tmp_path, cfg=CFG):
    factory = Factory(backend)
    outcome = audit_capture(captures[name], tmp_path / name, cfg, factory)
    return outcome, factory


def junit_cases(path: Path) -> dict:
    return {c.name: c for suite in JUnitXml.fromfile(str(path)) for c in suite}


# ------------------------------------------------------------------------------------------ passing capture


def test_a_capture_of_the_harness_packer_served_by_the_golden_model_passes(captures, golden_backend, tmp_path):
    outcome, factory = audit(captures, "good", golden_backend, tmp_path)
    r = outcome.result
    assert outcome.passed and r.verdict == "pass" and r.fingerprint_matches is True
    assert r.headline.startswith(
        "PASS: 9 captured requests (36 blocks) obey the packing laws and match the "
        "golden model 'small' re-run alone: OP 0 bitwise"
    )
    assert r.laws.model_dump() == {
        "passed": True,
        "judged": ["well-formed", "rebased-inside"],
        "requests": 9,
        "blocks": 36,
        "padding_blocks": 0,
        "broken": {},
        "violations": [],
    }
    for op in ("0", "1", "2"):
        o = r.ops[op]
        assert o.verdict.passed and o.blocks == 12 and o.requests == 3
    assert r.ops["1"].rows_matched_by == "block, window, speaker" and r.ops["1"].unlabelled_rows == 0
    # every captured block re-run alone: one call per block (a voiceprint block without rows sends nothing)
    reader = CaptureReader(captures["good"])
    sent = sum(q.op == 0 or s.rows > 0 for q in reader.requests() for s in q.packed.segments)
    assert factory.built == 1 and factory.backend.calls == sent
    # the files: the sealed audit, JUnit, the report's production audit section; nothing else (no ledger)
    assert sorted(p.name for p in (tmp_path / "good").iterdir() if not p.name.startswith(".")) == [
        "audit.json",
        "junit.xml",
        "report.html",
        "report.md",
    ]  # (the set's generation: hidden names, outputset)
    assert read_audit(outcome.paths["audit"]) == r  # the typed audit, as read back from its file
    assert json.loads(outcome.paths["audit"].read_text()) == r.model_dump(mode="json")  # written as it is held
    with pytest.raises(ValidationError, match="frozen"):  # the judged audit cannot be changed after it is sealed
        r.ops["0"].blocks = 0
    cases = junit_cases(outcome.paths["junit"])
    assert sorted(cases) == ["laws", "op0", "op1", "op2"] and all(c.is_passed for c in cases.values())
    html, md = outcome.paths["html"].read_text(), outcome.paths["md"].read_text()
    assert 'id="production-audit" data-verdict="pass"' in html and r.headline in html_unescape(html)
    assert "## Production audit" in md and "http" not in html and "<script" not in html
    assert outcome.lines[-2] == f"audit: {r.headline}"


@pytest.mark.parametrize("name", ["unlabelled", "same-labels"])
def test_rows_without_unique_speaker_labels_are_matched_by_row_index(captures, golden_backend, tmp_path, name):
    outcome, _ = audit(captures, name, golden_backend, tmp_path)
    o = outcome.result.ops["1"]
    assert outcome.passed and o.rows_matched_by == "block, row" and o.unlabelled_rows > 0


def test_an_op_that_was_not_captured_is_not_scored_and_not_failed(captures, golden_backend, tmp_path):
    outcome, factory = audit(captures, "op0-only", golden_backend, tmp_path)
    r = outcome.result
    assert outcome.passed and r.ops["0"].verdict.passed and factory.backend.calls == 12
    assert [r.ops[op].not_scored for op in ("1", "2")] == ["no request of this OP was captured"] * 2
    cases = junit_cases(outcome.paths["junit"])
    assert cases["op0"].is_passed and cases["op1"].is_skipped and cases["op2"].is_skipped
    assert "OP 1: no request of this OP was captured" in outcome.lines


# ------------------------------------------------------------------------------------------ negative controls


@pytest.mark.parametrize(
    "name,where",
    [
        (
            "off-by-one",
            "window 0 of block '{block}' (window 8 of the request) reads SPAN [43999, 59999), outside its "
            "block's part [44000, 88000)",
        ),
        ("idx", "row 0 of block '{block}' (row {row} of the request) has IDX 0, outside its block's windows [8, 16)"),
    ],
)
def test_a_packing_bug_is_caught_by_the_laws_before_any_model_runs(captures, golden_backend, tmp_path, name, where):
    outcome, factory = audit(captures, name, golden_backend, tmp_path)
    r = outcome.result
    assert factory.built == 0 and factory.backend.calls == 0  # no model built, let alone called
    assert r.verdict == "fail" and not r.laws.passed and r.golden_model is None
    first = r.laws.violations[0]
    # the request row is after the first block's rows: how many that is depends on the corpus
    expected = re.escape(where.format(block=first.block_id, row="ROW")).replace("ROW", r"[1-9]\d*")
    assert first.law == "rebased-inside" and re.fullmatch(expected, first.what), first.what
    broken = r.laws.broken["rebased-inside"]
    assert r.headline.startswith(
        f"FAIL: packing law broken (rebased-inside by {broken} of "
        f"{r.capture.requests} requests); first: request "
        f"{first.request_id!r} block {first.block_id!r}: "
    )
    assert r.headline.endswith("; nothing was re-run")
    assert all(
        o.verdict is None and o.not_scored.startswith("not run: a packing law is broken") for o in r.ops.values()
    )
    cases = junit_cases(outcome.paths["junit"])
    failure = next(x for x in cases["laws"].result if isinstance(x, Failure))
    assert f"request {first.request_id!r}" in failure.message and "rebased-inside" in failure.message
    assert all(isinstance(cases[f"op{op}"].result[0], Skipped) for op in ("0", "1", "2"))
    assert "Nothing was re-run" in outcome.paths["md"].read_text()


def test_a_capture_served_by_another_model_is_named_first_and_fails_its_scores(captures, golden_backend, tmp_path):
    outcome, factory = audit(captures, "other-model", golden_backend, tmp_path)
    r = outcome.result
    other = load_model("small", seed=1).fingerprint
    assert r.verdict == "fail" and r.fingerprint_matches is False and r.laws.passed
    assert r.served.fingerprints == {other: 9}
    assert outcome.lines[0] == (
        f"MODEL DIFFERS: the capture was served by model {other[:16]}... (9 of 9 requests), "
        f"not the golden model 'small' ({golden_backend.fingerprint[:16]}...): the scores "
        "below compare two different models"
    )
    assert r.headline.startswith(f"FAIL: served by another model ({other[:16]}... in 9 of 9 requests)")
    for op in ("0", "1", "2"):
        assert not r.ops[op].verdict.passed, op
    failed = {c.metric for c in r.ops["0"].verdict.checks if c.ok is False}
    assert {"max_abs", "confident_flips"} <= failed
    assert r.ops["1"].verdict.metrics["min_cosine"] < 0.99
    assert r.headline.endswith("3 of 3 OPs failed") and factory.backend.calls > 0
    assert 'id="model-differs"' in outcome.paths["html"].read_text()


def test_a_nan_in_a_served_output_never_passes(captures, golden_backend, tmp_path):
    outcome, _ = audit(captures, "nan", golden_backend, tmp_path)
    r = outcome.result
    assert r.verdict == "fail" and r.fingerprint_matches is True and r.laws.passed
    v = r.ops["0"].verdict
    check = next(c for c in v.checks if c.metric == "non_finite")
    block = next(
        q.packed.segments[1].block_id for q in CaptureReader(captures["nan"]).requests() if q.request_id == "r000003"
    )
    assert check.ok is False and check.observed == 1
    assert check.where == f"first block 'r000003/{block}' window 3"
    assert r.ops["1"].verdict.passed and r.ops["2"].verdict.passed
    assert r.headline.startswith(f"FAIL: OP 0 non_finite: 1 != 0 allowed, 1 of {12 * 8 * 56 * 7:,} elements")
    failure = next(x for x in junit_cases(outcome.paths["junit"])["op0"].result if isinstance(x, Failure))
    assert "non_finite" in failure.message


def test_the_audit_file_is_sealed(captures, golden_backend, tmp_path):
    outcome, _ = audit(captures, "good", golden_backend, tmp_path)
    data = json.loads(outcome.paths["audit"].read_text())
    data["ops"]["0"]["verdict"]["passed"] = False
    write_json_atomic(tmp_path / "edited.json", data)
    with pytest.raises(SchemaError, match="verdict 'pass' disagrees|digest does not match"):
        read_audit(tmp_path / "edited.json")


# ------------------------------------------------------------------------------------------ the command line


def run(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["harness", "audit", *args])
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_command_line(captures, tmp_path, capsys, monkeypatch):
    common = ("--golden-model", "small", "--set", "numerics.threads=1", "--no-progress")
    code, out, err = run(capsys, monkeypatch, str(captures["good"]), *common, "--out", str(tmp_path / "a"))
    assert code == 0 and err == "" and "audit: PASS: 9 captured requests" in out
    code, out, err = run(capsys, monkeypatch, str(captures["off-by-one"]), *common, "--out", str(tmp_path / "b"))
    assert code == 1 and "audit: FAIL: packing law broken (rebased-inside" in out
    code, out, err = run(capsys, monkeypatch, str(captures["other-model"]), *common, "--out", str(tmp_path / "c"))
    assert code == 1 and out.splitlines()[0].startswith("MODEL DIFFERS")  # named first
    code, out, err = run(capsys, monkeypatch, str(captures["good"]), *common, "--tolerance", "noise-floor")
    assert code == 2 and err.startswith("harness: error: tolerance mode 'noise-floor' (OP 0): an audit re-runs")


def test_help(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "--help")
    assert code == 0
    for words in ("CAPTURE", "--golden-model", "--out", "--tolerance", "--device", "--progress", "Exit 0"):
        assert words in out


@pytest.mark.parametrize("name", ["good", "unlabelled"])
def test_an_audit_file_validates_against_its_published_schema(captures, golden_backend, tmp_path, name):
    """audit.json's JSON Schema (docs/schemas/audit.schema.json) holds for a passing audit and for one a
    broken law stopped; the schema is generated from the same model the harness checks with."""
    from tests.test_json_schemas import problems

    outcome, _ = audit(captures, name, golden_backend, tmp_path)
    document = json.loads(outcome.paths["audit"].read_text())
    assert problems("audit", document) == []
    assert problems("audit", {**document, "verdict": "maybe"}) != []  # negative control: the schema can refuse
