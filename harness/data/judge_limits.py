"""The limits an OP is judged with, one typed model per judge.

A judge (:mod:`harness.judging.judges`) sets them from the OP's tolerance table, its tolerance mode and the
golden's noise floor; its evidence holds the figures to them; a verdict stores them (score.json's
``limits``), and promotion re-derives them from the score's tolerances and compares. Every key is always
present (None where the mode or the sample-size bound sets none), so a model dumps to the very object a
verdict holds. Declared in the data layer, beside the tolerances they are made from, because every file
that records a verdict holds them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from harness.data.modes import ToleranceModeField


class LimitSet(BaseModel):
    """Limits a verdict is judged with, as a typed model: a judge's (:class:`OpLimits`), or those of a kind of
    evidence with checks of its own (harness.evidence.kind). Promotion re-derives them and compares their
    :meth:`document` with what the verdict stores."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def document(self) -> dict[str, object]:
        """The limits as a verdict stores them."""
        return self.model_dump(mode="json")


class OpLimits(LimitSet):
    """What every judge's limits hold: the tolerance mode, whether it asks for every bit, and the
    element-wise bounds (``max_ulp`` None: reported, not gated)."""

    mode: ToleranceModeField
    bitwise: bool
    max_abs: float
    max_ulp: int | None


class SegmentationLimits(OpLimits):
    """OP 0's limits: the log-probabilities' bounds, and how many frames may change class."""

    max_confident_flips: int
    near_tie_margin: float
    max_flip_rate: float | None  # None: the sample-size bound is not applied (a report, not a verdict)


class VoiceprintLimits(OpLimits):
    """OP 1's and OP 2's limits: each row's bounds, and the shares of rows that may fail or change mask."""

    min_cosine: float
    max_rel_l2: float
    max_failed_row_rate: float | None  # None: the sample-size bound is not applied (a report, not a verdict)
    max_mask_changed_row_rate: float
