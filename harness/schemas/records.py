"""Schemas of the promotion record: the ledger and the promoted-shapes manifest the engine reads."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.schemas.base import (
    Count,
    GoldenId,
    OpKey,
    Positive,
    SafeName,
    Sha256,
    ShapeKey,
    State,
    Strict,
    Timestamp,
    Verdict,
)


class LedgerEvent(Strict):
    seq: Positive
    at: Timestamp
    run_id: SafeName
    run_created: Timestamp
    score_digest: Sha256
    golden_id: GoldenId
    verdict: Verdict
    state: State
    reasons: list[str]
    evidence: dict[str, Any]


class LedgerEntry(Strict):
    fingerprint: Annotated[str, Field(min_length=1)]
    device_kind: Annotated[str, Field(min_length=1)]
    numerics_profile: Annotated[str, Field(min_length=1)]
    numerics: dict[str, Any]
    shape: Annotated[int, Field(ge=2)]
    state: State
    revoked_by: SafeName | None = None
    history: Annotated[list[LedgerEvent], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> LedgerEntry:
        last = self.history[-1]
        if last.state != self.state:
            raise ValueError(f"state {self.state!r} is not its last event's {last.state!r}")
        if self.state == "promoted" and last.verdict != "pass":
            raise ValueError("promoted, but its last event did not pass")
        if self.state == "revoked" and self.revoked_by is None:
            raise ValueError("revoked without revoked_by")
        seqs = [e.seq for e in self.history]
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            raise ValueError("history is not in commit order")
        return self


class Ledger(Strict):
    """``ledger.json``: every shape's history per (model, device kind, numerics profile)."""

    kind: Literal["harness.ledger"]
    format: Literal[2]
    seq: Count = Field(description="commits so far; every event carries the commit it was made in")
    updated: Timestamp | None
    release: str | None
    entries: dict[str, LedgerEntry]
    ledger_sha256: Sha256

    @model_validator(mode="after")
    def _keys(self) -> Ledger:
        for key, e in self.entries.items():
            want = entry_key(e.fingerprint, e.device_kind, e.numerics_profile, e.shape)
            if key != want:
                raise ValueError(f"entry {key!r} is filed under the wrong key (expected {want!r})")
            if e.history[-1].seq > self.seq:
                raise ValueError(f"entry {key!r} has an event from commit {e.history[-1].seq}, after the ledger's "
                                 f"{self.seq}")
        return self


def entry_key(fingerprint: str, device_kind: str, profile: str, shape: int) -> str:
    return f"{fingerprint}|{device_kind}|{profile}|{shape}"


class Evidence(Strict):
    run_id: SafeName
    golden_id: GoldenId
    promoted_at: Timestamp
    corpus_blocks: Positive


class ProfileShapes(Strict):
    numerics: dict[str, Any]
    release: str | None
    ops: dict[OpKey, list[Positive]]
    evidence: dict[ShapeKey, Evidence]


class DeviceShapes(Strict):
    profiles: dict[str, ProfileShapes]


class ModelShapes(Strict):
    devices: dict[str, DeviceShapes]


class PromotedShapes(Strict):
    """``promoted-shapes.json``: what the engine may use, derived from the ledger, never edited."""

    kind: Literal["harness.promoted-shapes"]
    format: Literal[2]
    generated: Timestamp
    ledger_seq: Count
    ledger_sha256: Sha256
    models: dict[str, ModelShapes]
    manifest_sha256: Sha256

