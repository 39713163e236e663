"""The sign-off report's "Arrangements" section: each shape in other neighbours, other slots, and twice.

The figures are the score's (``ShapeScore.arrangements``, :mod:`harness.evidence.arrangement_evidence`); nothing
is judged here. Per shape and OP, one row: the spread of the figures against the golden across the
arrangements (every lane's value, min and max), whether every arrangement gave each block the plain
lane's answer (OP 0; OP 1/2: how many blocks differ, reported), whether the duplicates' two copies
agreed, and the worst slot; then per shape and OP the
slots themselves. The section exists only when some shape has arrangements (``--arrangements N``,
N >= 2), so a report of a run without them is the same file as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup

from harness.data.schemas.arrangements import slot_label
from harness.data.schemas.results import Score
from reports.numbers import fmt
from reports.plots import FAIL_COLOUR, PASS_COLOUR, _Svg


@dataclass(frozen=True)
class LaneValue:
    """One arrangement lane's figure against the golden (None: non-finite), and as the pages print it."""

    lane: str
    value: float | None
    text: str


@dataclass(frozen=True)
class ArrangementRow:
    """One shape and OP across the arrangements: the spread of the figures against the golden, whether every
    arrangement gave each block the plain lane's answer, whether the duplicates agreed, and the worst slot."""

    shape: int
    op: int
    arrangements: int
    seed: int
    lanes: list[str]
    metric: str
    values: list[LaneValue]
    min: float | None
    max: float | None
    min_text: str
    max_text: str
    spread: dict[str, dict[str, float | None]]
    within_tolerance: bool
    same_in_every_slot: bool | None
    duplicates_agree: bool | None
    blocks_differing_from_plain: int
    worst_slot: str | None
    worst_slot_text: str
    passed: bool


@dataclass(frozen=True)
class SlotRow:
    """One slot of one shape and OP: how often blocks were placed there, how many units differed from the plain
    lane, by how much, and whether it is the worst slot."""

    shape: int
    op: int
    slot: str
    label: str
    placements: int
    units: int
    differing: int
    max_abs: float | None
    max_abs_text: str
    max_ulp: int | None
    worst_block: str | None
    worst: bool


@dataclass(frozen=True)
class ArrangementFacts:
    """The section: a row per shape and OP, every slot of each (the document's rows, shown as they are), and
    the arrangements' reasons."""

    rows: list[ArrangementRow]
    slots: list[SlotRow]
    reasons: list[str]


def arrangement_facts(score: Score) -> ArrangementFacts | None:
    """The section (report.json's ``arrangements``); None when no shape has arrangements."""
    rows: list[ArrangementRow] = []
    slots: list[SlotRow] = []
    reasons: list[str] = []
    for k in sorted(score.shapes, key=int):
        ev = score.shapes[k].arrangements
        if ev is None:
            continue
        reasons += ev.reasons
        for op in sorted(ev.spread):
            spread = {s.metric: s for s in ev.spread[op]}
            first = ev.spread[op][0]
            worst = ev.worst_slot.get(op)
            judged = [lane.same_as_plain[op].passed for lane in ev.lanes.values() if op in lane.same_as_plain]
            same = all(judged) if judged else None  # OP 1/2: not judged against the plain lane (reported)
            moved = sum(
                lane.blocks_differing_from_plain.get(op, 0) for lane in ev.lanes.values() if lane.kind == "shuffled"
            )
            golden = all(lane.ops[op].passed for lane in ev.lanes.values() if op in lane.ops)
            dup = ev.duplicates[op].passed if ev.duplicates is not None and op in ev.duplicates else None
            rows.append(
                ArrangementRow(
                    shape=int(k),
                    op=int(op),
                    arrangements=ev.arrangements,
                    seed=ev.seed,
                    lanes=list(first.values),
                    metric=first.metric,
                    values=[LaneValue(lane, v, fmt(v)) for lane, v in first.values.items()],
                    min=first.min,
                    max=first.max,
                    min_text=fmt(first.min),
                    max_text=fmt(first.max),
                    spread={m: {"min": s.min, "max": s.max} for m, s in spread.items()},
                    within_tolerance=golden,
                    same_in_every_slot=same,
                    duplicates_agree=dup,
                    blocks_differing_from_plain=moved,
                    worst_slot=worst,
                    worst_slot_text=slot_label(worst, int(k)) if worst else "none differs",
                    passed=golden and same is not False and dup is not False,
                )
            )
            for key, s in ev.slots.get(op, {}).items():
                slots.append(
                    SlotRow(
                        shape=int(k),
                        op=int(op),
                        slot=key,
                        label=slot_label(key, int(k)),
                        placements=s.placements,
                        units=s.units,
                        differing=s.differing,
                        max_abs=s.max_abs,
                        max_abs_text=fmt(s.max_abs),
                        max_ulp=s.max_ulp,
                        worst_block=s.worst_block,
                        worst=key == worst,
                    )
                )
    if not rows:
        return None
    return ArrangementFacts(rows, slots, reasons)


def arrangement_images(facts: ArrangementFacts) -> dict[str, Markup]:
    """One inline SVG per OP, "arrangements_<op>": per shape, the max abs of every arrangement lane against the
    golden (a dot each, log axis; exact zeros on the "= 0" line), the spread drawn from min to max."""
    images: dict[str, Markup] = {}
    for op in sorted({r.op for r in facts.rows}):
        rows = [r for r in facts.rows if r.op == op]
        images[f"arrangements_{op}"] = Markup(_spread_svg(op, rows))
    return images


def _spread_svg(op: int, rows: list[ArrangementRow]) -> str:
    width, height, left, bottom, top = 480, 220, 60, 190, 20
    values = [v.value for r in rows for v in r.values if isinstance(v.value, (int, float)) and v.value > 0]
    lo = math.floor(math.log10(min(values))) if values else -8
    hi = math.ceil(math.log10(max(values))) if values else -7
    hi = max(hi, lo + 1)
    zero_y = bottom
    svg = _Svg(width, height, f"OP {op}: max abs against the golden in every arrangement, per shape")

    def y_of(v: float) -> float:
        return (bottom - 18) - (math.log10(v) - lo) / (hi - lo) * (bottom - 18 - top)

    for e in range(lo, hi + 1):
        y = y_of(10.0**e)
        svg.line(left, y, width - 10, y, colour="#d0d7de")
        svg.text(left - 4, y + 3, f"1e{e}", anchor="end")
    svg.line(left, zero_y, width - 10, zero_y, colour="#d0d7de", dash=True)
    svg.text(left - 4, zero_y + 3, "= 0", anchor="end")
    step = (width - 10 - left) / max(len(rows), 1)
    for i, r in enumerate(rows):
        x = left + step * (i + 0.5)
        colour = PASS_COLOUR if r.passed else FAIL_COLOUR
        ys = [y_of(v.value) if isinstance(v.value, (int, float)) and v.value > 0 else zero_y for v in r.values]
        if ys:
            svg.line(x, min(ys), x, max(ys), colour=colour, width=2.0)
        for yy in ys:
            svg.add(f'<circle cx="{x:.1f}" cy="{yy:.1f}" r="3" fill="{colour}"/>')
        svg.text(x, height - 6, f"k={r.shape}")
    svg.text(12, (top + bottom) / 2, f"OP {op} max abs vs golden", rotate=True)
    # its own class beside "plot" (the page's style): the distribution plots are counted by theirs
    return svg.done().replace('<svg class="plot"', '<svg class="plot arrangement-plot"', 1)
