"""The sign-off report's "Repeats" section: each shape's own noise over ``--repeats N`` runs, beside the release's.

The figures are the score's (``ShapeScore.repeats``, :mod:`harness.evidence.repeat_evidence`); nothing is judged
here. Per shape and OP, one row: how many runs, how many blocks and windows/rows differ between them,
the noise (the golden floor's figures: max abs, max ulp, flips, min cosine), the release's own floor
beside it, whether the shape is "as reproducible as the release", and whether the repeats held the limits
of the OP's tolerance mode (flagged) or not (refused). The section exists only when
some shape has repeats, so a report of a run without them is the same file as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.data.ops import Op
from harness.data.schemas.files import Floor
from harness.data.schemas.results import Score
from harness.judging.judges import floor_figures, judge_for


@dataclass(frozen=True)
class RepeatRow:
    """One shape and OP over its repeats: how many blocks and units differ between the runs, the noise beside the
    release's floor (each as the score's ``Floor``, and in words), and what followed."""

    shape: int
    op: int
    repeats: int
    lanes: list[str]
    tolerance_mode: str
    gated: bool
    refused: bool
    blocks: int
    blocks_differing: int
    fraction_blocks_differing: float
    unit: str
    units: int
    units_differing: int
    first_differing_block: str | None
    noise: Floor
    noise_text: str
    release_floor: Floor | None
    release_floor_text: str
    as_reproducible_as_release: bool
    sentence: str


@dataclass(frozen=True)
class RepeatFacts:
    """The section (report.json's ``repeats``): a row per shape and OP, and the repeats' warnings."""

    rows: list[RepeatRow]
    warnings: list[str]


def repeat_facts(score: Score) -> RepeatFacts | None:
    """The section; None when no shape was repeated."""
    rows: list[RepeatRow] = []
    warnings: list[str] = []
    for k in sorted(score.shapes, key=int):
        ev = score.shapes[k].repeats
        if ev is None:
            continue
        warnings += ev.warnings
        for op in sorted(ev.ops):
            o = ev.ops[op]
            refused = o.gated and any(not p.passed for p in o.pairs)
            rows.append(
                RepeatRow(
                    shape=int(k),
                    op=o.op,
                    repeats=ev.repeats,
                    lanes=list(ev.lanes),
                    tolerance_mode=o.tolerance_mode,
                    gated=o.gated,
                    refused=refused,
                    blocks=o.blocks,
                    blocks_differing=o.blocks_differing,
                    fraction_blocks_differing=o.blocks_differing / o.blocks if o.blocks else 0.0,
                    unit=o.unit,
                    units=o.units,
                    units_differing=o.units_differing,
                    first_differing_block=o.first_differing_block,
                    noise=o.noise,
                    noise_text=floor_text(o.op, o.noise),
                    release_floor=o.release_floor,
                    release_floor_text=floor_text(o.op, o.release_floor),
                    as_reproducible_as_release=o.as_reproducible_as_release,
                    sentence=sentence(int(k), o.op, o.as_reproducible_as_release, o.tolerance_mode, refused),
                )
            )
    if not rows:
        return None
    return RepeatFacts(rows, warnings)


def sentence(k: int, op: int, as_release: bool, mode: str, refused: bool) -> str:
    """The row's answer in words: "k=8 OP 0 is as reproducible as the release" or not, and what followed."""
    if as_release:
        return f"k={k} OP {op} is as reproducible as the release"
    then = "refused" if refused else f"within the limits of {mode} mode: flagged, not refused"
    return f"k={k} OP {op} is NOT as reproducible as the release: {then}"


def floor_text(op: int, f: Floor | None) -> str:
    """A floor (or a lane's noise) in one cell: "bitwise", or its figures (the OP's judge's)."""
    return floor_figures.words(judge_for(Op(op)).floor_figures, None if f is None else f.model_dump(), report=True)
