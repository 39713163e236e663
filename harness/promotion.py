"""The promotion gate's memory: the ledger of every shape's history, and the manifest the engine
reads to know which packed shapes it may use. Pure functions on validated data; the locked,
crash-safe commit of both files is :mod:`harness.ledger_store`'s.

A shape is promoted for a (model fingerprint, device kind, numerics profile) only when a score
passed it for every OP and the run's own exact lane reproduced the golden. A promoted shape that
fails a later run is revoked, naming the run. A score is refused when it could rewrite history:
a run already in the ledger, or a run older than the shape's last event (a replayed file).

The **promoted-shapes manifest** is derived from the ledger, never edited::

    {"kind": "harness.promoted-shapes", "format": 2, "ledger_seq": N, "ledger_sha256": "...",
     "models": {"<fingerprint>": {"devices": {"<device kind>": {"profiles": {"<numerics profile>": {
         "numerics": {...}, "release": "...", "ops": {"0": [1, 2, 4], "1": [1, 2, 4], "2": [1, 2, 4]},
         "evidence": {"<k>": {"run_id", "golden_id", "promoted_at", "corpus_blocks"}}}}}}}},
     "manifest_sha256": "..."}

Shapes listed per OP always include the release's own shapes (they need no promotion).
"""

from __future__ import annotations

import copy
import datetime as dt

from harness.errors import LedgerError
from harness.jsonio import seal
from harness.schemas import entry_key

FORMAT = 2
CANDIDATE, PROMOTED, REVOKED = "candidate", "promoted", "revoked"


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def empty_ledger() -> dict:
    return seal({"kind": "harness.ledger", "format": FORMAT, "seq": 0, "updated": None, "release": None,
                 "entries": {}}, "ledger_sha256")


def apply_score(ledger: dict, score: dict, run_created: str, release_shapes: dict[str, list[int]]) -> tuple[dict,
                                                                                                        list[dict]]:
    """A new ledger with one (already verified) score applied, and the state changes it made.

    Refuses, naming the shape, a run already in a shape's history and a run older than a shape's
    last event. Shapes the release itself uses need no promotion and are not recorded."""
    book = copy.deepcopy(ledger)
    seq = book["seq"] + 1
    fp, device, profile = score["fingerprint"], score["device_kind"], score["numerics_profile"]
    run_id = score["run"]["id"]
    golden_ok = bool(score["verification"]["passed"])
    release = {k for ks in release_shapes.values() for k in ks if all(k in v for v in release_shapes.values())}
    transitions: list[dict] = []
    at = now()
    for k, shape in sorted(score["shapes"].items(), key=lambda kv: int(kv[0])):
        k_int = int(k)
        if k_int in release:
            continue
        key = entry_key(fp, device, profile, k_int)
        entry = book["entries"].get(key)
        if entry is not None:
            last = entry["history"][-1]
            if any(e["run_id"] == run_id for e in entry["history"]):
                raise LedgerError(f"shape k={k}: run {run_id} is already in the ledger (event {last['seq']}); "
                                  "a score is applied once")
            if run_created <= last["run_created"]:
                raise LedgerError(f"shape k={k}: run {run_id} ({run_created}) is older than the shape's last event "
                                  f"(run {last['run_id']}, {last['run_created']}): a replayed score cannot rewrite "
                                  "history")
        else:
            entry = {"fingerprint": fp, "device_kind": device, "numerics_profile": profile,
                     "numerics": (score["numerics"] or {}).get("in_force") or {}, "shape": k_int, "state": CANDIDATE,
                     "revoked_by": None, "history": []}
        passed = shape["verdict"] == "pass" and golden_ok
        reasons = list(shape["reasons"])
        if not golden_ok:
            reasons.append(f"the run's exact lane did not reproduce golden {score['golden']['id']} "
                           f"({score['verification']['status']}): nothing may be promoted")
        before = entry["state"]
        if passed:
            entry["state"], entry["revoked_by"] = PROMOTED, None
        elif before == PROMOTED:
            entry["state"], entry["revoked_by"] = REVOKED, run_id
        entry["history"].append({"seq": seq, "at": at, "run_id": run_id, "run_created": run_created,
                                 "score_digest": score["digest"], "golden_id": score["golden"]["id"],
                                 "verdict": "pass" if passed else "fail", "state": entry["state"], "reasons": reasons,
                                 "evidence": _evidence(score, k)})
        book["entries"][key] = entry
        transitions.append({"shape": k_int, "from": before, "to": entry["state"], "run_id": run_id,
                            "passed": passed, "reasons": reasons})
    book["seq"], book["updated"], book["release"] = seq, at, score["release"]
    return seal({k: v for k, v in book.items() if k != "ledger_sha256"}, "ledger_sha256"), transitions


def _evidence(score: dict, k: str) -> dict:
    shape = score["shapes"][k]
    return {
        "golden_id": score["golden"]["id"],
        "mode": score["mode"],
        "corpus_blocks": score["corpus"]["blocks"],
        "ops": {op: {"metrics": {m: v["metrics"].get(m) for m in ("max_abs", "min_cosine", "flips", "rows")
                                 if m in v["metrics"]},
                     "failed_checks": [c["metric"] for c in v["checks"] if c["ok"] is False]}
                for op, v in shape["ops"].items()},
        "speedup": (score.get("throughput", {}).get(k) or {}).get("speedup"),
    }


def derive_manifest(ledger: dict, release_shapes: dict[str, list[int]]) -> dict:
    """The promoted-shapes manifest of ``ledger`` (sealed, bound to the ledger's commit)."""
    models: dict[str, dict] = {}
    for entry in sorted(ledger["entries"].values(), key=lambda e: (e["fingerprint"], e["device_kind"],
                                                                   e["numerics_profile"], e["shape"])):
        profile = models.setdefault(entry["fingerprint"], {"devices": {}})["devices"].setdefault(
            entry["device_kind"], {"profiles": {}})["profiles"].setdefault(
            entry["numerics_profile"], {"numerics": entry["numerics"], "release": ledger.get("release"),
                                        "ops": {op: sorted(ks) for op, ks in release_shapes.items()},
                                        "evidence": {}})
        if entry["state"] == PROMOTED:
            last = entry["history"][-1]
            for op in profile["ops"]:
                profile["ops"][op] = sorted(set(profile["ops"][op]) | {entry["shape"]})
            profile["evidence"][str(entry["shape"])] = {
                "run_id": last["run_id"], "golden_id": last["golden_id"], "promoted_at": last["at"],
                "corpus_blocks": last["evidence"]["corpus_blocks"]}
    return seal({"kind": "harness.promoted-shapes", "format": FORMAT, "generated": now(),
                 "ledger_seq": ledger["seq"], "ledger_sha256": ledger["ledger_sha256"], "models": models},
                "manifest_sha256")


def ledger_states(ledger: dict, fingerprint: str | None = None, device: str | None = None,
                  profile: str | None = None) -> dict[int, dict]:
    """Current entry per shape (filtered to one model/device/profile if given)."""
    out = {}
    for entry in ledger["entries"].values():
        if fingerprint and entry["fingerprint"] != fingerprint:
            continue
        if device and entry["device_kind"] != device:
            continue
        if profile and entry["numerics_profile"] != profile:
            continue
        out[entry["shape"]] = entry
    return out


def removed_shapes(old: dict | None, new: dict) -> bool:
    """Does ``new`` allow fewer shapes anywhere than ``old``? (then it must be written first)"""
    if old is None:
        return False

    def allowed(manifest: dict) -> set:
        return {(fp, dev, prof, op, k)
                for fp, m in manifest.get("models", {}).items()
                for dev, d in m.get("devices", {}).items()
                for prof, p in d.get("profiles", {}).items()
                for op, ks in p.get("ops", {}).items() for k in ks}

    return bool(allowed(old) - allowed(new))
