"""The segmentation judge's evidence (OP 0): one lane against the golden, accumulated batch by batch, and
its checks.

Evidence, per window and over the corpus: max/mean absolute difference, max ULP distance, the
elements whose bits differ, non-finite values; and the decisions the engine draws from the
log-probabilities, on frames that hold audio only (the engine's mask function zeroes the others):
**argmax flips** (the powerset class changes) and **mask flips** (per-speaker activity changes),
each classed near-tie or confident by the golden's margin between its top two classes.

A frame can flip only if the golden's top-two margin is at most twice the largest change in its
window (|d_run - d_golden| <= 2 max|d|): only those candidate frames get an argmax. Exact, and
cheap when the outputs agree.

The checks hold these figures to the limits the judge sets per tolerance mode
(:mod:`harness.judging.judges.segmentation_judge`). A new OP 0 metric is added in these two modules
only: its value and its check here, its limit in the judge.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from harness.base.errors import ScoringError
from harness.compute.metrics import row_diff
from harness.data.geometry import Geometry
from harness.data.judge_limits import SegmentationLimits
from harness.data.masks import audio_frames
from harness.data.outputs import SegmentationOutputs
from harness.judging.binomial import upper_bound
from harness.judging.judges.evidence_figures import FlipCounts, SegmentationTotals, WorstBlock
from harness.judging.judges.judge_base import (
    CheckDetails,
    FlipNotes,
    NonFiniteFigures,
    figure_check,
    fmt,
    gate,
    op_verdict,
)
from harness.judging.judges.sample import Sample
from harness.judging.judges.shared_checks import HINT_CHANGE, MAX_FAILING, _at, rate_check

if TYPE_CHECKING:
    from harness.judging.judges.judge_base import OpVerdict


class SegmentationEvidence:
    """OP 0 of one lane against the golden, accumulated batch by batch (memory: one batch)."""

    def __init__(self, geometry: Geometry, limits: SegmentationLimits) -> None:
        self.g = geometry
        self.limits = limits
        self.blocks = self.windows = self.elements = self.audio_frames = 0
        self.sum_abs = 0.0
        self.differing = 0
        self.max_abs, self.max_ulp = 0.0, 0
        self.max_abs_at: str | None = None  # where each worst value and first event was seen
        self.max_ulp_at: str | None = None
        self.windows_over_abs = self.elements_over_abs = 0
        self.windows_over_ulp = 0
        self.non_finite = 0
        self.non_finite_at: str | None = None
        self.non_finite_windows = 0
        self.flips = FlipCounts()
        self.confident_at: str | None = None
        self.worst_flip_margin = 0.0
        self.worst_blocks: list[tuple[float, str]] = []  # min-heap of (max_abs, block)
        self.flip_blocks: dict[str, int] = {}
        self.sample = Sample()

    # -- accumulating -----------------------------------------------------------------------
    def add(self, golden: SegmentationOutputs, run: SegmentationOutputs, notes: FlipNotes | None = None) -> FlipNotes:
        """Add one batch (same blocks, same order); returns the windows whose decisions flipped,
        ``{(block, window): (near_tie, confident)}``, for the voiceprint judge of chained mode."""
        if list(golden.block_ids) != list(run.block_ids):
            raise ScoringError(
                "OP 0 batch: the run's blocks are not the golden's "
                f"(golden {golden.block_ids[:2]}..., run {run.block_ids[:2]}...)"
            )
        a, b = golden.logprobs, run.logprobs
        if a.shape != b.shape:
            raise ScoringError(f"OP 0 shapes differ: golden {list(a.shape)}, run {list(b.shape)}")
        n_blocks, n_windows, frames, classes = a.shape
        rows = n_blocks * n_windows
        ids = golden.block_ids
        diff = row_diff(a.reshape(rows, frames * classes), b.reshape(rows, frames * classes))
        self.blocks += n_blocks
        self.windows += rows
        self.elements += rows * frames * classes
        self.sum_abs += float(diff.sum_abs.sum())
        self.differing += int(diff.differing)

        def where(r: int) -> str:
            return f"block {ids[r // n_windows]!r} window {r % n_windows}"

        bad = np.flatnonzero(diff.non_finite)
        if bad.size:
            self.non_finite += int(diff.non_finite.sum())
            self.non_finite_windows += int(bad.size)
            self.non_finite_at = self.non_finite_at or where(int(bad[0]))
        finite_max = np.where(diff.non_finite > 0, -np.inf, diff.max_abs)
        r = int(np.argmax(finite_max))
        if finite_max[r] > self.max_abs:
            self.max_abs, self.max_abs_at = float(finite_max[r]), where(r)
        r = int(np.argmax(diff.max_ulp))
        if diff.max_ulp[r] > self.max_ulp:
            self.max_ulp, self.max_ulp_at = int(diff.max_ulp[r]), where(r)
        lim_abs = self.limits.max_abs
        if lim_abs is not None:
            over = np.flatnonzero(finite_max > lim_abs)
            self.windows_over_abs += int(over.size)
            for w in over:
                x, y = a.reshape(rows, -1)[w], b.reshape(rows, -1)[w]
                with np.errstate(invalid="ignore", over="ignore"):
                    self.elements_over_abs += int(np.count_nonzero(np.abs(x - y) > lim_abs))
        if self.limits.max_ulp is not None:
            self.windows_over_ulp += int(np.count_nonzero(diff.max_ulp > self.limits.max_ulp))
        per_block = finite_max.reshape(n_blocks, n_windows).max(axis=1)
        for i in np.flatnonzero(per_block > 0):
            item = (float(per_block[i]), ids[i])
            if len(self.worst_blocks) < MAX_FAILING:
                heapq.heappush(self.worst_blocks, item)
            elif item > self.worst_blocks[0]:
                heapq.heapreplace(self.worst_blocks, item)
        self.sample.add(np.where(diff.non_finite > 0, np.nan, diff.max_abs))

        audio = audio_frames(golden.valid.reshape(-1), self.g)  # [rows, F]
        self.audio_frames += int(audio.sum())
        argmax_g, margin_g = golden.decisions()
        slack = np.nan_to_num(2.0 * diff.max_abs * (1 + 1e-5) + 1e-30, nan=np.inf)  # per window
        slack[diff.non_finite > 0] = np.inf
        candidates = np.flatnonzero((margin_g.reshape(rows, frames) <= slack[:, None]) & audio)
        return self._flips(
            a.reshape(-1, classes), b.reshape(-1, classes), candidates, argmax_g, margin_g, ids, n_windows, frames
        )

    def _flips(
        self,
        golden: np.ndarray,
        run: np.ndarray,
        candidates: np.ndarray,
        argmax_g: np.ndarray,
        margin_g: np.ndarray,
        ids: list[str],
        n_windows: int,
        frames: int,
    ) -> FlipNotes:
        if candidates.size == 0:
            return {}
        r, g = run[candidates], golden[candidates]
        finite = np.isfinite(g).all(axis=1) & np.isfinite(r).all(axis=1)
        ra = np.argmax(np.nan_to_num(r, nan=-np.inf), axis=1)
        changed = (ra != argmax_g[candidates]) | ~finite  # a non-finite frame counts as a confident flip
        flipped, ra, finite = candidates[changed], ra[changed], finite[changed]
        if flipped.size == 0:
            return {}
        margins = margin_g[flipped]
        # the check's rule, for every flip: near tie when the golden's top-two margin is below the
        # limit; a non-finite frame of the lane is a flip too, classed by that same margin
        near = margins < self.limits.near_tie_margin
        power = self.g.powerset
        speaker_changes = np.abs(power[argmax_g[flipped]] - power[ra]).sum(axis=1).astype(np.int64)
        speaker_changes[~finite] = self.g.speakers
        self.flips.near += int(near.sum())
        self.flips.confident += int((~near).sum())
        self.flips.mask_near += int(speaker_changes[near].sum())
        self.flips.mask_confident += int(speaker_changes[~near].sum())
        known = np.isfinite(margins)
        if known.any():
            self.worst_flip_margin = max(self.worst_flip_margin, float(margins[known].max()))
        window_of = flipped // frames
        if (~near).any() and self.confident_at is None:
            f = int(flipped[~near][0])
            self.confident_at = (
                f"block {ids[f // frames // n_windows]!r} window {f // frames % n_windows} frame {f % frames}"
            )
        notes: FlipNotes = {}
        for w, is_near in zip(window_of.tolist(), near.tolist(), strict=True):
            key = (ids[w // n_windows], w % n_windows)
            near_count, confident_count = notes.get(key, (0, 0))
            notes[key] = (near_count + is_near, confident_count + (not is_near))
            block = ids[w // n_windows]
            self.flip_blocks[block] = self.flip_blocks.get(block, 0) + 1
        return notes

    # -- judging ----------------------------------------------------------------------------
    def totals(self) -> SegmentationTotals:
        flips = self.flips.near + self.flips.confident
        nf = self.non_finite > 0  # figures over non-finite values are None (never a perfect-looking number)
        mean_finite = self.sum_abs / (self.elements - self.non_finite) if self.elements > self.non_finite else 0.0
        return SegmentationTotals(
            blocks=self.blocks,
            windows=self.windows,
            elements=self.elements,
            audio_frames=self.audio_frames,
            max_abs=None if nf else self.max_abs,
            max_abs_finite=self.max_abs,
            mean_abs=None if nf else mean_finite,
            mean_abs_finite=mean_finite,
            max_ulp=None if nf else self.max_ulp,
            max_ulp_finite=self.max_ulp,
            fraction_differing=self.differing / self.elements if self.elements else 0.0,
            differing_elements=self.differing,
            non_finite=self.non_finite,
            non_finite_windows=self.non_finite_windows,
            figures_non_finite=NonFiniteFigures(count=self.non_finite_windows, of=self.windows, unit="windows"),
            argmax_flips_near_tie=self.flips.near,
            argmax_flips_confident=self.flips.confident,
            mask_flips_near_tie=self.flips.mask_near,
            mask_flips_confident=self.flips.mask_confident,
            worst_flip_margin=self.worst_flip_margin,
            flips=flips,
            flip_rate_upper95=upper_bound(flips, self.audio_frames),
            bitwise=self.differing == 0 and self.non_finite == 0,
        )

    def verdict(self, shape: int | str) -> OpVerdict:
        t, lim = self.totals(), self.limits
        checks = [
            gate(
                0,
                "non_finite",
                t.non_finite,
                "==",
                0,
                CheckDetails(
                    unit="elements",
                    offending=t.non_finite,
                    total=t.elements,
                    where=_at("first", self.non_finite_at),
                    hint="a NaN/Inf appeared where the golden has none: a packing or model bug",
                ),
            )
        ]
        if lim.bitwise:
            checks.append(
                gate(
                    0,
                    "differing_elements",
                    t.differing_elements,
                    "==",
                    0,
                    CheckDetails(
                        unit="elements",
                        offending=t.differing_elements,
                        total=t.elements,
                        where=_at("most ULP at", self.max_ulp_at),
                        note=f"max_abs {fmt(t.max_abs)}, max_ulp {fmt(t.max_ulp)}",
                        hint="the shape changes output bits: judge it with --tolerance tolerance, or "
                        "localise the first diverging layer",
                    ),
                )
            )
        else:
            figure = CheckDetails(total=t.windows, unit="windows", hint=HINT_CHANGE)
            non_finite, first = self.non_finite_windows, _at("first non-finite at", self.non_finite_at)
            checks.append(
                figure_check(
                    0,
                    "max_abs",
                    t.max_abs_finite,
                    "<=",
                    lim.max_abs,
                    replace(
                        figure,
                        limit="max_abs",
                        offending=self.windows_over_abs,
                        where=_at("worst", self.max_abs_at),
                        note=(
                            f"{self.elements_over_abs:,} of {t.elements:,} elements over the limit"
                            if self.elements_over_abs
                            else ""
                        ),
                    ),
                    non_finite,
                    first,
                )
            )
            checks.append(
                figure_check(
                    0,
                    "max_ulp",
                    t.max_ulp_finite,
                    "<=",
                    lim.max_ulp,
                    replace(
                        figure,
                        limit="max_ulp",
                        offending=self.windows_over_ulp or None,
                        where=_at("worst", self.max_ulp_at),
                    ),
                    non_finite,
                    first,
                )
            )
            checks.append(
                figure_check(0, "mean_abs", t.mean_abs_finite, "<=", None, replace(figure, hint=""), non_finite, first)
            )
        checks.append(
            gate(
                0,
                "confident_flips",
                t.argmax_flips_confident,
                "<=",
                lim.max_confident_flips,
                CheckDetails(
                    limit="max_confident_flips",
                    unit="audio frames",
                    offending=t.argmax_flips_confident,
                    total=t.audio_frames,
                    where=_at("first", self.confident_at),
                    note=f"class changed although the golden's top-two margin >= {lim.near_tie_margin} nats",
                    hint=HINT_CHANGE,
                ),
            )
        )
        checks.append(
            gate(
                0,
                "near_tie_flips",
                t.argmax_flips_near_tie,
                "<=",
                None,
                CheckDetails(unit="audio frames", total=t.audio_frames, note="counted in the flip rate"),
            )
        )
        checks.append(
            gate(
                0,
                "mask_flips",
                t.mask_flips_near_tie + t.mask_flips_confident,
                "<=",
                None,
                CheckDetails(
                    note=f"speaker activity changes: {t.mask_flips_near_tie} near-tie, "
                    f"{t.mask_flips_confident} confident"
                ),
            )
        )
        if lim.max_flip_rate is not None:
            checks.append(
                rate_check(
                    0,
                    "flip_rate_upper95",
                    t.flips,
                    t.audio_frames,
                    lim.max_flip_rate,
                    "audio frames",
                    "max_flip_rate",
                )
            )
        failing = [WorstBlock(b, "max_abs", v) for v, b in sorted(self.worst_blocks, reverse=True)]
        failing += [
            WorstBlock(b, "flips", n) for b, n in sorted(self.flip_blocks.items(), key=lambda kv: -kv[1])[:MAX_FAILING]
        ]
        return op_verdict(0, shape, checks, t, lim, failing, self.sample.values())
