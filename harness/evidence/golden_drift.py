"""A packed lane's drift from the golden within the tolerances, said aloud: the ``golden`` warning.

A shape whose plain lane holds its mode's limits against the golden passes, and in ``tolerance`` mode a few
ULPs there are what the user accepted. But a change that moves the last bits only at packed shapes (another
kernel for the packed size, a new library) would pass silently night after night. So, as the slots,
duplicates and repeats do, the plain lane against the golden gets its own ``warning:`` line (kind ``golden``)
when it differs more than the release differs from itself (its recorded noise floor: bitwise on a
deterministic backend) yet holds the limits: reported, never refused (``[history] fail_on_warning`` makes it
fail the night). Promotion re-derives which OPs must carry it from the stored verdicts (:meth:`warning_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.refusals import EvidenceWarning
from harness.data.schemas.results import ShapeScore
from harness.data.shape import lane_name
from harness.evidence.arrangement_slots import BlockFigures
from harness.evidence.kind import Floors, KindDefaults, ShapeEvidence, ShapeFinish, ShapeSetting, with_evidence
from harness.evidence.rule import evidence_warning, warns

GOLDEN: Final = "golden"


class _DriftOfShape:
    def __init__(self, setting: ShapeSetting) -> None:
        self.k, self.ops, self.floors = setting.k, list(setting.ops), setting.floors
        self.plain = lane_name(setting.k)
        self.figures = BlockFigures(self.ops)

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        self.figures.add(self.plain, gold, lanes[self.plain])

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        found: list[EvidenceWarning] = []
        for verdict in finish.plain:
            op = Op(verdict.op)
            blocks, units, differing, _, _ = self.figures.of(self.plain, op)
            counts = (len(blocks), int((differing > 0).sum()), int(units.sum()), int(differing.sum()))
            worst = self.figures.worst_block(self.plain, op)
            where = f"worst block {worst!r}" if worst else None
            warning = evidence_warning(self.k, op, GOLDEN, [verdict], self.floors, counts, where)
            if warning is not None:
                found.append(warning)
        return with_evidence(score, {}, warnings=found) if found else score


class GoldenDriftKind(KindDefaults):
    """The plain lane's drift from the golden beyond the release's floor, within the mode's limits (module doc)."""

    name = GOLDEN

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        return _DriftOfShape(setting)

    def warning_keys(self, shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
        return {(GOLDEN, int(key)) for key, v in shape.ops.items() if warns(Op(int(key)), [v], floors)}
