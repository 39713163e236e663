"""Schemas of the promotion record: the ledger, and the journal that makes a commit of the ledger and the
engine's manifest (:mod:`harness.data.schemas.engine_manifest`) one step."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from harness.data.modes import VoiceprintInputs, VoiceprintInputsField
from harness.data.schemas.base import (
    Count,
    Frozen,
    GoldenId,
    Open,
    OpKey,
    OptionalKeys,
    PackerIdentity,
    Positive,
    ReleaseOps,
    SafeName,
    Sha256,
    State,
    Strict,
    Timestamp,
    Verdict,
)
from harness.data.schemas.engine_manifest import PromotedShapes
from harness.data.schemas.machine import InForce
from harness.data.shape import ShapeInt


class Override(Frozen):
    """A judging setting in force that is not the built-in default (``harness.ledger.promotion.judging_overrides``)."""

    key: Annotated[str, Field(pattern=r"^(tolerances\.op[012]\.[a-z][a-z0-9_]{0,63}|lanes\.voiceprint_inputs)$")] = (
        Field(description="the setting, named as in harness.toml: tolerances.op<N>.<key> or lanes.voiceprint_inputs")
    )
    value: Any = Field(
        description="the value in force (from --tolerance, --set lanes.voiceprint_inputs=... or harness.toml)"
    )
    default: Any = Field(description="the harness's built-in default for it")

    @model_validator(mode="after")
    def _differs(self) -> Override:
        if self.value == self.default:
            raise ValueError(f"{self.key}: value {self.value!r} is its default: not an override")
        return self


class JudgedUnder(Frozen):
    """How an event's score was judged: its tolerance mode and every override in force."""

    tolerance_mode: Annotated[str, Field(min_length=1)] = Field(description="one mode, or op0=...,op1=...,op2=...")
    voiceprint_inputs: VoiceprintInputsField = Field(description="the score's voiceprint inputs ([lanes])")
    overrides: list[Override] = Field(description="empty: judged under the built-in defaults")

    @model_validator(mode="after")
    def _consistent(self) -> JudgedUnder:
        keys = [o.key for o in self.overrides]
        if len(set(keys)) != len(keys):
            raise ValueError(f"an override is listed twice in {keys}")
        if (self.voiceprint_inputs != VoiceprintInputs.ISOLATED) != ("lanes.voiceprint_inputs" in keys):
            raise ValueError(f"voiceprint_inputs {self.voiceprint_inputs!r} disagrees with the overrides {keys}")
        return self


class EventLaws(OptionalKeys, Open):
    """The packing-laws verdict in an event's evidence (the score's ``laws``): what the manifest copies of it is
    typed; an event written before a key existed lacks it; the other keys (broken, laws, packer_identity) kept."""

    optional_keys: ClassVar[frozenset[str]] = frozenset({"verdict", "examples", "seed", "harness_version"})

    verdict: str | None = Field(None, description="hold, broken or not-judged")
    examples: Count | None = Field(None, description="examples per law")
    seed: int | None = Field(None, description="the seed the examples were drawn with")
    harness_version: str | None = Field(None, description="the harness that judged")


class EventOp(OptionalKeys, Open):
    """One OP's figures behind an event's verdict."""

    optional_keys: ClassVar[frozenset[str]] = frozenset({"metrics", "failed_checks"})

    # a figure by its name in the score (max_abs, min_cosine, flips, rows): the judge's own, int or float as written
    metrics: dict[str, int | float | None] = Field(default_factory=dict, description="the OP's headline figures")
    failed_checks: list[str] = Field(default_factory=list, description="the metrics whose checks failed")


class EventEvidence(OptionalKeys, Open):
    """The figures behind an event's verdict (``harness.ledger.promotion``). Every key is absent from an event
    written before it was recorded, and stays absent when the ledger is written again; the tolerances and
    request counts (the score's own objects) are kept as written."""

    optional_keys: ClassVar[frozenset[str]] = frozenset(
        {"golden_id", "mode", "tolerance_mode", "corpus_blocks", "laws", "ops", "speedup"}
    )

    golden_id: str | None = Field(None, description="the golden the score was judged against")
    mode: str | None = Field(None, description="the lanes' voiceprint inputs")
    tolerance_mode: str | None = Field(None, description="the tolerance mode judged under")
    corpus_blocks: Positive | None = Field(None, description="blocks of the corpus judged")
    laws: EventLaws | None = Field(None, description="the packing-laws verdict of the packer")
    ops: dict[OpKey, EventOp] = Field(default_factory=dict, description="per OP: its figures and failed checks")
    speedup: int | float | None = Field(None, description="the shape's speed-up over the exact lane (None: unknown)")


class LedgerEvent(Frozen):
    seq: Positive
    at: Timestamp
    run_id: SafeName
    run_created: Timestamp
    score_digest: Sha256
    golden_id: GoldenId
    release: SafeName = Field(description="the release of the score this event applied")
    verdict: Verdict
    state: State
    reasons: list[str]
    evidence: EventEvidence = Field(
        description="metrics, tolerance mode and tolerances, request counts per shape, "
        "the packing-laws verdict of the packer"
    )
    judged_under: JudgedUnder | None = Field(
        None,
        description="the tolerance mode and every override the score was "
        "judged under; absent or null (events written before it was recorded): "
        "not recorded",
    )


class LedgerEntry(Frozen):
    fingerprint: Annotated[str, Field(min_length=1)]
    device_kind: Annotated[str, Field(min_length=1)]
    numerics_profile: Annotated[str, Field(min_length=1)]
    packer_identity: PackerIdentity = Field(description="the packer this shape was judged with (score.packer.identity)")
    release: SafeName = Field(description="the release of this entry's last event (never the ledger's)")
    release_ops: ReleaseOps = Field(description="the release's own shapes per OP when last judged")
    numerics: InForce = Field(description="the numeric settings in force when last judged (score.numerics.in_force)")
    shape: ShapeInt = Field(
        description="k >= 2: the release's own shape (k = 1) is never promoted", json_schema_extra={"minimum": 2}
    )
    state: State
    revoked_by: SafeName | None = None
    history: Annotated[list[LedgerEvent], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> LedgerEntry:
        if self.shape < 2:
            raise ValueError(f"shape {self.shape}: a release shape (k = 1) is never promoted")
        last = self.history[-1]
        if last.state != self.state:
            raise ValueError(f"state {self.state!r} is not its last event's {last.state!r}")
        if self.state == "promoted" and last.verdict != "pass":
            raise ValueError("promoted, but its last event did not pass")
        if self.state == "promoted":  # what the manifest is derived from: a resealed edit must not reach a KeyError
            given = last.evidence.model_fields_set
            missing = [k for k in ("corpus_blocks", "tolerance_mode", "laws") if k not in given]
            if missing or last.evidence.laws is None:
                raise ValueError(f"promoted, but its last event's evidence lacks {missing or ['laws as an object']}")
        if self.state == "revoked" and self.revoked_by is None:
            raise ValueError("revoked without revoked_by")
        seqs = [e.seq for e in self.history]
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            raise ValueError("history is not in commit order")
        return self


class Ledger(Frozen):
    """``ledger.json``: every shape's history per (model, device kind, numerics profile, packer identity)."""

    kind: Literal["harness.ledger"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[3]
    seq: Count = Field(description="commits so far; every event carries the commit it was made in")
    updated: Timestamp | None
    entries: dict[str, LedgerEntry]
    ledger_sha256: Sha256

    @model_validator(mode="after")
    def _keys(self) -> Ledger:
        for key, e in self.entries.items():
            want = entry_key(e.fingerprint, e.device_kind, e.numerics_profile, e.packer_identity, e.shape)
            if key != want:
                raise ValueError(f"entry {key!r} is filed under the wrong key (expected {want!r})")
            if e.history[-1].seq > self.seq:
                raise ValueError(
                    f"entry {key!r} has an event from commit {e.history[-1].seq}, after the ledger's {self.seq}"
                )
        return self


def entry_key(fingerprint: str, device_kind: str, profile: str, packer: str, shape: int) -> str:
    return f"{fingerprint}|{device_kind}|{profile}|{packer}|{shape}"


# JSON being built byte-exactly for a file (and sealed over its own keys): pydantic's model_dump
def as_written(record: BaseModel) -> dict[str, Any]:
    """The JSON object a record is written (and sealed) as: exactly the keys it was read or built with.

    Why not a plain ``model_dump``: an optional key absent from a file (``judged_under`` in events
    written before it was recorded) must stay absent, or rewriting an unchanged ledger would change
    its bytes and break its seal (``ledger_sha256`` is over the file's own keys)."""
    return record.model_dump(mode="json", exclude_unset=True)


class Journal(Strict):
    """``.<ledger>.journal``: a commit's point of no return: both new files and the paths they are for."""

    kind: Literal["harness.ledger-journal"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[1]
    ledger_path: Annotated[str, Field(pattern=r"^/")] = Field(description="absolute, resolved path of the ledger")
    manifest_path: Annotated[str, Field(pattern=r"^/")] = Field(description="absolute, resolved path of the manifest")
    manifest_first: bool
    ledger: Ledger
    manifest: PromotedShapes
    journal_sha256: Sha256


# one folder name in the goldens folder (a release name and its .regen-/.history- suffix), never a path
FolderName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")]


class AdoptionJournal(Strict):
    """``goldens/.NAME.adopt.json``: an adoption's point of no return (``harness golden adopt``): which folder
    becomes NAME, where the old golden goes, and both goldens' ids, so the next adopt finishes it. Sealed: a
    journal edited by hand (its ids swapped, another source) would move the wrong golden, so it is refused."""

    source: FolderName = Field(description="the NAME.regen-<time> (or NAME.history-<time>) folder being adopted")
    history: FolderName = Field(description="the name the replaced golden is kept under")
    old_golden_id: GoldenId
    new_golden_id: GoldenId
    journal_sha256: Sha256 = Field(description="sha256 of the journal's canonical JSON without this key (its seal)")
