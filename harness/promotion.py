"""The promotion gate's memory: the ledger of every shape's history, and the manifest the engine
reads to know which packed shapes it may use. Pure functions on validated data; the locked,
crash-safe commit of both files is :mod:`harness.ledger_store`'s.

A shape is promoted for a (model fingerprint, device kind, numerics profile, **packer identity**)
only when a score passed it for every OP, the run's own exact lane reproduced the golden, and the
packing laws held for the very packer the fast lane used (``score["laws"]``). Evidence for one
packer never promotes, and never un-revokes, a shape for another: the packer is part of the key.
A promoted shape that fails a later run is revoked, naming the run. A score is refused when it
could rewrite history: a run already in the ledger, or a run older than the shape's last event.
Each entry carries its own release (a ledger may hold several models' releases).

The **promoted-shapes manifest** is derived from the ledger, never edited::

    {"kind": "harness.promoted-shapes", "format": 3, "ledger_seq": N, "ledger_sha256": "...",
     "models": {"<fingerprint>": {"devices": {"<device kind>": {"profiles": {"<numerics profile>": {
         "numerics": {...}, "release_ops": {"0": [1], "1": [1], "2": [1]},
         "packers": {"<packer identity>": {
             "ops": {"0": [1, 2, 4], "1": [1, 2, 4], "2": [1, 2, 4]},
             "evidence": {"<k>": {"run_id", "golden_id", "release", "promoted_at", "corpus_blocks",
                                  "tolerance_mode", "laws": {"verdict", "examples", "seed", ...}}}}}}}}}}},
     "manifest_sha256": "..."}

Every packer's shapes per OP include the release's own shapes (they need no promotion); a packer
the manifest does not name may use only ``release_ops``.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from harness.data.errors import LedgerError
from harness.data.jsonio import seal
from harness.data.schemas import entry_key

FORMAT = 3
CANDIDATE, PROMOTED, REVOKED = "candidate", "promoted", "revoked"
# what in a manifest is derived from the ledger: all of it but the time it was written and its seal
_NOT_DERIVED = ("generated", "manifest_sha256")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def empty_ledger() -> dict[str, Any]:
    return seal({"kind": "harness.ledger", "format": FORMAT, "seq": 0, "updated": None, "entries": {}},
                "ledger_sha256")


def packer_of(score: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The identity of the packer the score's fast lane used, and its laws verdict (both required)."""
    identity = (score.get("packer") or {}).get("identity")
    if not isinstance(identity, str) or not identity:
        raise LedgerError("the score names no packer identity (score.packer.identity): re-score the run with this "
                          "harness version; a shape is promoted only for the packer it was proven with")
    laws = score.get("laws")
    if not isinstance(laws, dict) or not isinstance(laws.get("verdict"), str):
        raise LedgerError(f"the score carries no packing-laws verdict (score.laws) for packer {identity}: re-score "
                          "the run with this harness version (a nightly judges the packer's laws first)")
    return identity, laws


def laws_reason(identity: str, laws: dict[str, Any]) -> str | None:
    """Why the laws verdict does not allow a promotion for ``identity`` (None: it does)."""
    judged = laws.get("packer_identity")
    if judged != identity:
        return (f"the packing laws were judged for packer {judged!r}, not the fast lane's packer {identity!r}: "
                "nothing may be promoted without that packer's own laws verdict")
    if laws["verdict"] == "not-judged":
        return (f"the packing laws of packer {identity} were not judged in this run (turned off): a packer is "
                "promoted only with its laws held; run the nightly with the laws on")
    if laws["verdict"] != "hold":
        broken = ", ".join(laws.get("broken") or []) or "?"
        return (f"packer {identity} breaks the packing laws ({broken}; verdict {laws['verdict']!r}, "
                f"{laws.get('examples')} examples, seed {laws.get('seed')}): nothing may be promoted for it")
    return None


def tolerance_mode(tolerances: dict[str, Any]) -> str:
    """The score's tolerance mode: one name when every OP was judged in it, else 'op0=...,op1=...'."""
    modes = {op: (t or {}).get("mode") for op, t in sorted(tolerances.items())}
    values = set(modes.values())
    return str(values.pop()) if len(values) == 1 else ",".join(f"{op}={m}" for op, m in modes.items())


def judging_overrides(score: dict[str, Any]) -> list[dict[str, Any]]:
    """Every judging setting the score was judged under that differs from the harness's built-in default
    (``harness.tolerances.Tolerances()``, ``[lanes] voiceprint_inputs = "isolated"``), key by key:
    ``[{"key": "tolerances.op0.mode", "value": "bitwise", "default": "tolerance"}, ...]``.

    An override is what was *in force*, whoever set it (``--tolerance``, ``--voiceprint-inputs`` or a
    ``harness.toml`` value): the score records the settings, not their source, and a night judged under
    bitwise limits is that whether a flag or a file asked for it. A score without tolerances (never
    written by this harness) yields nothing here; its ledger event still names its tolerance mode."""
    from harness.tolerances import Tolerances

    out: list[dict[str, Any]] = []
    defaults = Tolerances().model_dump()
    for op, table in sorted((score.get("tolerances") or {}).items()):
        for key, value in sorted((table or {}).items()):
            default = (defaults.get(op) or {}).get(key)
            if value != default:
                out.append({"key": f"tolerances.{op}.{key}", "value": value, "default": default})
    if score.get("mode", "isolated") != "isolated":
        out.append({"key": "lanes.voiceprint_inputs", "value": score["mode"], "default": "isolated"})
    return out


def describe_overrides(overrides: list[dict[str, Any]]) -> str:
    """'tolerances.op0.mode = bitwise (default tolerance), ...' (one line)."""
    return ", ".join(f"{o['key']} = {o['value']} (default {o['default']})" for o in overrides)


def overrides_line(score: dict[str, Any]) -> str | None:
    """The report's one line when the score was judged under overrides (None: under the defaults)."""
    found = judging_overrides(score)
    return f"Judged under overrides: {describe_overrides(found)}" if found else None


def judged_under(score: dict[str, Any]) -> dict[str, Any]:
    """What a ledger event records of how its score was judged (schema: ``LedgerEvent.judged_under``)."""
    return {"tolerance_mode": tolerance_mode(score.get("tolerances") or {}),
            "voiceprint_inputs": score.get("mode", "isolated"), "overrides": judging_overrides(score)}


def apply_score(ledger: dict[str, Any], score: dict[str, Any], run_created: str, release_shapes: dict[str, list[int]]
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A new ledger with one (already verified) score applied, and the state changes it made.

    Refuses, naming the shape, a run already in a shape's history and a run older than a shape's
    last event; refuses (LedgerError) a score without a packer identity or laws verdict. Shapes the
    release itself uses need no promotion and are not recorded."""
    identity, laws = packer_of(score)
    laws_block = laws_reason(identity, laws)
    book = copy.deepcopy(ledger)
    seq = book["seq"] + 1
    fp, device, profile = score["fingerprint"], score["device_kind"], score["numerics_profile"]
    run_id = score["run"]["id"]
    golden_ok = bool(score["verification"]["passed"])
    release = {k for ks in release_shapes.values() for k in ks if all(k in v for v in release_shapes.values())}
    release_ops = {str(op): sorted(int(k) for k in ks) for op, ks in release_shapes.items()}
    transitions: list[dict[str, Any]] = []
    at = now()
    judging = judged_under(score)
    for k, shape in sorted(score["shapes"].items(), key=lambda kv: int(kv[0])):
        k_int = int(k)
        if k_int in release:
            continue
        key = entry_key(fp, device, profile, identity, k_int)
        entry = book["entries"].get(key)
        if entry is not None:
            last = entry["history"][-1]
            if any(e["run_id"] == run_id for e in entry["history"]):
                raise LedgerError(f"shape k={k}: run {run_id} is already in the ledger (event {last['seq']}, packer "
                                  f"{identity}); a score is applied once")
            if run_created <= last["run_created"]:
                raise LedgerError(f"shape k={k}: run {run_id} ({run_created}) is older than the shape's last event "
                                  f"for packer {identity} (run {last['run_id']}, {last['run_created']}): a replayed "
                                  "score cannot rewrite history")
        else:
            entry = {"fingerprint": fp, "device_kind": device, "numerics_profile": profile, "packer_identity": identity,
                     "shape": k_int, "state": CANDIDATE, "revoked_by": None, "history": []}
        reasons = list(shape["reasons"])
        if laws_block:
            reasons.insert(0, laws_block)
        if not golden_ok:
            reasons.append(f"the run's exact lane did not reproduce golden {score['golden']['id']} "
                           f"({score['verification']['status']}): nothing may be promoted")
        passed = shape["verdict"] == "pass" and golden_ok and laws_block is None
        before = entry["state"]
        if passed:
            entry["state"], entry["revoked_by"] = PROMOTED, None
        elif before == PROMOTED:
            entry["state"], entry["revoked_by"] = REVOKED, run_id
        entry.update(release=score["release"], release_ops=release_ops,
                     numerics=(score["numerics"] or {}).get("in_force") or {})
        entry["history"].append({"seq": seq, "at": at, "run_id": run_id, "run_created": run_created,
                                 "score_digest": score["digest"], "golden_id": score["golden"]["id"],
                                 "release": score["release"], "verdict": "pass" if passed else "fail",
                                 "state": entry["state"], "reasons": reasons, "evidence": _evidence(score, k, laws),
                                 "judged_under": judging})
        book["entries"][key] = entry
        transitions.append({"shape": k_int, "packer": identity, "from": before, "to": entry["state"],
                            "run_id": run_id, "passed": passed, "reasons": reasons})
    book["seq"], book["updated"] = seq, at
    return seal({k: v for k, v in book.items() if k != "ledger_sha256"}, "ledger_sha256"), transitions


def _evidence(score: dict[str, Any], k: str, laws: dict[str, Any]) -> dict[str, Any]:
    shape = score["shapes"][k]
    tolerances = score.get("tolerances") or {}
    return {
        "golden_id": score["golden"]["id"],
        "mode": score["mode"],
        "tolerance_mode": tolerance_mode(tolerances),
        "tolerances": tolerances,
        "corpus_blocks": score["corpus"]["blocks"],
        "requests": shape.get("requests"),
        "laws": laws,
        "ops": {op: {"metrics": {m: v["metrics"].get(m) for m in ("max_abs", "min_cosine", "flips", "rows")
                                 if m in v["metrics"]},
                     "failed_checks": [c["metric"] for c in v["checks"] if c["ok"] is False]}
                for op, v in shape["ops"].items()},
        "speedup": (score.get("throughput", {}).get(k) or {}).get("speedup"),
    }


def derive_manifest(ledger: dict[str, Any], release_shapes: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """The promoted-shapes manifest of ``ledger`` (sealed, bound to the ledger's commit).

    A profile's release shapes are those its entries were last judged under (each entry records
    them), so every reader can re-derive the manifest from the ledger alone; ``release_shapes`` is
    only a fallback for entries without them."""
    models: dict[str, dict[str, Any]] = {}
    newest: dict[tuple[str, str, str], int] = {}
    for entry in sorted(ledger["entries"].values(), key=lambda e: (e["fingerprint"], e["device_kind"],
                                                                   e["numerics_profile"], e["packer_identity"],
                                                                   e["shape"])):
        where = (entry["fingerprint"], entry["device_kind"], entry["numerics_profile"])
        profile = models.setdefault(entry["fingerprint"], {"devices": {}})["devices"].setdefault(
            entry["device_kind"], {"profiles": {}})["profiles"].setdefault(
            entry["numerics_profile"], {"numerics": {}, "release_ops": {}, "packers": {}})
        if entry["history"][-1]["seq"] >= newest.get(where, -1):  # the most recent entry's numerics and release
            newest[where] = entry["history"][-1]["seq"]
            profile["numerics"] = entry["numerics"]
            profile["release_ops"] = {op: sorted(ks) for op, ks in (entry.get("release_ops") or
                                                                    release_shapes or {}).items()}
        packer = profile["packers"].setdefault(entry["packer_identity"], {"promoted": {}, "evidence": {}})
        if entry["state"] == PROMOTED:
            last = entry["history"][-1]
            laws = last["evidence"]["laws"]
            packer["promoted"][entry["shape"]] = True
            packer["evidence"][str(entry["shape"])] = {
                "run_id": last["run_id"], "golden_id": last["golden_id"], "release": last["release"],
                "promoted_at": last["at"], "corpus_blocks": last["evidence"]["corpus_blocks"],
                "tolerance_mode": last["evidence"]["tolerance_mode"],
                "laws": {key: laws.get(key) for key in ("verdict", "examples", "seed", "harness_version")}}
    for model in models.values():
        for dev in model["devices"].values():
            for profile in dev["profiles"].values():
                for packer in profile["packers"].values():
                    promoted = set(packer.pop("promoted"))
                    packer["ops"] = {op: sorted(set(ks) | promoted) for op, ks in profile["release_ops"].items()}
    return seal({"kind": "harness.promoted-shapes", "format": FORMAT, "generated": now(),
                 "ledger_seq": ledger["seq"], "ledger_sha256": ledger["ledger_sha256"], "models": models},
                "manifest_sha256")


def allowed_shapes(manifest: dict[str, Any]) -> set[tuple[str, str, str, str, str, int]]:
    """Every (fingerprint, device, profile, packer, OP, k) the manifest allows."""
    return {(fp, dev, prof, packer, op, k)
            for fp, m in manifest.get("models", {}).items()
            for dev, d in m.get("devices", {}).items()
            for prof, p in d.get("profiles", {}).items()
            for packer, pk in (p.get("packers") or {}).items()
            for op, ks in pk.get("ops", {}).items() for k in ks}


def manifest_differences(manifest: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    """How ``manifest`` differs from the one derived from its ledger, shape by shape (empty: equal)."""
    if {k: v for k, v in manifest.items() if k not in _NOT_DERIVED} == \
            {k: v for k, v in derived.items() if k not in _NOT_DERIVED}:
        return []
    out = []

    def name(t: tuple[str, str, str, str, str, int]) -> str:
        return f"k={t[5]} for OP {t[4]}, packer {t[3]}, model {t[0][:16]}..., device {t[1]}, profile {t[2]}"

    have, want = allowed_shapes(manifest), allowed_shapes(derived)
    out += [f"lists {name(t)}, which the ledger never promoted" for t in sorted(have - want)]
    out += [f"lacks {name(t)}, which the ledger promoted" for t in sorted(want - have)]
    if not out:
        out.append("its evidence, numerics or ledger commit differ from the ones derived from the ledger")
    return out


def ledger_states(ledger: dict[str, Any], fingerprint: str | None = None, device: str | None = None,
                  profile: str | None = None, packer: str | None = None) -> dict[int, dict[str, Any]]:
    """Current entry per shape (filtered to one model/device/profile/packer if given)."""
    out = {}
    for entry in ledger["entries"].values():
        if fingerprint and entry["fingerprint"] != fingerprint:
            continue
        if device and entry["device_kind"] != device:
            continue
        if profile and entry["numerics_profile"] != profile:
            continue
        if packer and entry["packer_identity"] != packer:
            continue
        out[entry["shape"]] = entry
    return out


def removed_shapes(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Does ``new`` allow fewer shapes anywhere than ``old``? (then it must be written first)"""
    if old is None:
        return False
    return bool(allowed_shapes(old) - allowed_shapes(new))


def may_use(manifest: dict[str, Any], packer: str, k: int, op: str, device: str, fingerprint: str | None = None,
            profile: str | None = None) -> tuple[bool, str]:
    """The engine's question: may ``packer`` send k blocks per call for ``op`` on ``device``?

    Yes only for the release's own shapes or a shape promoted with this very packer's evidence.
    ``fingerprint`` (a prefix is enough) and ``profile`` may be left out when the manifest holds
    only one model / profile on that device; an ambiguous question is refused (LedgerError)."""
    matches = [(fp, prof, p) for fp, m in sorted(manifest["models"].items())
               if fingerprint is None or fp.startswith(fingerprint)
               for dev, d in m["devices"].items() if dev == device
               for prof, p in sorted(d["profiles"].items()) if profile is None or prof == profile]
    asked = (f"model {fingerprint or '(any)'}, device {device}" +
             (f", numerics profile {profile}" if profile else ""))
    if not matches:
        return False, (f"no: the manifest (ledger commit {manifest['ledger_seq']}) has nothing for {asked}: no shape "
                       "is known to be safe there")
    if len(matches) > 1:
        which = "; ".join(f"--fingerprint {fp[:16]} --profile {prof}" for fp, prof, _ in matches)
        raise LedgerError(f"{asked}: {len(matches)} models or numerics profiles match ({which}): say which one")
    fp, prof, p = matches[0]
    where = f"OP {op} on {device} (model {fp[:16]}..., numerics {prof})"
    if k in p["release_ops"].get(op, []):
        return True, f"yes: k={k} is one of the release's own shapes for {where}: every packer may use it"
    mine = p["packers"].get(packer)
    if mine is not None and k in mine["ops"].get(op, []):
        ev = mine["evidence"][str(k)]
        return True, (f"yes: packer {packer} may use k={k} for {where}: promoted {ev['promoted_at']} by run "
                      f"{ev['run_id']} against {ev['golden_id']} ({ev['corpus_blocks']} blocks, "
                      f"{ev['tolerance_mode']}, laws {ev['laws']['verdict']})")
    others = sorted(q for q, pk in p["packers"].items() if q != packer and k in pk["ops"].get(op, []))
    also = f" (it is promoted only for packer(s) {', '.join(others)}: their evidence is not this packer's)" \
        if others else ""
    known = "has no evidence" if mine is None else f"may use only k = {', '.join(map(str, mine['ops'].get(op, [])))}"
    return False, f"no: packer {packer} {known} for {where}; k={k} is not promoted for it{also}"
