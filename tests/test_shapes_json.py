"""Plain `harness shapes` and `harness ledger` find the files where nightly writes them
(beside the golden), `--golden` names that golden, nothing is guessed among several ledgers or created where there
is none, and `--json` prints the same facts as one JSON document of the schema declared in harness/data/schemas/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.data.schemas import HistoryAnswer, ShapesAnswer
from harness.ledger.ledger_store import load_ledger, load_manifest
from harness.pipeline.inspect import LedgerFiles, shapes_document
from harness.pipeline.promote import promote_file
from harness.pipeline.score import score_run, write_score
from tests.cli_run import harness_cli
from tests.pipeline import record, run_shapes
from tests.test_promotion import CONFIG, LOOSE


@pytest.fixture(scope="module")
def nightly_layout(tmp_path_factory) -> Path:
    """What nightly leaves: goldens/rel (the golden) and, beside it, goldens/ledger.json and
    goldens/promoted-shapes.json holding k=2's promotion."""
    ws = tmp_path_factory.mktemp("shapes-ws")
    backend, _, golden = record("small", ws, blocks=6, numerics=CONFIG.numerics, config=CONFIG)
    run = run_shapes(backend, golden, ws / "work", (2,), CONFIG)
    write_score(ws / "work" / "score.json", score_run(golden, run, LOOSE))
    promote_file(
        ws / "work" / "score.json",
        CONFIG.with_overrides(tolerances=LOOSE),
        ws / "goldens" / "ledger.json",
        ws / "goldens" / "promoted-shapes.json",
    )
    shutil.rmtree(ws / "work")
    return ws


@pytest.fixture
def ws(nightly_layout, tmp_path, monkeypatch) -> Path:
    here = tmp_path / "ws"
    shutil.copytree(nightly_layout, here)
    monkeypatch.chdir(here)
    return here


def cli(capsys, monkeypatch, *args):
    return harness_cli(capsys, monkeypatch, *args)


def test_plain_shapes_and_ledger_read_what_nightly_wrote_beside_the_golden(ws, capsys, monkeypatch):
    """Before: `harness shapes` said 'give --ledger' and `harness ledger` read ./ledger.json (absent)."""
    code, plain, err = cli(capsys, monkeypatch, "shapes")
    assert code == 0, err
    code, named, _ = cli(capsys, monkeypatch, "shapes", "--golden", "goldens/rel")
    code2, explicit, _ = cli(
        capsys, monkeypatch, "shapes", "--ledger", "goldens/ledger.json", "--manifest", "goldens/promoted-shapes.json"
    )
    assert code == code2 == 0 and plain == named == explicit and "k=2: promoted" in plain
    code, history, err = cli(capsys, monkeypatch, "ledger")
    assert code == 0 and "shape k=2" in history and "pass -> promoted" in history, err
    code, by_golden, _ = cli(capsys, monkeypatch, "ledger", "--golden", "goldens/rel")
    assert code == 0 and by_golden == history


def test_no_ledger_found_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in ("shapes", "ledger"):
        code, out, err = cli(capsys, monkeypatch, command)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert f"harness: error: {command}: no ledger found in ledger.json, goldens/ledger.json" in err
        assert "--golden" in err and "--ledger" in err
    assert list(tmp_path.iterdir()) == []  # never silently created


def test_several_ledgers_are_named_not_guessed(ws, capsys, monkeypatch):
    shutil.copy(ws / "goldens" / "ledger.json", ws / "ledger.json")
    code, out, err = cli(capsys, monkeypatch, "ledger")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "2 ledgers found (ledger.json, goldens/ledger.json)" in err and "--golden" in err
    code, out, _ = cli(capsys, monkeypatch, "ledger", "--golden", "goldens/rel")  # naming one settles it
    assert code == 0 and "shape k=2" in out


def test_golden_that_is_not_one_or_has_no_ledger_beside_it(ws, capsys, monkeypatch):
    code, _, err = cli(capsys, monkeypatch, "shapes", "--golden", "goldens")
    assert code == 2 and "goldens: not a golden" in err and "goldens/rel" in err
    (ws / "goldens" / "ledger.json").unlink()
    code, _, err = cli(capsys, monkeypatch, "ledger", "--golden", "goldens/rel")
    assert code == 2 and "goldens/ledger.json: no ledger beside the golden goldens/rel" in err
    assert not (ws / "goldens" / "ledger.json").exists()


def test_shapes_json_is_the_manifest_shown_with_where_it_came_from(ws, capsys, monkeypatch):
    code, out, err = cli(capsys, monkeypatch, "shapes", "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)  # one document, nothing else on stdout
    ShapesAnswer.model_validate(doc)
    assert doc["promoted_shapes"] == load_manifest(ws / "goldens" / "promoted-shapes.json").model_dump(mode="json")
    assert doc["files"] == {
        "ledger": "goldens/ledger.json",
        "manifest": "goldens/promoted-shapes.json",
        "found_by": "search",
    }
    assert doc["checked"] is True and doc["may"] is None


def test_shapes_may_json_keeps_the_exit_status(ws, capsys, monkeypatch):
    manifest = load_manifest(ws / "goldens" / "promoted-shapes.json")
    (model,) = manifest.models.values()
    (dev,) = model.devices.values()
    (profile,) = dev.profiles.values()
    (packer,) = profile.packers
    ask = ("shapes", "--may", "--packer", packer, "--op", "0", "--device", "cpu", "--json")
    code, out, _ = cli(capsys, monkeypatch, *ask, "--k", "2")
    assert code == 0 and json.loads(out)["may"]["allowed"] is True
    code, out, text_err = cli(capsys, monkeypatch, *ask[:-1], "--k", "8")
    code_json, out_json, _ = cli(capsys, monkeypatch, *ask, "--k", "8")
    assert code == code_json == 1
    may = json.loads(out_json)["may"]
    assert may["allowed"] is False and may["why"] == out.strip() and may["k"] == 8


def test_ledger_json_lists_the_entries_the_text_lists(ws, capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, "ledger", "--json", "--shape", "2")
    assert code == 0
    doc = json.loads(out)
    HistoryAnswer.model_validate(doc)
    book = load_ledger(ws / "goldens" / "ledger.json")
    assert doc["ledger_seq"] == book.seq and doc["filters"]["shape"] == 2
    assert [e["shape"] for e in doc["entries"]] == [2] and doc["entries"][0]["state"] == "promoted"
    assert doc["entries"][0] == next(iter(book.entries.values())).model_dump(mode="json")
    code, out, _ = cli(capsys, monkeypatch, "ledger", "--json", "--shape", "9")
    assert code == 0 and json.loads(out)["entries"] == []  # "no ledger entry matches": exit 0 in both forms


def test_a_document_its_schema_refuses_is_never_printed(ws):
    """Negative control of the validation: a manifest its schema refuses (built with model_copy, which does not
    validate) makes the document a bug, not output."""
    manifest = load_manifest(ws / "goldens" / "promoted-shapes.json").model_copy(update={"ledger_seq": -1})
    with pytest.raises(ValidationError):
        shapes_document(manifest, LedgerFiles(None, None, "search"), checked=False)
