"""The promotion gate's memory: the ledger of every shape's history, and how a score changes it.
Pure functions on validated, frozen models (a new ledger is built, never edited in place); the
manifest the engine reads is derived from the ledger by :mod:`harness.ledger.promoted_manifest`;
the locked, crash-safe commit of both files is :mod:`harness.ledger.ledger_store`'s.

A shape is promoted for a (model fingerprint, device kind, numerics profile, **packer identity**)
only when a score passed it for every OP, the run's own exact lane reproduced the golden, and the
packing laws held for the very packer the fast lane used (``score.laws``). Evidence for one
packer never promotes, and never un-revokes, a shape for another: the packer is part of the key.
A promoted shape that fails a later run is revoked, naming the run. A score is refused when it
could rewrite history: a run already in the ledger, or a run older than the shape's last event.
Each entry carries its own release (a ledger may hold several models' releases).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal, TypedDict, cast

from harness.base.errors import LedgerError
from harness.base.jsonio import digest
from harness.data.modes import VoiceprintInputs
from harness.data.schemas import entry_key
from harness.data.schemas.base import OpKey, State
from harness.data.schemas.files import LawsVerdict
from harness.data.schemas.laws_file import DescribedPacker
from harness.data.schemas.records import (
    EventEvidence,
    JudgedUnder,
    Ledger,
    LedgerEntry,
    LedgerEvent,
    Override,
    as_written,
)
from harness.data.schemas.results import LaneTiming, Score
from harness.data.shape import Shape
from harness.data.tolerances import Tolerances

FORMAT: Literal[3] = 3
CANDIDATE: State = "candidate"
PROMOTED: State = "promoted"
REVOKED: State = "revoked"


# report.json's ``transitions`` row (TransitionRow), built to be written: "from" is a keyword, hence this form
TransitionJson = TypedDict(
    "TransitionJson",
    {
        "shape": int,
        "packer": str,
        "from": State,
        "to": State,
        "run_id": str,
        "passed": bool,
        "reasons": list[str],
    },
)


@dataclass(frozen=True)
class Transition:
    """A state change apply_score made for one shape and packer: the state before and after, the run that made
    it, whether that run passed and its reasons."""

    shape: int
    packer: str
    before: State
    after: State
    run_id: str
    passed: bool
    reasons: list[str]

    def as_json(self) -> TransitionJson:
        """As the report writes it (report.json's ``transitions``): "from" and "to" name the states."""
        return {
            "shape": self.shape,
            "packer": self.packer,
            "from": self.before,
            "to": self.after,
            "run_id": self.run_id,
            "passed": self.passed,
            "reasons": self.reasons,
        }


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def sealed_ledger(seq: int, updated: str | None, entries: dict[str, LedgerEntry]) -> Ledger:
    """The ledger of these entries, sealed over exactly the JSON it is written as."""
    body = {
        "kind": "harness.ledger",
        "format": FORMAT,
        "seq": seq,
        "updated": updated,
        "entries": {key: as_written(e) for key, e in entries.items()},
    }
    return Ledger(
        kind="harness.ledger", format=FORMAT, seq=seq, updated=updated, entries=entries, ledger_sha256=digest(body)
    )


def empty_ledger() -> Ledger:
    return sealed_ledger(0, None, {})


def packer_of(score: Score) -> tuple[str, LawsVerdict]:
    """The identity of the packer the score's fast lane used, and its laws verdict (the score's schema
    requires the verdict; the identity is checked here)."""
    identity = DescribedPacker.of(score.packer).identity
    if not isinstance(identity, str) or not identity:
        raise LedgerError(
            "the score names no packer identity (score.packer.identity): re-score the run with this "
            "harness version; a shape is promoted only for the packer it was proven with"
        )
    return identity, score.laws


def laws_reason(identity: str, laws: LawsVerdict) -> str | None:
    """Why the laws verdict does not allow a promotion for ``identity`` (None: it does)."""
    if laws.packer_identity != identity:
        return (
            f"the packing laws were judged for packer {laws.packer_identity!r}, not the fast lane's packer "
            f"{identity!r}: nothing may be promoted without that packer's own laws verdict"
        )
    if laws.verdict == "not-judged":
        return (
            f"the packing laws of packer {identity} were not judged in this run (turned off): a packer is "
            "promoted only with its laws held; run the nightly with the laws on"
        )
    if laws.verdict != "hold":
        broken = ", ".join(laws.broken) or "?"
        return (
            f"packer {identity} breaks the packing laws ({broken}; verdict {laws.verdict!r}, "
            f"{laws.examples} examples, seed {laws.seed}): nothing may be promoted for it"
        )
    return None


def tolerance_mode(tolerances: Tolerances) -> str:
    """The score's tolerance mode: one name when every OP was judged in it, else 'op0=...,op1=...'."""
    modes = {"op0": tolerances.op0.mode, "op1": tolerances.op1.mode, "op2": tolerances.op2.mode}
    values = set(modes.values())
    return str(values.pop()) if len(values) == 1 else ",".join(f"{op}={m}" for op, m in modes.items())


def overrides_of(tolerances: Tolerances, voiceprint_inputs: VoiceprintInputs) -> list[Override]:
    """Every judging setting that differs from the harness's built-in default
    (``harness.data.tolerances.Tolerances()``, ``[lanes] voiceprint_inputs = "isolated"``), key by key:
    ``tolerances.op0.mode = bitwise (default tolerance)``, ...

    An override is what was *in force*, whoever set it (``--tolerance``, ``--voiceprint-inputs`` or a
    ``harness.toml`` value): the score records the settings, not their source, and a night judged under
    bitwise limits is that whether a flag or a file asked for it."""
    out: list[Override] = []
    defaults = Tolerances().model_dump(mode="json")
    for op, table in sorted(tolerances.model_dump(mode="json").items()):
        for key, value in sorted(table.items()):
            default = defaults[op].get(key)
            if value != default:
                out.append(Override(key=f"tolerances.{op}.{key}", value=value, default=default))
    if voiceprint_inputs != "isolated":
        out.append(Override(key="lanes.voiceprint_inputs", value=voiceprint_inputs, default="isolated"))
    return out


def judging_overrides(score: Score) -> list[Override]:
    """The overrides the score was judged under (:func:`overrides_of` its tolerances and voiceprint inputs)."""
    return overrides_of(score.tolerances, score.voiceprint_inputs)


def describe_overrides(overrides: list[Override]) -> str:
    """'tolerances.op0.mode = bitwise (default tolerance), ...' (one line)."""
    return ", ".join(f"{o.key} = {o.value} (default {o.default})" for o in overrides)


def overrides_line(score: Score) -> str | None:
    """The report's one line when the score was judged under overrides (None: under the defaults)."""
    found = judging_overrides(score)
    return f"Judged under overrides: {describe_overrides(found)}" if found else None


def judged_under(score: Score) -> JudgedUnder:
    """What a ledger event records of how its score was judged (schema: ``LedgerEvent.judged_under``)."""
    return JudgedUnder(
        tolerance_mode=tolerance_mode(score.tolerances),
        voiceprint_inputs=score.voiceprint_inputs,
        overrides=judging_overrides(score),
    )


def release_shapes_of(release_shapes: dict[str, list[int]]) -> set[int]:
    """The shapes every OP's release uses: they need no promotion, so the ledger records no event (and its
    history no figures) for them."""
    return {k for ks in release_shapes.values() for k in ks if all(k in v for v in release_shapes.values())}


def apply_score(
    ledger: Ledger, score: Score, run_created: str, release_shapes: dict[str, list[int]]
) -> tuple[Ledger, list[Transition]]:
    """A new ledger with one (already verified) score applied, and the state changes it made (``ledger``
    itself is frozen and unchanged).

    Refuses, naming the shape, a run already in a shape's history and a run older than a shape's
    last event; refuses (LedgerError) a score without a packer identity. Shapes the release itself
    uses need no promotion and are not recorded."""
    identity, laws = packer_of(score)
    laws_block = laws_reason(identity, laws)
    seq = ledger.seq + 1
    run_id = score.run.id
    golden_ok = score.verification.passed
    release = release_shapes_of(release_shapes)
    release_ops = {cast(OpKey, str(op)): sorted(int(k) for k in ks) for op, ks in release_shapes.items()}
    entries = dict(ledger.entries)
    transitions: list[Transition] = []
    at = now()
    judging = judged_under(score)
    for k, shape in sorted(score.shapes.items(), key=lambda kv: Shape(kv[0])):
        k_int = Shape(k)
        if k_int in release:
            continue
        key = entry_key(score.fingerprint, score.device_kind, score.numerics_profile, identity, k_int)
        entry = entries.get(key)
        if entry is not None:
            last = entry.history[-1]
            if any(e.run_id == run_id for e in entry.history):
                raise LedgerError(
                    f"shape k={k}: run {run_id} is already in the ledger (event {last.seq}, packer "
                    f"{identity}); a score is applied once"
                )
            if run_created <= last.run_created:
                raise LedgerError(
                    f"shape k={k}: run {run_id} ({run_created}) is older than the shape's last event "
                    f"for packer {identity} (run {last.run_id}, {last.run_created}): a replayed "
                    "score cannot rewrite history"
                )
        reasons = list(shape.reasons)
        if laws_block:
            reasons.insert(0, laws_block)
        if not golden_ok:
            reasons.append(
                f"the run's exact lane did not reproduce golden {score.golden.id} "
                f"({score.verification.status}): nothing may be promoted"
            )
        passed = shape.verdict == "pass" and golden_ok and laws_block is None
        before = entry.state if entry is not None else CANDIDATE
        after, revoked_by = before, entry.revoked_by if entry is not None else None
        # revoked_by is written when the state is set; an optional key its file did not have stays out otherwise
        keep_out = entry is not None and "revoked_by" not in entry.model_fields_set
        if passed:
            after, revoked_by, keep_out = PROMOTED, None, False
        elif before == PROMOTED:
            after, revoked_by, keep_out = REVOKED, run_id, False
        event = LedgerEvent(
            seq=seq,
            at=at,
            run_id=run_id,
            run_created=run_created,
            score_digest=score.digest,
            golden_id=score.golden.id,
            release=score.release,
            verdict="pass" if passed else "fail",
            state=after,
            reasons=reasons,
            evidence=_evidence(score, k, laws),
            judged_under=judging,
        )
        entries[key] = LedgerEntry(
            fingerprint=score.fingerprint,
            device_kind=score.device_kind,
            numerics_profile=score.numerics_profile,
            packer_identity=identity,
            release=score.release,
            release_ops=release_ops,
            numerics=score.numerics.in_force,  # validated into the entry's own copy
            shape=k_int,
            state=after,
            history=[*(entry.history if entry is not None else []), event],
            **({} if keep_out else {"revoked_by": revoked_by}),
        )
        transitions.append(Transition(k_int, identity, before, after, run_id, passed, reasons))
    return sealed_ledger(seq, at, entries), transitions


def _evidence(score: Score, k: str, laws: LawsVerdict) -> EventEvidence:
    """A ledger event's evidence: the figures behind the verdict."""
    shape = score.shapes[k]
    lane = score.throughput.get(k)  # the lane's summary as written; read typed below
    timing = LaneTiming.model_validate(lane) if isinstance(lane, dict) else None
    evidence = {
        "golden_id": score.golden.id,
        "mode": score.voiceprint_inputs,
        "tolerance_mode": tolerance_mode(score.tolerances),
        "tolerances": score.tolerances.model_dump(mode="json"),
        "corpus_blocks": score.corpus.blocks,
        "requests": shape.requests.model_dump(mode="json"),
        "laws": laws.model_dump(mode="json"),
        "ops": {
            op: {
                "metrics": {m: v.metrics.get(m) for m in ("max_abs", "min_cosine", "flips", "rows") if m in v.metrics},
                "failed_checks": [c.metric for c in v.checks if c.ok is False],
            }
            for op, v in shape.ops.items()
        },
        "speedup": timing.speedup if timing is not None else None,
    }
    return EventEvidence.model_validate(evidence)


def ledger_states(
    ledger: Ledger,
    fingerprint: str | None = None,
    device: str | None = None,
    profile: str | None = None,
    packer: str | None = None,
) -> dict[int, LedgerEntry]:
    """Current entry per shape (filtered to one model/device/profile/packer if given)."""
    out: dict[int, LedgerEntry] = {}  # by shape (a Shape is its number)
    for entry in ledger.entries.values():
        if fingerprint and entry.fingerprint != fingerprint:
            continue
        if device and entry.device_kind != device:
            continue
        if profile and entry.numerics_profile != profile:
            continue
        if packer and entry.packer_identity != packer:
            continue
        out[entry.shape] = entry
    return out
