"""A typed read view of a verdict's figures: the judges write their figures by name (each judge its own,
:mod:`harness.judging.judges`), and the readers (reproduction, evidence, promotion, the report) take the
figures every judge may give through this view, by attribute, instead of reading the dict by key; the same for
the rows of its worst offenders (:class:`Offender`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class NonFiniteFigures:
    """How many units held a NaN or an infinity where the golden held a finite value, of how many."""

    count: int
    of: int
    unit: str


@dataclass(frozen=True)
class VerdictFigures:
    """The figures a verdict may hold, None where its judge gives none (a segmentation verdict has no
    ``min_cosine``, a voiceprint verdict no ``flips``; the exact lane's reproduction holds only ``outcome``)."""

    bitwise: bool | None = None
    max_abs: float | None = None
    max_abs_finite: float | None = None
    min_cosine: float | None = None
    flips: int | None = None
    non_finite: int | None = None
    windows: int | None = None
    rows: int | None = None
    judged_rows: int | None = None
    audio_frames: int | None = None
    differing_rows: int | None = None
    figures_non_finite: NonFiniteFigures | None = None

    @classmethod
    def of(cls, metrics: Mapping[str, Any]) -> VerdictFigures:
        """The view of a verdict's ``metrics`` as the judge wrote them (a name it does not give is None)."""
        values = {f.name: metrics.get(f.name) for f in fields(cls)}
        nf = values.pop(NON_FINITE_FIELD)
        return cls(**values, figures_non_finite=NonFiniteFigures(**nf) if nf else None)


@dataclass(frozen=True)
class Offender:
    """One of a verdict's worst offenders (its ``failing`` rows, each judge's own): where it is and what it
    measured, None where the judge's row does not say (OP 0's rows name no window or speaker)."""

    block: str | None = None
    window: int | None = None
    speaker: int | None = None
    metric: str | None = None
    value: float | int | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Offender:
        """The view of one ``failing`` row as the judge wrote it (a name it does not give is None)."""
        return cls(**{f.name: row.get(f.name) for f in fields(cls)})


NON_FINITE_FIELD = "figures_non_finite"  # keys: the score file's name of the non-finite figures
