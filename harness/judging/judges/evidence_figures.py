"""The figures the judges' evidence keeps, as types: what an OP's evidence counts while batches come, and
what it hands the verdict (its totals and worst offenders).

A verdict's free-form parts (the score file's ``metrics`` and ``failing``) are these dataclasses' fields in
order (:func:`harness.judging.judges.judge_base.op_verdict`): a field's name and place are the file's key
and its place, so a new field goes where the file should hold it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.judging.judges.judge_base import NonFiniteFigures
from harness.judging.judges.voiceprint_rows import _Worst

# -- OP 0 (harness.judging.judges.segmentation_evidence) ------------------------------------------------------


@dataclass
class FlipCounts:
    """OP 0's flipped audio frames so far, by the golden's margin (near-tie or confident), and the speaker
    activity changes those flips make (mask flips)."""

    near: int = 0
    confident: int = 0
    mask_near: int = 0
    mask_confident: int = 0


@dataclass(frozen=True)
class SegmentationTotals:
    """OP 0's figures over the corpus: the checks read them by name, and the score file holds them as the
    verdict's ``metrics`` (its fields in order: the file's keys, :func:`op_verdict`)."""

    blocks: int
    windows: int
    elements: int
    audio_frames: int
    max_abs: float | None
    max_abs_finite: float
    mean_abs: float | None
    mean_abs_finite: float
    max_ulp: int | None
    max_ulp_finite: int
    fraction_differing: float
    differing_elements: int
    non_finite: int
    non_finite_windows: int
    figures_non_finite: NonFiniteFigures
    argmax_flips_near_tie: int
    argmax_flips_confident: int
    mask_flips_near_tie: int
    mask_flips_confident: int
    worst_flip_margin: float
    flips: int
    flip_rate_upper95: float
    bitwise: bool


@dataclass(frozen=True)
class WorstBlock:
    """One of OP 0's worst offenders for the report (the score file's ``failing``, fields in its key order)."""

    block: str
    metric: str
    value: float | int


# -- OP 1 and OP 2 (harness.judging.judges.voiceprint_evidence) ----------------------------------------------


@dataclass
class RowCauses:
    """Rows of one kind (missing, extra, changed) left out of the metric comparison, by what explains them:
    nothing, a confident OP 0 flip of their window, or near-tie flips only."""

    unexplained: int = 0
    confident: int = 0
    near_tie: int = 0

    def count(self, near: int, confident: int, chained: bool) -> str:
        """Count one row whose window had ``near`` near-tie and ``confident`` confident flips; returns its
        cause. Only chained mode explains rows by flips."""
        if not chained or (not near and not confident):
            self.unexplained += 1
            return "unexplained"
        if confident:
            self.confident += 1
            return "confident"
        self.near_tie += 1
        return "near_tie"

    def total(self) -> int:
        return self.unexplained + self.confident + self.near_tie


@dataclass
class WorstRows:
    """The worst value of each embedding metric, where it was, and the rows over its limit."""

    min_cosine: _Worst
    max_abs: _Worst
    max_rel_l2: _Worst
    max_ulp: _Worst


@dataclass(frozen=True)
class VoiceprintTotals:
    """A voiceprint OP's figures over the corpus: the checks read them by name, and the score file holds them
    as the verdict's ``metrics`` (its fields in order: the file's keys, :func:`op_verdict`)."""

    rows: int
    golden_rows: int
    judged_rows: int
    missing_rows: int
    extra_rows: int
    inputs_differ: int
    missing_unexplained: int
    missing_confident: int
    missing_near_tie: int
    extra_unexplained: int
    extra_confident: int
    extra_near_tie: int
    changed_unexplained: int
    changed_confident: int
    changed_near_tie: int
    max_abs: float | None
    max_ulp: int | None
    min_cosine: float | None
    max_rel_l2: float | None
    max_abs_finite: float
    max_ulp_finite: int
    min_cosine_finite: float
    max_rel_l2_finite: float
    fraction_differing: float
    differing_rows: int
    non_finite: int
    figures_non_finite: NonFiniteFigures
    failed_rows: int
    bitwise: bool


@dataclass(frozen=True)
class WorstRow:
    """One of a voiceprint OP's worst rows for the report (the score file's ``failing``, fields in its key
    order; ``value`` None: non-finite)."""

    block: str
    window: int
    speaker: int
    metric: str
    value: float | None
