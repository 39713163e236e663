"""The voiceprint judge's evidence (OP 1 and OP 2): one lane against the golden, accumulated batch by
batch, and its checks.

Rows are matched by (block, window, speaker), never by position. A matched row called with the
golden's WEIGHTS is judged on its embedding: cosine, max abs, relative L2, max ULP, non-finite
values. A row on one side only, or a matched row whose WEIGHTS differ, depends on the mode:

- **isolated** (every lane gets the golden's WEIGHTS/IDX): any such row fails — the comparison
  was not isolated;
- **chained** (each lane derives its WEIGHTS from its own segmentation): such rows are the
  expected result of OP 0 flips. Each is attributed to the flips of its window: a confident flip
  fails; near-tie flips only are counted against their own limit
  (``max_mask_changed_row_rate``, a 95 % upper bound), and rows gained or lost through near-tie
  flips only are reported, not failed; a changed row whose window did not flip at all fails
  (nothing explains it).

The checks hold these figures to the limits the judge sets per tolerance mode
(:mod:`harness.judging.judges.voiceprint_judge`). A new voiceprint metric is added in the judge's modules
only: its value and its check here, its limit in the judge.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from harness.base.errors import ScoringError
from harness.compute.metrics import cosine_and_rel_l2, row_diff
from harness.data.geometry import Geometry
from harness.data.judge_limits import VoiceprintLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import VoiceprintOutputs
from harness.judging.judges import rowkeys
from harness.judging.judges.evidence_figures import RowCauses, VoiceprintTotals, WorstRow, WorstRows
from harness.judging.judges.judge_base import (
    CheckDetails,
    FlipNotes,
    NonFiniteFigures,
    cosine_text,
    figure_check,
    fmt,
    gate,
    op_verdict,
)
from harness.judging.judges.sample import Sample
from harness.judging.judges.shared_checks import HINT_CHANGE, MAX_FAILING, _at, rate_check
from harness.judging.judges.voiceprint_rows import _empty, _label, _Worst

if TYPE_CHECKING:
    from harness.judging.judges.judge_base import OpVerdict


class VoiceprintEvidence:
    """One voiceprint OP of one lane against the golden, accumulated batch by batch."""

    def __init__(
        self, op: Op, geometry: Geometry, limits: VoiceprintLimits, voiceprint_inputs: VoiceprintInputs
    ) -> None:
        self.op, self.g, self.limits = op, geometry, limits
        self.chained = voiceprint_inputs == "chained"  # else isolated: every lane had the golden's WEIGHTS/IDX
        self.golden_rows = self.matched = self.judged = 0
        self.elements = self.differing = 0
        self.non_finite_rows, self.differing_rows = 0, 0
        self.non_finite_at: str | None = None  # the first row of each kind, for the failure line
        self.differing_at: str | None = None
        self.failed_rows = 0
        self.worst = WorstRows(
            min_cosine=_Worst(False), max_abs=_Worst(True), max_rel_l2=_Worst(True), max_ulp=_Worst(True)
        )
        # rows outside the metric comparison, by cause
        self.missing, self.extra, self.changed = RowCauses(), RowCauses(), RowCauses()
        self.first: dict[str, str] = {}
        self.worst_rows: list[tuple[float, str, int, int]] = []
        self.sample = Sample()

    def add(
        self, golden: VoiceprintOutputs | None, run: VoiceprintOutputs | None, notes: FlipNotes | None = None
    ) -> None:
        """One batch of rows (the rows of the same blocks on both sides); ``notes`` are OP 0's
        flipped windows of this lane and batch (chained mode attributes changed rows to them)."""
        golden = golden if golden is not None else _empty(self.op, self.g)
        run = run if run is not None else _empty(self.op, self.g)
        notes = notes or {}
        for side, v in (("golden", golden), ("run", run)):
            dup = rowkeys.first_duplicate(v)
            if dup is not None:
                raise ScoringError(
                    f"OP {int(self.op)} {side} has row (block {dup[0]!r}, window {dup[1]}, speaker {dup[2]}) twice"
                )
        found = rowkeys.match(golden, run)
        gi, ri = found.golden, found.run
        self.golden_rows += golden.rows
        self.matched += int(gi.size)

        identity = found.identity  # the same rows in the same order: views, not gathered copies
        same_w = np.ones(gi.size, dtype=bool)
        if gi.size:
            same_w = ((golden.weights == run.weights) if identity else (golden.weights[gi] == run.weights[ri])).all(
                axis=1
            )
        for i in np.flatnonzero(~same_w):
            self._outside("changed", rowkeys.key(golden, int(gi[i])), notes)
        for i in found.golden_only:
            self._outside("missing", rowkeys.key(golden, int(i)), notes)
        for i in found.run_only:
            self._outside("extra", rowkeys.key(run, int(i)), notes)

        identity = identity and bool(same_w.all())
        gi, ri = (gi, ri) if identity else (gi[same_w], ri[same_w])
        if gi.size == 0:
            return

        def label(j: int) -> str:  # made only for the rows a message names
            return _label(rowkeys.key(golden, int(gi[j])))

        a, b = (golden.embedding, run.embedding) if identity else (golden.embedding[gi], run.embedding[ri])
        diff = row_diff(a, b)
        cosine, rel = cosine_and_rel_l2(b, a)
        same = ~diff.differs & (diff.non_finite == 0)
        cosine[same], rel[same] = 1.0, 0.0  # bit-identical rows: exact, not float64 rounding of a dot product
        self.judged += int(gi.size)
        self.elements += int(a.size)
        self.differing += int(diff.differing)
        bad = diff.non_finite > 0
        if bad.any():
            self.non_finite_rows += int(bad.sum())
            self.non_finite_at = self.non_finite_at or label(int(np.flatnonzero(bad)[0]))
        if diff.differs.any():
            self.differing_rows += int(diff.differs.sum())
            self.differing_at = self.differing_at or label(int(np.argmax(diff.max_ulp)))
        lim = self.limits
        finite = ~bad
        failed = bad.copy()
        if lim.bitwise:
            failed |= diff.differs
        # (its worst so far, its limit, per-row values, rows worse than the limit)
        metrics: list[tuple[_Worst, float | None, np.ndarray, Callable[[np.ndarray, float], np.ndarray]]] = [
            (self.worst.min_cosine, lim.min_cosine, cosine, lambda v, x: v < x),
            (self.worst.max_abs, lim.max_abs, diff.max_abs, lambda v, x: v > x),
            (self.worst.max_rel_l2, lim.max_rel_l2, rel, lambda v, x: v > x),
            (self.worst.max_ulp, lim.max_ulp, diff.max_ulp.astype(np.float64), lambda v, x: v > x),
        ]
        for worst, limit, values, worse in metrics:
            over = (
                np.zeros(values.shape, dtype=bool) if limit is None or lim.bitwise else (worse(values, limit) & finite)
            )
            worst.add(np.where(finite, values, np.nan), over, label)
            failed |= over
        self.failed_rows += int(failed.sum())
        self.sample.add(np.where(bad, np.nan, diff.max_abs))
        # the batch's worst rows (largest max_abs, a non-finite one first), not its first: the list must hold the
        # row the max_abs check names as worst
        offenders = np.flatnonzero(failed | diff.differs)
        worst_first = np.nan_to_num(diff.max_abs[offenders], nan=np.inf)
        if offenders.size > MAX_FAILING:
            offenders = offenders[np.argpartition(-worst_first, MAX_FAILING - 1)[:MAX_FAILING]]
        for j in offenders:
            block, window, speaker = rowkeys.key(golden, int(gi[j]))
            item = (float(np.nan_to_num(diff.max_abs[j], nan=np.inf)), block, window, speaker)
            if len(self.worst_rows) < MAX_FAILING:
                heapq.heappush(self.worst_rows, item)
            elif item > self.worst_rows[0]:
                heapq.heapreplace(self.worst_rows, item)

    def _outside(self, kind: str, key: tuple[str, int, int], notes: FlipNotes) -> None:
        """A row not compared on its embedding: attributed to its window's OP 0 flips (chained)."""
        near, confident = notes.get((key[0], key[1]), (0, 0))
        causes: RowCauses = getattr(self, kind)
        cause = causes.count(near, confident, self.chained)
        self.first.setdefault(f"{kind}.{cause}", _label(key))

    # -- judging ----------------------------------------------------------------------------
    def totals(self) -> VoiceprintTotals:
        w = self.worst
        nf = self.non_finite_rows > 0  # figures over non-finite rows are None (never a perfect-looking number)
        max_abs = w.max_abs.value or 0.0
        max_ulp = int(w.max_ulp.value or 0)
        min_cosine = 1.0 if w.min_cosine.value is None else w.min_cosine.value
        max_rel_l2 = w.max_rel_l2.value or 0.0
        m, e, c = self.missing, self.extra, self.changed
        outside = (m, e, c)
        return VoiceprintTotals(
            rows=self.matched,
            golden_rows=self.golden_rows,
            judged_rows=self.judged,
            missing_rows=m.total(),
            extra_rows=e.total(),
            inputs_differ=c.total(),
            missing_unexplained=m.unexplained,
            missing_confident=m.confident,
            missing_near_tie=m.near_tie,
            extra_unexplained=e.unexplained,
            extra_confident=e.confident,
            extra_near_tie=e.near_tie,
            changed_unexplained=c.unexplained,
            changed_confident=c.confident,
            changed_near_tie=c.near_tie,
            max_abs=None if nf else max_abs,
            max_ulp=None if nf else max_ulp,
            min_cosine=None if nf else min_cosine,
            max_rel_l2=None if nf else max_rel_l2,
            max_abs_finite=max_abs,
            max_ulp_finite=max_ulp,
            min_cosine_finite=min_cosine,
            max_rel_l2_finite=max_rel_l2,
            fraction_differing=self.differing / self.elements if self.elements else 0.0,
            differing_rows=self.differing_rows,
            non_finite=self.non_finite_rows,
            figures_non_finite=NonFiniteFigures(count=self.non_finite_rows, of=self.judged, unit="rows"),
            failed_rows=self.failed_rows,
            bitwise=self.differing == 0 and self.non_finite_rows == 0 and not any(x.total() for x in outside),
        )

    def verdict(self, shape: int | str) -> OpVerdict:
        op, t, lim = int(self.op), self.totals(), self.limits
        checks = [
            gate(
                op,
                "non_finite_rows",
                t.non_finite,
                "==",
                0,
                CheckDetails(
                    unit="rows",
                    offending=t.non_finite,
                    total=t.judged_rows,
                    where=_at("first", self.non_finite_at),
                    hint="a NaN/Inf appeared where the golden has none: a packing or model bug",
                ),
            )
        ]
        if lim.bitwise:
            checks.append(
                gate(
                    op,
                    "differing_rows",
                    t.differing_rows,
                    "==",
                    0,
                    CheckDetails(
                        unit="rows",
                        offending=t.differing_rows,
                        total=t.judged_rows,
                        where=_at("most ULP at", self.differing_at),
                        note=f"max_abs {fmt(t.max_abs)}, min cosine "  # never '1' for rows that differ
                        f"{cosine_text(t.min_cosine, t.differing_rows == 0)}",
                        hint="the shape changes output bits: judge it with --tolerance tolerance",
                    ),
                )
            )
        else:
            figures = (
                ("min_cosine", ">=", self.worst.min_cosine, t.min_cosine_finite, lim.min_cosine),
                ("max_abs", "<=", self.worst.max_abs, t.max_abs_finite, lim.max_abs),
                ("max_rel_l2", "<=", self.worst.max_rel_l2, t.max_rel_l2_finite, lim.max_rel_l2),
                ("max_ulp", "<=", self.worst.max_ulp, t.max_ulp_finite, lim.max_ulp),
            )
            for name, rel, worst, finite_value, limit in figures:
                checks.append(
                    figure_check(
                        op,
                        name,
                        finite_value,
                        rel,
                        limit,
                        CheckDetails(
                            limit=name,
                            total=t.judged_rows,
                            unit="rows",
                            offending=worst.over or None,
                            where=_at("worst", worst.where),
                            hint=HINT_CHANGE,
                        ),
                        t.non_finite,
                        _at("first non-finite at", self.non_finite_at),
                    )
                )
        unexplained = {"missing": "golden only", "extra": "run only", "changed": "called with other WEIGHTS"}
        isolated_note = " (isolated mode: every lane must be called with the golden's WEIGHTS/IDX)"
        for kind, what in unexplained.items():
            n = getattr(self, kind).unexplained
            checks.append(
                gate(
                    op,
                    f"{kind}_rows" if kind != "changed" else "inputs_differ",
                    n,
                    "==",
                    0,
                    CheckDetails(
                        unit="rows",
                        offending=n,
                        total=t.golden_rows,
                        where=_at("first", self.first.get(f"{kind}.unexplained")),
                        note=f"rows {what}" + ("" if self.chained else isolated_note) if n else "",
                    ),
                )
            )
        if self.chained:
            confident = self.missing.confident + self.extra.confident + self.changed.confident
            first = next(
                (
                    self.first[f"{k}.confident"]
                    for k in ("changed", "missing", "extra")
                    if f"{k}.confident" in self.first
                ),
                None,
            )
            checks.append(
                gate(
                    op,
                    "mask_changed_by_confident_flip",
                    confident,
                    "==",
                    0,
                    CheckDetails(
                        unit="rows",
                        offending=confident,
                        total=t.golden_rows,
                        where=_at("first", first),
                        note="rows gained, lost or re-weighted by a confident OP 0 flip",
                        hint=HINT_CHANGE,
                    ),
                )
            )
            changed_near = self.changed.near_tie
            checks.append(
                rate_check(
                    op,
                    "mask_changed_near_tie_rate_upper95",
                    changed_near,
                    max(1, t.rows),
                    lim.max_mask_changed_row_rate,
                    "rows",
                    "max_mask_changed_row_rate",
                )
            )
            gained_lost = self.missing.near_tie + self.extra.near_tie
            checks.append(
                gate(
                    op,
                    "rows_gained_or_lost_near_tie",
                    gained_lost,
                    "<=",
                    None,
                    CheckDetails(
                        unit="rows",
                        note=f"{self.missing.near_tie} lost, {self.extra.near_tie} gained through "
                        "near-tie OP 0 flips (reported, not failed)",
                    ),
                )
            )
        if lim.max_failed_row_rate is not None:
            n = t.judged_rows + self.missing.total() + self.extra.total()
            if self.chained:
                n -= self.missing.near_tie + self.extra.near_tie
            failures = (
                t.failed_rows
                + self.missing.unexplained
                + self.extra.unexplained
                + self.missing.confident
                + self.extra.confident
            )
            checks.append(
                rate_check(
                    op,
                    "failed_row_rate_upper95",
                    failures,
                    n,
                    lim.max_failed_row_rate,
                    "rows",
                    "max_failed_row_rate",
                )
            )
        failing = [
            WorstRow(b, w, s, "max_abs", None if v == np.inf else v)
            for v, b, w, s in sorted(self.worst_rows, reverse=True)
        ]
        return op_verdict(op, shape, checks, t, lim, failing, self.sample.values())
