"""The promotion gate's memory: the ledger of every shape's history, and the manifest the
engine reads to know which packed shapes it may use.

A shape is promoted for a (model fingerprint, device kind) only when its score passed for
every OP. A promoted shape that fails a later run is revoked, with the run that revoked it.
The **promoted-shapes manifest** is derived from the ledger, never edited by hand::

    {"format": 1, "generated": "...",
     "models": {"<fingerprint>": {"devices": {"<device kind>": {
         "release": "...", "ops": {"0": [1, 2, 4], "1": [1, 2, 4], "2": [1, 2, 4]},
         "evidence": {"<k>": {"run_id", "golden_id", "promoted_at", "corpus_blocks", ...}}}}}}}

Shapes listed per OP always include the release's own shapes (they need no promotion).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from harness.errors import HarnessError

FORMAT = 1
CANDIDATE, PROMOTED, REVOKED = "candidate", "promoted", "revoked"


class LedgerError(HarnessError):
    pass


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def load_ledger(path: Path) -> dict:
    path = Path(path)
    if not path.exists():
        return {"kind": "harness.ledger", "format": FORMAT, "entries": {}}
    try:
        ledger = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise LedgerError(f"{path}: ledger is not valid JSON ({exc}); refusing to overwrite it") from None
    if ledger.get("kind") != "harness.ledger" or not isinstance(ledger.get("entries"), dict):
        raise LedgerError(f"{path}: not a harness ledger; refusing to overwrite it")
    return ledger


def _key(fingerprint: str, device: str, shape: int) -> str:
    return f"{fingerprint}|{device}|{shape}"


def update_ledger(ledger: dict, score: dict) -> list[dict]:
    """Apply one score to the ledger; returns the transitions made (for logs and reports)."""
    fp, device = score["fingerprint"], score["device_kind"]
    transitions = []
    golden_ok = score.get("verification", {}).get("passed", True)
    for k, shape in sorted(score["shapes"].items(), key=lambda kv: int(kv[0])):
        key = _key(fp, device, int(k))
        entry = ledger["entries"].setdefault(key, {
            "fingerprint": fp, "device_kind": device, "shape": int(k), "state": CANDIDATE, "history": [],
        })
        passed = shape["verdict"] == "pass" and golden_ok
        reasons = list(shape["reasons"])
        if not golden_ok:
            reasons.append("the exact lane did not reproduce its golden in this run")
        event = {"at": _now(), "run_id": score["run_id"], "golden_id": score["golden_id"],
                 "verdict": "pass" if passed else "fail", "reasons": reasons, "evidence": _evidence(score, k)}
        before = entry["state"]
        if passed:
            entry["state"] = PROMOTED
        elif before == PROMOTED:
            entry["state"] = REVOKED
            entry["revoked_by"] = score["run_id"]
        event["state"] = entry["state"]
        entry["history"].append(event)
        if before != entry["state"] or not passed:
            transitions.append({"shape": int(k), "from": before, "to": entry["state"], "run_id": score["run_id"],
                                "reasons": reasons})
    ledger["release"] = score.get("release")
    return transitions


def _evidence(score: dict, k: str) -> dict:
    shape = score["shapes"][k]
    return {
        "golden_id": score["golden_id"],
        "fingerprint": score["fingerprint"],
        "device_kind": score["device_kind"],
        "mode": score.get("mode"),
        "corpus_blocks": score["corpus"].get("blocks"),
        "ops": {op: {"metrics": v["metrics"], "limits": v["limits"], "bound": v["bound"]}
                for op, v in shape["ops"].items()},
        "throughput": score.get("throughput", {}).get(k),
    }


def promoted_manifest(ledger: dict, release_shapes: dict[str, list[int]]) -> dict:
    models: dict[str, dict] = {}
    for entry in ledger["entries"].values():
        dev = models.setdefault(entry["fingerprint"], {"devices": {}})["devices"].setdefault(
            entry["device_kind"], {"release": ledger.get("release"),
                                   "ops": {op: sorted(ks) for op, ks in release_shapes.items()}, "evidence": {}})
        if entry["state"] == PROMOTED:
            last = entry["history"][-1]
            for op in dev["ops"]:
                dev["ops"][op] = sorted(set(dev["ops"][op]) | {entry["shape"]})
            dev["evidence"][str(entry["shape"])] = {"run_id": last["run_id"], "golden_id": last["golden_id"],
                                                    "promoted_at": last["at"],
                                                    "corpus_blocks": last["evidence"].get("corpus_blocks")}
    return {"kind": "harness.promoted-shapes", "format": FORMAT, "generated": _now(), "models": models}


def ledger_states(ledger: dict, fingerprint: str | None = None, device: str | None = None) -> dict[int, dict]:
    """Current state per shape (filtered to one model/device if given)."""
    out = {}
    for entry in ledger["entries"].values():
        if fingerprint and entry["fingerprint"] != fingerprint:
            continue
        if device and entry["device_kind"] != device:
            continue
        out[entry["shape"]] = entry
    return out
