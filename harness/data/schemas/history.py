"""Schemas of the history store beside the ledger (``<ledger>.history/<seq:08d>.parquet``) and of
``harness history --json``.

One Parquet part per ledger commit that carried a score, one row per gated check of that score
(shape, OP, metric whose relation is not "report"). The row is declared once here: the store's
Arrow schema is derived from it (:mod:`harness.ledger.history_store`) and every row read back is checked
with it, so a trend, a shrinking margin or a night-to-night comparison is read from figures the
harness itself judged, never from a hand-edited table.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness.data.schemas.answers import Located
from harness.data.schemas.base import (
    Count,
    Frozen,
    GoldenId,
    Number,
    PackerIdentity,
    Positive,
    SafeName,
    Strict,
    Timestamp,
    Verdict,
)
from harness.data.shape import ShapeInt

HISTORY_KIND = "harness.history-part"  # the part's Parquet key-value metadata "harness.kind"
HISTORY_FORMAT = 1


class HistoryRow(Frozen):
    """One gated check of one shape and OP of one promoted score, as the history part holds it."""

    seq: Positive = Field(description="the ledger commit that carried the score (the part's file name)")
    created: Timestamp = Field(description="the score's created")
    run_id: SafeName
    release: SafeName
    golden_id: GoldenId
    fingerprint: Annotated[str, Field(min_length=1)]
    device_kind: str
    numerics_profile: str
    packer_identity: PackerIdentity = Field(description="score.packer.identity")
    shape: ShapeInt
    op: Literal[0, 1, 2]
    metric: Annotated[str, Field(min_length=1)]
    limit: str = Field(description="the limits key `allowed` came from; empty: a fixed 0")
    observed: Number | None = Field(
        description="the check's observed figure as a float (a boolean as 0/1); None: non-finite"
    )
    allowed: Number | None = Field(description="the check's limit as a float (a boolean as 0/1); None: not a number")
    margin: Number | None = Field(
        description="how much of the limit is used: observed/allowed for a '<=' check "
        "with allowed > 0; (1-observed)/(1-allowed) for a '>=' check "
        "(cosine) with allowed < 1; under 1 holds, 1 is at the limit. None "
        "where not defined: '==' checks, a zero '<=' limit, a '>=' limit of "
        "1 or more, a non-finite observation"
    )
    ok: bool
    verdict: Verdict = Field(description="the shape's verdict in the score")


class SeriesFilter(Strict):
    shape: Positive
    op: Literal[0, 1, 2]
    metric: str | None
    device: str | None
    profile: str | None
    packer: str | None


class SeriesAnswer(Strict):
    """``harness history --json`` (stdout): the committed history rows the filters match, ordered by seq."""

    kind: Literal["harness.history-answer"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[1]
    files: Located
    ledger_seq: Count = Field(description="the ledger's commit read: parts after it are not committed and not shown")
    filters: SeriesFilter
    rows: list[HistoryRow] = Field(description="ordered by seq, then metric; empty: nothing matches (exit 0)")
