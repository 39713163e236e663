"""Schema of the engine's manifest, ``promoted-shapes.json``: the shapes the engine may use, per model, device,
numerics profile and packer, derived from the ledger and never edited (the golden's and a run's own manifests
are :mod:`harness.data.schemas.files`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.data.schemas.base import (
    Count,
    Frozen,
    GoldenId,
    OpKey,
    PackerIdentity,
    Positive,
    ReleaseOps,
    SafeName,
    Sha256,
    ShapeKey,
    Timestamp,
)
from harness.data.schemas.machine import InForce


class LawsEvidence(Frozen):
    verdict: Literal["hold"]  # a Literal type: the one value the file holds here, not a key read
    examples: Count | None
    seed: int | None
    harness_version: str | None


class Evidence(Frozen):
    run_id: SafeName
    golden_id: GoldenId
    release: SafeName
    promoted_at: Timestamp
    corpus_blocks: Positive
    tolerance_mode: str
    laws: LawsEvidence


class PackerShapes(Frozen):
    ops: dict[OpKey, list[Positive]] = Field(
        description="k this packer may use per OP: the release's own and those promoted with this packer's evidence"
    )
    evidence: dict[ShapeKey, Evidence]


class ProfileShapes(Frozen):
    numerics: InForce = Field(description="the numeric settings in force (the ledger entries' numerics)")
    release_ops: ReleaseOps = Field(description="the release's own shapes: every packer may use them")
    packers: dict[PackerIdentity, PackerShapes]


class DeviceShapes(Frozen):
    profiles: dict[str, ProfileShapes]


class ModelShapes(Frozen):
    devices: dict[str, DeviceShapes]


class PromotedShapes(Frozen):
    """``promoted-shapes.json``: what the engine may use, per packer, derived from the ledger, never edited."""

    kind: Literal["harness.promoted-shapes"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[3]
    generated: Timestamp
    ledger_seq: Count
    ledger_sha256: Sha256
    models: dict[str, ModelShapes]
    manifest_sha256: Sha256
