"""The ledger (candidate -> promoted -> revoked) and the promoted-shapes manifest the engine reads."""

from __future__ import annotations

import copy
import json

import pytest

from harness.jsonio import write_json_atomic
from harness.promotion import LedgerError, load_ledger, promoted_manifest, update_ledger


def score(verdicts: dict[int, str], run_id: str, fp: str = "f" * 64, device: str = "cpu", golden_ok: bool = True):
    shapes = {}
    for k, v in verdicts.items():
        shapes[str(k)] = {"shape": k, "verdict": v, "reasons": [] if v == "pass" else [f"OP 0 max_abs: bad at k={k}"],
                          "ops": {"0": {"metrics": {"max_abs": 0.0}, "limits": {}, "bound": {"n": 5000}}}}
    return {"fingerprint": fp, "device_kind": device, "run_id": run_id, "golden_id": "rel@abc", "release": "rel",
            "corpus": {"blocks": 12}, "mode": "isolated", "shapes": shapes,
            "verification": {"passed": golden_ok}, "throughput": {}}


def test_promote_then_revoke_with_the_revoking_run(tmp_path):
    ledger = load_ledger(tmp_path / "ledger.json")
    t1 = update_ledger(ledger, score({2: "pass", 4: "fail"}, "run-1"))
    assert {(t["shape"], t["to"]) for t in t1} == {(2, "promoted"), (4, "candidate")}
    t2 = update_ledger(ledger, score({2: "fail", 4: "pass"}, "run-2"))
    assert {(t["shape"], t["from"], t["to"]) for t in t2} == {(2, "promoted", "revoked"), (4, "candidate", "promoted")}
    entry = ledger["entries"]["f" * 64 + "|cpu|2"]
    assert entry["state"] == "revoked" and entry["revoked_by"] == "run-2"
    assert [e["state"] for e in entry["history"]] == ["promoted", "revoked"]
    assert entry["history"][-1]["reasons"] == ["OP 0 max_abs: bad at k=2"]
    assert entry["history"][0]["evidence"]["golden_id"] == "rel@abc"


def test_a_run_whose_golden_did_not_reproduce_promotes_nothing(tmp_path):
    ledger = load_ledger(tmp_path / "l.json")
    update_ledger(ledger, score({2: "pass"}, "run-1", golden_ok=False))
    assert ledger["entries"]["f" * 64 + "|cpu|2"]["state"] == "candidate"


def test_manifest_is_per_model_and_device_and_lists_release_shapes(tmp_path):
    ledger = load_ledger(tmp_path / "l.json")
    update_ledger(ledger, score({2: "pass", 8: "pass"}, "r1"))
    update_ledger(ledger, score({2: "pass"}, "r2", device="NVIDIA H200"))
    update_ledger(ledger, score({4: "pass"}, "r3", fp="e" * 64))
    update_ledger(ledger, score({8: "fail"}, "r4"))
    m = promoted_manifest(ledger, {"0": [1], "1": [1], "2": [1]})
    cpu = m["models"]["f" * 64]["devices"]["cpu"]
    assert cpu["ops"] == {"0": [1, 2], "1": [1, 2], "2": [1, 2]}  # 8 was revoked by r4
    assert m["models"]["f" * 64]["devices"]["NVIDIA H200"]["ops"]["0"] == [1, 2]
    assert m["models"]["e" * 64]["devices"]["cpu"]["ops"]["1"] == [1, 4]
    assert cpu["evidence"]["2"]["run_id"] == "r1"
    path = write_json_atomic(tmp_path / "promoted.json", m)
    assert json.loads(path.read_text()) == m


def test_a_corrupt_ledger_is_never_overwritten(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text("{oops")
    with pytest.raises(LedgerError, match=r"ledger is not valid JSON \(.*\); refusing to overwrite it"):
        load_ledger(path)
    path.write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(LedgerError, match="not a harness ledger"):
        load_ledger(path)


def test_repeated_passes_keep_history(tmp_path):
    ledger = load_ledger(tmp_path / "l.json")
    for i in range(3):
        update_ledger(ledger, score({2: "pass"}, f"r{i}"))
    entry = ledger["entries"]["f" * 64 + "|cpu|2"]
    assert entry["state"] == "promoted" and len(entry["history"]) == 3
    before = copy.deepcopy(ledger)
    assert update_ledger(ledger, score({2: "pass"}, "r9")) == []  # no transition to report
    assert len(ledger["entries"]["f" * 64 + "|cpu|2"]["history"]) == len(before["entries"]["f" * 64 + "|cpu|2"][
        "history"]) + 1
