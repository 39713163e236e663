"""The ledger and the promoted-shapes manifest are frozen models in memory, and a ledger
rewritten from its model is the file it was read from, byte for byte: a key the file did not have
(``judged_under`` in events written before it was recorded, an optional ``revoked_by``) stays out,
or the ledger's own seal would no longer match it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import harness.ledger.ledger_store
from harness.base.errors import LedgerError
from harness.base.jsonio import seal, write_json_atomic
from harness.data.schemas import Score
from harness.data.schemas.records import as_written
from harness.ledger.ledger_store import commit, load_ledger, load_manifest
from harness.ledger.promotion import apply_score, empty_ledger, sealed_ledger
from tests.test_promotion import RELEASE, STRICT, _year_of_history, world  # noqa: F401 (fixture)

FAKE_SCORE = {
    "packer": {"identity": "harness/0.0+000000000000"},
    "golden": {"id": "rel@0123456789ab"},
    "release": "rel",
    "fingerprint": "f" * 64,
    "device_kind": "cpu",
    "numerics_profile": "np-1",
}


def old_ledger(path: Path, score: dict, shapes: list[int]) -> bytes:
    """A ledger as an older harness wrote it: events without judged_under, the first entry without revoked_by."""
    book = _year_of_history(score, shapes, 2)
    del next(iter(book["entries"].values()))["revoked_by"]
    write_json_atomic(path, seal({k: v for k, v in book.items() if k != "ledger_sha256"}, "ledger_sha256"))
    return path.read_bytes()


def test_an_unchanged_ledger_is_rewritten_byte_for_byte(tmp_path, monkeypatch):
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    before = old_ledger(ledger, FAKE_SCORE, [2, 3])
    commit(ledger, manifest, RELEASE, lambda book: (book, None))
    assert ledger.read_bytes() == before
    assert load_manifest(manifest).ledger_sha256 == load_ledger(ledger).ledger_sha256
    # negative control: written as a plain model_dump, the absent keys appear as null and the seal breaks;
    # the commit refuses that (a bug: exit 3) and writes nothing
    monkeypatch.setattr(harness.ledger.ledger_store, "as_written", lambda m: m.model_dump(mode="json"))
    with pytest.raises(RuntimeError, match="did not reseal"):
        commit(ledger, manifest, RELEASE, lambda book: (book, None))
    assert ledger.read_bytes() == before


def test_a_commit_refuses_a_ledger_the_update_did_not_reseal(tmp_path):
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    with pytest.raises(RuntimeError, match="did not reseal"):
        commit(ledger, manifest, RELEASE, lambda book: (book.model_copy(update={"seq": 3}), None))
    assert not ledger.exists() and not manifest.exists()
    commit(ledger, manifest, RELEASE, lambda book: (sealed_ledger(3, None, dict(book.entries)), None))  # the control
    assert load_ledger(ledger).seq == 3


def test_apply_score_builds_a_new_ledger_and_leaves_its_argument_unchanged(world):  # noqa: F811
    passing = Score.model_validate(json.loads(world["scored"]((2,)).read_text()))
    failing = Score.model_validate(json.loads(world["scored"]((2,), STRICT).read_text()))
    first, _ = apply_score(empty_ledger(), passing, passing.run.created, RELEASE)
    shown = as_written(first)
    second, (t,) = apply_score(first, failing, failing.run.created, RELEASE)
    assert as_written(first) == shown and t.after == "revoked"
    assert [len(e.history) for e in first.entries.values()] == [1]
    assert [len(e.history) for e in second.entries.values()] == [2]
    with pytest.raises(ValidationError, match="frozen"):
        first.seq = 7  # type: ignore[misc]


def test_a_new_event_keeps_the_older_events_as_they_were_written(world, tmp_path):  # noqa: F811
    """k=2 and k=3 with old events (no judged_under): a failing score of k=2 appends one event that has it (k=2
    stays a candidate); every other event, k=2's absent revoked_by and the untouched k=3 entry stay as written."""
    path = world["scored"]((2,), STRICT, where=tmp_path)
    data = json.loads(path.read_text())
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    old_ledger(ledger, data, [2, 3])
    before = json.loads(ledger.read_text())["entries"]
    score = Score.model_validate(data)
    commit(ledger, manifest, RELEASE, lambda book: apply_score(book, score, "2026-01-01T00:00:00+00:00", RELEASE))
    after = json.loads(ledger.read_text())["entries"]
    k2, k3 = (next(key for key in before if key.endswith(f"|{k}")) for k in (2, 3))
    assert after[k3] == before[k3] and "revoked_by" not in after[k2]  # k=2 is the entry written without it
    assert after[k2]["state"] == "candidate" and after[k2]["history"][-1]["verdict"] == "fail"
    assert after[k2]["history"][:-1] == before[k2]["history"]
    assert "judged_under" in after[k2]["history"][-1] and after[k2]["history"][-1]["run_id"] == data["run"]["id"]


@pytest.mark.parametrize(
    ("shape", "message"),
    [(1, "a release shape \\(k = 1\\) is never promoted"), (100_001, "less than or equal to 100000"), (2.0, "integer")],
)
def test_a_ledger_entry_of_no_packed_shape_is_refused_though_resealed(tmp_path, shape, message):
    """A ledger entry's shape is a Shape of at least 2: one edited to the release's k = 1, past the largest shape,
    or to a float is refused with the key named, its seal redone or not."""
    ledger = tmp_path / "ledger.json"
    old_ledger(ledger, FAKE_SCORE, [2, 3])
    assert {e.shape for e in load_ledger(ledger).entries.values()} == {2, 3}  # the control: the written ledger loads
    book = json.loads(ledger.read_text())
    next(iter(book["entries"].values()))["shape"] = shape
    write_json_atomic(ledger, seal({k: v for k, v in book.items() if k != "ledger_sha256"}, "ledger_sha256"))
    with pytest.raises(LedgerError, match=message) as refused:
        load_ledger(ledger)
    assert "shape" in str(refused.value) and "\n" not in str(refused.value)
