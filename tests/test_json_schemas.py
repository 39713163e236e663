"""The JSON Schema of every file a tool outside the harness reads (docs/schemas/*.schema.json) is
generated from the pydantic models, kept current, and real files validate against it with a JSON Schema library
(Draft 2020-12), while a promoted-shapes.json with an unknown key, a wrongly typed value or a missing key does not."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.data.schemas import FILE_KINDS, Ledger, PromotedShapes
from harness.data.schemas.json_schema import REGENERATE, beyond_schema, json_schema, kinds, schema_texts
from harness.ledger.ledger_store import load_manifest
from harness.pipeline.inspect import LedgerFiles, shapes_document
from harness.pipeline.promote import promote_file
from harness.pipeline.score import score_run, write_score
from tests.pipeline import record, run_shapes
from tests.test_promotion import CONFIG, LOOSE

jsonschema = pytest.importorskip("jsonschema", reason="the test extra's jsonschema is not installed")

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "docs" / "schemas"


def differences(directory: Path) -> list[str]:
    """What differs between ``directory``'s ``*.schema.json`` and what the generator writes now."""
    want = schema_texts()
    have = {p.name: p.read_text() for p in sorted(directory.glob("*.schema.json"))}
    out = [f"{name}: missing" for name in want if name not in have]
    out += [f"{name}: not generated any more (remove it)" for name in have if name not in want]
    out += [f"{name}: differs from the models" for name in want if name in have and have[name] != want[name]]
    return out


def assert_current(directory: Path) -> None:
    stale = differences(directory)
    assert not stale, (
        f"{len(stale)} of {len(schema_texts())} JSON Schemas in {directory} are not what the models "
        f"generate: {'; '.join(stale)}. Regenerate them: {REGENERATE}"
    )


def validator(stem: str) -> Any:
    schema = json.loads((COMMITTED / f"{stem}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def problems(stem: str, document: object) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator(stem).iter_errors(document)
    ]


# ---------------------------------------------------------------------------------- (a) current and well formed


def test_committed_schemas_are_what_the_generator_writes_now():
    assert_current(COMMITTED)


def test_a_schema_change_without_regeneration_is_named_with_the_command_to_run(tmp_path):
    """Negative control of the test above: an edited, a missing and a stale extra file are each caught."""
    for name, text in schema_texts().items():
        (tmp_path / name).write_text(text)
    assert_current(tmp_path)
    (tmp_path / "promoted-shapes.schema.json").write_text(
        schema_texts()["promoted-shapes.schema.json"].replace('"additionalProperties": false', "", 1)
    )
    (tmp_path / "ledger.schema.json").unlink()
    (tmp_path / "old-kind.schema.json").write_text("{}")
    with pytest.raises(AssertionError) as caught:
        assert_current(tmp_path)
    text = str(caught.value)
    assert "3 of " in text and REGENERATE in text
    for words in (
        "promoted-shapes.schema.json: differs",
        "ledger.schema.json: missing",
        "old-kind.schema.json: not generated",
    ):
        assert words in text


def test_every_file_kind_has_one_valid_draft_2020_12_schema_promoted_shapes_first():
    stems = [stem for stem, _, _ in kinds()]
    assert stems[0] == "promoted-shapes" and len(set(stems)) == len(stems) == len(FILE_KINDS)
    for stem, title, model in kinds():
        schema = json.loads((COMMITTED / f"{stem}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", stem
        assert schema["$id"].endswith(stem) and schema["title"] == f"{title}: {model.__name__}", stem
        for key in ("kind", "format"):  # the one kind and format version the harness accepts: a const
            field = model.model_fields.get(key)
            if (
                field is not None
                and field.annotation is not None
                and len(getattr(field.annotation, "__args__", ())) == 1
            ):
                assert schema["properties"][key]["const"] == field.annotation.__args__[0], (stem, key)
    promoted = json.loads((COMMITTED / "promoted-shapes.schema.json").read_text())
    assert promoted["properties"]["kind"]["const"] == "harness.promoted-shapes"
    assert (
        "checks more than this schema can say" in promoted["description"]
        and "manifest_sha256" in promoted["description"]
    )


def test_a_schema_says_what_the_harness_checks_beyond_it_and_only_then():
    """What a model validates that JSON Schema cannot say is named in the description; a model that checks
    nothing more gets no such sentence (the negative control)."""
    from harness.data.schemas.base import Strict, Timestamp

    class Plain(Strict):
        """A file with nothing beyond its schema."""

        n: int

    class Timed(Strict):
        at: Timestamp

    assert beyond_schema(Plain) == "" and "checks more" not in json_schema("plain", "plain", Plain)["description"]
    assert "ISO 8601" in beyond_schema(Timed)
    ledger = json_schema("ledger", "ledger", Ledger)["description"]
    assert "LedgerEntry" in ledger and "model validators" in ledger and "the seal ledger_sha256" in ledger


def test_the_generator_command_writes_them_and_refuses_a_bad_argument_or_folder(tmp_path):
    cmd = [sys.executable, "-m", "harness.data.schemas"]
    done = subprocess.run([*cmd, "--json", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert_current(tmp_path / "out")
    assert done.stdout.splitlines()[0].endswith("promoted-shapes.schema.json")
    (tmp_path / "file").write_text("")
    for args, words in (
        (["--json", str(tmp_path / "file")], "is a file, not a folder"),
        (["--yaml", "x"], "expected no argument or --json DIR"),
    ):
        done = subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=ROOT)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "), done.stderr
        assert words in lines[0], lines[0]
    assert (tmp_path / "file").read_text() == ""


# ---------------------------------------------------------------------------------- (b) real files validate


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """What a small real pipeline writes: a golden (4 blocks), a run of k=2, its score, and the ledger and
    promoted-shapes manifest its promotion commits."""
    ws = tmp_path_factory.mktemp("json-schemas")
    backend, _, golden = record("small", ws, blocks=4, numerics=CONFIG.numerics, config=CONFIG)
    run = run_shapes(backend, golden, ws / "work", (2,), CONFIG)
    write_score(ws / "work" / "score.json", score_run(golden, run, LOOSE))
    promote_file(
        ws / "work" / "score.json",
        CONFIG.with_overrides(tolerances=LOOSE),
        ws / "ledger.json",
        ws / "promoted-shapes.json",
    )
    return {
        "promoted-shapes": ws / "promoted-shapes.json",
        "ledger": ws / "ledger.json",
        "score": ws / "work" / "score.json",
        "golden-manifest": golden.path / "manifest.json",
        "run-manifest": run.path / "manifest.json",
    }


@pytest.mark.parametrize("stem", ["promoted-shapes", "ledger", "score", "golden-manifest", "run-manifest"])
def test_a_file_the_harness_wrote_validates_against_its_published_schema(written, stem):
    document = json.loads(written[stem].read_text())
    found = problems(stem, document)
    assert not found, f"{written[stem]}: {len(found)} problem(s) against docs/schemas/{stem}.schema.json: {found[:5]}"


def test_the_manifest_validated_holds_a_promotion_and_the_shapes_answer_validates_too(written):
    manifest = json.loads(written["promoted-shapes"].read_text())
    (model,) = manifest["models"].values()
    (device,) = model["devices"].values()
    (profile,) = device["profiles"].values()
    (packer,) = profile["packers"].values()
    assert list(packer["evidence"]) == ["2"], packer  # the nested evidence, not only an empty map, was validated
    located = LedgerFiles(written["ledger"], written["promoted-shapes"], "--ledger")
    answer = json.loads(shapes_document(load_manifest(written["promoted-shapes"]), located, True))
    assert not problems("shapes-answer", answer)


def test_the_packing_test_vectors_validate_against_theirs(tmp_path):
    """What ``harness laws --export-vectors`` writes, the files an engine's own tests read."""
    from harness.laws import LAW_GEOMETRY
    from harness.packers import vector_files as vectors

    vectors.export(tmp_path / "v", LAW_GEOMETRY)
    files = sorted((tmp_path / "v").glob("*.json"))
    assert len(files) > 2
    for path in files:
        stem = {"index.json": "packing-vectors-index", "sessions.json": "packing-sessions"}.get(
            path.name, "packing-vector"
        )
        found = problems(stem, json.loads(path.read_text()))
        assert not found, f"{path.name}: {len(found)} problem(s) against docs/schemas/{stem}.schema.json: {found[:5]}"


# ---------------------------------------------------------------------------------- (c) negative controls


def _unknown_key(doc: dict[str, Any]) -> None:
    doc["engine_note"] = "hand-edited"


def _nested_unknown_key(doc: dict[str, Any]) -> None:
    packer = next(iter(next(iter(next(iter(doc["models"].values()))["devices"].values()))["profiles"].values()))
    next(iter(packer["packers"].values()))["ops"]["3"] = [2]  # an OP the model has not


def _wrong_type(doc: dict[str, Any]) -> None:
    doc["ledger_seq"] = str(doc["ledger_seq"])


def _missing(doc: dict[str, Any]) -> None:
    del doc["manifest_sha256"]


def _other_format(doc: dict[str, Any]) -> None:
    doc["format"] = 4


@pytest.mark.parametrize(
    ("defect", "words"),
    [
        (_unknown_key, "engine_note"),
        (_nested_unknown_key, "'3'"),
        (_wrong_type, "is not of type 'integer'"),
        (_missing, "'manifest_sha256' is a required property"),
        (_other_format, "3 was expected"),
    ],
    ids=["extra key", "extra nested key", "wrong type", "missing key", "other format"],
)
def test_a_defective_promoted_shapes_fails_its_schema_as_it_fails_the_harness(written, defect, words):
    good = json.loads(written["promoted-shapes"].read_text())
    assert not problems("promoted-shapes", good)
    bad = copy.deepcopy(good)
    defect(bad)
    found = problems("promoted-shapes", bad)
    assert len(found) == 1 and words in found[0], found
    with pytest.raises(ValidationError):  # the schema refuses what the harness's own model refuses
        PromotedShapes.model_validate(bad)


def test_a_sign_off_report_validates_against_its_published_schema(written, tmp_path):
    """report.json (the facts a tool reads, trusting a person saw the same numbers) holds its schema, with a
    ledger and without; a report with an unknown top-level key or another verdict word is refused."""
    from harness.data.schemas import SignoffReport
    from harness.ledger.ledger_store import load_ledger
    from harness.ledger.score_check import read_score
    from reports.signoff import ReportContext, write_report

    score = read_score(written["score"])
    for name, ledger in (("with-ledger", load_ledger(written["ledger"])), ("alone", None)):
        paths = write_report(tmp_path / name, score, ReportContext(ledger=ledger))
        document = json.loads(paths["json"].read_text())
        assert problems("report", document) == [], name
        SignoffReport.model_validate(document)
    assert problems("report", {**document, "surprise": 1}) != []
    assert problems("report", {**document, "verdict": "maybe"}) != []
