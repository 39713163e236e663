"""Schemas of the answers ``harness shapes --json`` and ``harness ledger --json`` print on stdout.

They carry the same facts as the text: which files were read (and how they were found), the
promoted-shapes manifest shown (checked against its ledger or not), the answer to ``--may``, and
the ledger entries a ``ledger`` filter matched. Declared here once so a script reading them has a
documented contract (docs/schemas.md) and the harness never prints a document its own schema refuses.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness.data.schemas.base import OpKey, PackerIdentity, Positive, Strict
from harness.data.schemas.engine_manifest import PromotedShapes
from harness.data.schemas.records import LedgerEntry

FoundBy = Literal["--ledger", "--manifest", "--golden", "search"]


class Located(Strict):
    """Which ledger and manifest were read, and how they were found."""

    ledger: str | None = Field(description="the ledger read (null: only --manifest was given, not checked)")
    manifest: str | None = Field(
        description="the promoted-shapes manifest checked (null: none read; the manifest "
        "shown is derived from the ledger)"
    )
    found_by: FoundBy = Field(
        description="--ledger/--manifest as given; --golden: beside that golden (as nightly "
        "writes them); search: the one ledger found in this folder or ./goldens/"
    )


class MayAnswer(Strict):
    """``--may``: the engine's question for one packer, shape, OP and device, and its answer."""

    packer: PackerIdentity
    k: Positive
    op: OpKey
    device: Annotated[str, Field(min_length=1)]
    fingerprint: str | None
    profile: str | None
    allowed: bool = Field(description="true: exit 0; false: exit 1")
    why: str = Field(description="the line the text answer prints")


class ShapesAnswer(Strict):
    """``harness shapes --json`` (stdout): the manifest shown, where it came from, and ``--may``'s answer."""

    kind: Literal["harness.shapes-answer"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[1]
    files: Located
    checked: bool = Field(
        description="true: the manifest shown is the ledger's own (re-derived, and the manifest "
        "file checked against it); false: a manifest read alone"
    )
    promoted_shapes: PromotedShapes
    may: MayAnswer | None = Field(description="the answer to --may (null without it)")


class HistoryFilter(Strict):
    shape: Positive | None
    model: str | None = Field(description="a fingerprint prefix")
    device: str | None
    packer: str | None


class HistoryAnswer(Strict):
    """``harness ledger --json`` (stdout): the ledger entries the filters match, each with its whole history."""

    kind: Literal["harness.ledger-answer"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[1]
    files: Located
    ledger_seq: int = Field(description="the ledger's commit read")
    filters: HistoryFilter
    entries: list[LedgerEntry] = Field(
        description="sorted by model, device, profile, packer and shape; empty: no entry matches (exit 0, as the text)"
    )
