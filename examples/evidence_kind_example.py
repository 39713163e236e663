"""A team's kind of evidence, whole: the share of OP 0 windows the plain lane answers exactly as the golden.

A shape whose packed answers drift by a few ULPs can still pass every tolerance; a team that wants to see (and
gate on) how much of the answer is still bit-exact adds this kind beside the harness's own, with no change to
the harness: ``[evidence] kinds = ["examples.evidence_kind_example:ExactWindows"]`` in harness.toml (the
module importable from the working directory or PYTHONPATH, as a model factory is). It is then

- scored beside the plain lane, in the same pass over the golden (``scorer``: ``add`` per batch, ``apply``);
- stored under ``shapes[k].more_evidence["exact_windows"]`` (with its check, so promotion can re-derive it);
- a refusal when the share is under ``min_share`` (its check is a judged pair: the refusal has a cause);
- re-derived by promotion from the score alone (``holds``): an edited figure is refused;
- a section of the sign-off report (``report``) and JUnit properties of every OP case (``junit``).

The run manifest and the score record the spec, and promotion loads it from there: a process that cannot
import this module refuses to promote a score that holds its result. ``min_share`` is 0 here (it reports and
never refuses); a subclass with its own ``name`` and ``min_share`` is a gate.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from harness.base.errors import LedgerError
from harness.data.judge_limits import LimitSet
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.results import CheckModel, OpVerdictModel, Score, ShapeScore
from harness.data.schemas.verdicts import CheckDetails
from harness.data.shape import Shape, lane_name
from harness.evidence.kind import (
    JudgedPair,
    KindDefaults,
    Recheck,
    ReportSection,
    ShapeEvidence,
    ShapeFinish,
    ShapeSetting,
    more_evidence,
    with_evidence,
)


class ExactLimits(LimitSet):
    """Its one limit, typed: promotion compares the stored limits with these."""

    min_exact_share: float


class ExactWindows(KindDefaults):
    """The share of OP 0 windows whose largest |plain - golden| is exactly 0, gated at ``min_share``."""

    name = "exact_windows"
    min_share = 0.0

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        return _Count(self, setting.k) if Op.SEGMENTATION in setting.ops else None

    def verdict(self, k: int, exact: int, windows: int) -> OpVerdictModel:
        share = exact / windows if windows else 0.0
        details = CheckDetails(unit="windows", offending=windows - exact, total=windows, limit="min_exact_share")
        check = CheckModel.gate(0, "exact_share", share, ">=", self.min_share, details)
        return OpVerdictModel.of(0, f"k{k}", [check], {"exact": exact}, self.limits().document())

    def limits(self) -> ExactLimits:
        return ExactLimits(min_exact_share=self.min_share)

    def stored(self, shape: ShapeScore) -> tuple[dict[str, Any], OpVerdictModel] | None:
        found = shape.more_evidence.get(self.name)
        return None if found is None else (found, OpVerdictModel.model_validate(found["verdict"]))

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        if (stored := self.stored(shape)) is not None:  # a failed check here is the shape's cause (numerics)
            yield JudgedPair("plain", f"k={k} exact windows:", stored[1])

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        stored = self.stored(shape)
        if stored is None:
            return True
        result, verdict = stored
        recheck.check(verdict, self.limits(), f"{recheck.where}: {self.name}")  # limit and ok from the figures
        if verdict != self.verdict(shape.shape, result["exact"], result["windows"]):
            raise LedgerError(f"{recheck.where}: {self.name}: its check does not follow from its counts")
        return verdict.passed

    def report(self, score: Score) -> ReportSection | None:
        rows = tuple(
            (f"k={k}", f"{r['exact']:,} of {r['windows']:,}", f"{r['exact'] / max(r['windows'], 1):.1%}")
            for k, s in sorted(score.shapes.items(), key=lambda kv: int(kv[0]))
            if (r := s.more_evidence.get(self.name)) is not None
        )
        if not rows:
            return None
        return ReportSection(
            "Exact windows: OP 0 answered bit for bit as the golden",
            ("shape", "exact windows", "share"),
            rows,
            (f"a shape needs a share of at least {self.min_share:.1%}",),
        )

    def junit(self, k: Shape, shape: ShapeScore) -> list[tuple[str, str]]:
        found = shape.more_evidence.get(self.name)
        return [] if found is None else [("exact_windows", str(found["exact"])), ("windows", str(found["windows"]))]


class _Count:
    """One shape's count, batch by batch beside the plain lane."""

    def __init__(self, kind: ExactWindows, k: int) -> None:
        self.kind, self.k, self.exact, self.windows = kind, k, 0, 0

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        a = gold.segmentation.logprobs
        b = lanes[lane_name(self.k)].segmentation.logprobs
        n = a.shape[0] * a.shape[1]
        worst = np.abs(a.astype(np.float64) - b.astype(np.float64)).reshape(n, -1).max(axis=1)
        self.windows += n
        self.exact += int(np.count_nonzero(worst == 0))  # NaN is never 0: not exact

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        verdict = self.kind.verdict(self.k, self.exact, self.windows)
        result = {"exact": self.exact, "windows": self.windows, "verdict": verdict.model_dump(mode="json")}
        reasons = [f"k={self.k} exact windows: {r}" for r in verdict.reasons]
        update = more_evidence(score, self.kind.name, result)
        return with_evidence(score, update, reasons_after=reasons, refused=not verdict.passed)
