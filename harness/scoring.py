"""Comparing a run with a golden, per OP: the evidence, before any verdict.

OP 0 (segmentation): per window and per block, max/mean abs difference of the
log-probabilities, max ULP distance, the fraction of elements whose bits differ; and the
decisions the engine draws from them, restricted to frames that hold audio: **argmax
flips** (the powerset class changes) and **mask flips** (per-speaker activity changes),
each classed near-tie or confident by the golden's margin between its top two classes.

OP 1/2 (voiceprints): rows matched by (block, window, speaker), never by position; per
row max abs, relative L2, cosine similarity, max ULP. A row on one side only is reported
(it fails the gate).

Everything is vectorised over the corpus; the only Python loops are over chunks and OPs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.errors import ScoringError
from harness.geometry import Geometry
from harness.masks import audio_frames
from harness.metrics import cosine_and_rel_l2, row_diff
from harness.ops import Op
from harness.outputs import SegmentationOutputs, VoiceprintOutputs


@dataclass(eq=False)
class SegmentationScore:
    block_ids: list[str]
    window_max_abs: np.ndarray  # [B, N]
    max_abs: np.ndarray  # [B] (NaN if the block has a non-finite value)
    mean_abs: np.ndarray  # [B]
    max_ulp: np.ndarray  # [B]
    differs: np.ndarray  # [B] bool: some element's bits differ
    differing_total: int  # elements whose bits differ, all blocks
    non_finite: np.ndarray  # [B]
    elements: int  # per block
    audio_frames: np.ndarray  # [B]
    argmax_near: np.ndarray  # [B]
    argmax_confident: np.ndarray  # [B]
    mask_near: np.ndarray  # [B]
    mask_confident: np.ndarray  # [B]
    worst_confident_margin: float  # largest golden margin among flipped frames (0 if none)
    op: Op = Op.SEGMENTATION

    def totals(self) -> dict:
        b = len(self.block_ids)
        finite = ~np.isnan(self.max_abs)
        return {
            "blocks": b,
            "elements": int(self.elements * b),
            "audio_frames": int(self.audio_frames.sum()),
            "max_abs": float(self.max_abs[finite].max()) if finite.any() else 0.0,
            "mean_abs": float(self.mean_abs.mean()) if b else 0.0,
            "max_ulp": int(self.max_ulp.max()) if b else 0,
            "fraction_differing": float(self.differing_total / max(1, self.elements * b)),
            "non_finite": int(self.non_finite.sum()),
            "argmax_flips_near_tie": int(self.argmax_near.sum()),
            "argmax_flips_confident": int(self.argmax_confident.sum()),
            "mask_flips_near_tie": int(self.mask_near.sum()),
            "mask_flips_confident": int(self.mask_confident.sum()),
            "worst_flip_margin": float(self.worst_confident_margin),
            "bitwise": bool(self.differing_total == 0 and self.non_finite.sum() == 0),
        }


@dataclass(eq=False)
class VoiceprintScore:
    op: Op
    block_ids: np.ndarray  # [M] matched rows
    window: np.ndarray
    speaker: np.ndarray
    max_abs: np.ndarray  # [M] (NaN if non-finite)
    max_ulp: np.ndarray
    differs: np.ndarray  # [M] bool
    differing_total: int
    non_finite: np.ndarray
    cosine: np.ndarray
    rel_l2: np.ndarray
    elements: int  # per row
    missing: list[tuple[str, int, int]] = field(default_factory=list)  # in golden, not in run
    extra: list[tuple[str, int, int]] = field(default_factory=list)  # in run, not in golden
    inputs_differ: int = 0  # matched rows whose WEIGHTS differ from the golden's

    def totals(self) -> dict:
        m = int(self.max_abs.shape[0])
        finite = ~np.isnan(self.max_abs)
        cos_ok = ~np.isnan(self.cosine)
        return {
            "rows": m,
            "golden_rows": m + len(self.missing),
            "missing_rows": len(self.missing),
            "extra_rows": len(self.extra),
            "max_abs": float(self.max_abs[finite].max()) if finite.any() else 0.0,
            "max_ulp": int(self.max_ulp.max()) if m else 0,
            "min_cosine": float(self.cosine[cos_ok].min()) if cos_ok.any() else 1.0,
            "max_rel_l2": float(np.nanmax(self.rel_l2)) if m and cos_ok.any() else 0.0,
            "fraction_differing": float(self.differing_total / max(1, self.elements * m)),
            "non_finite": int(self.non_finite.sum()),
            "inputs_differ": int(self.inputs_differ),
            "bitwise": bool(self.differing_total == 0 and self.non_finite.sum() == 0 and not self.missing
                            and not self.extra),
        }


def compare_segmentation(golden: SegmentationOutputs, run: SegmentationOutputs, geometry: Geometry,
                         near_tie_margin: float) -> SegmentationScore:
    """Score ``run`` against ``golden`` over the golden's blocks (the run must hold them all)."""
    pos = run.index()
    missing = [b for b in golden.block_ids if b not in pos]
    if missing:
        raise ScoringError(f"run lacks {len(missing)} block(s) of the golden, first {missing[0]!r}")
    order = np.array([pos[b] for b in golden.block_ids])
    a = golden.logprobs
    b = run.logprobs if np.array_equal(order, np.arange(len(order))) else run.logprobs[order]
    if a.shape != b.shape:
        raise ScoringError(f"OP 0 shapes differ: golden {list(a.shape)}, run {list(b.shape)}")
    n_blocks, n_windows, frames, classes = a.shape
    diff = row_diff(a.reshape(n_blocks * n_windows, frames * classes), b.reshape(n_blocks * n_windows, -1))
    per_block = lambda v, how: getattr(v.reshape(n_blocks, n_windows), how)(axis=1)  # noqa: E731
    with np.errstate(invalid="ignore"):
        max_abs = np.where(per_block(diff.non_finite, "sum") > 0, np.nan, per_block(np.nan_to_num(diff.max_abs), "max"))

    audio = audio_frames(golden.valid.reshape(-1), geometry).reshape(n_blocks, n_windows, frames)
    # A frame can flip only if the golden's top-two margin is at most twice the largest change in
    # its window (|d_r - d_g| <= 2 max|d|): only those candidates get an argmax. Exact, and cheap
    # when outputs agree; a non-finite window makes every one of its frames a candidate.
    argmax_g, margin_g = golden.decisions()
    slack = np.repeat(np.nan_to_num(2.0 * diff.max_abs * (1 + 1e-5) + 1e-30, nan=np.inf), frames)
    candidates = np.flatnonzero((margin_g <= slack) & audio.reshape(-1))
    flips = _flips(a.reshape(-1, classes), b.reshape(-1, classes), candidates, argmax_g, margin_g, geometry,
                   near_tie_margin)
    frames_per_block = n_windows * frames
    count = lambda idx: np.bincount(idx // frames_per_block, minlength=n_blocks)  # noqa: E731
    return SegmentationScore(
        block_ids=list(golden.block_ids),
        window_max_abs=diff.max_abs.reshape(n_blocks, n_windows),
        max_abs=max_abs,
        mean_abs=per_block(diff.sum_abs, "sum") / (n_windows * frames * classes),
        max_ulp=per_block(diff.max_ulp, "max"),
        differs=per_block(diff.differs, "any"),
        differing_total=diff.differing,
        non_finite=per_block(diff.non_finite, "sum"),
        elements=n_windows * frames * classes,
        audio_frames=audio.reshape(n_blocks, -1).sum(axis=1),
        argmax_near=count(flips["near"]),
        argmax_confident=count(flips["confident"]),
        mask_near=np.bincount(flips["near"] // frames_per_block, weights=flips["mask_near"],
                              minlength=n_blocks).astype(np.int64),
        mask_confident=np.bincount(flips["confident"] // frames_per_block, weights=flips["mask_confident"],
                                   minlength=n_blocks).astype(np.int64),
        worst_confident_margin=flips["worst_margin"],
    )


def _flips(golden: np.ndarray, run: np.ndarray, candidates: np.ndarray, argmax_g: np.ndarray,
           margin_g: np.ndarray, geometry: Geometry, margin: float) -> dict:
    """Of the candidate frames (flat indices), those whose argmax flips, split by the golden's margin."""
    r = run[candidates]
    g = golden[candidates]
    finite = np.isfinite(g).all(axis=1) & np.isfinite(r).all(axis=1)
    ra = np.argmax(np.nan_to_num(r, nan=-np.inf), axis=1)
    changed = (ra != argmax_g[candidates]) | ~finite  # a non-finite frame counts as a (confident) flip
    flipped, ra, finite = candidates[changed], ra[changed], finite[changed]
    margins = margin_g[flipped]
    near = finite & (margins < margin)
    power = geometry.powerset
    speaker_changes = np.abs(power[argmax_g[flipped]] - power[ra]).sum(axis=1).astype(np.int64)
    speaker_changes[~finite] = geometry.speakers
    return {
        "near": flipped[near],
        "confident": flipped[~near],
        "mask_near": speaker_changes[near],
        "mask_confident": speaker_changes[~near],
        "worst_margin": float(margins[finite].max()) if finite.any() else 0.0,
    }


def compare_voiceprint(golden: VoiceprintOutputs, run: VoiceprintOutputs, geometry: Geometry) -> VoiceprintScore:
    """Match rows by (block, window, speaker) and score each matched pair."""
    ids = {b: i for i, b in enumerate(sorted(set(golden.block_ids.tolist()) | set(run.block_ids.tolist())))}
    stride_s = geometry.speakers
    stride_w = geometry.windows_per_block * 1_000_003  # any bound above window indices

    def keys(v: VoiceprintOutputs) -> np.ndarray:
        block_num = np.fromiter((ids[b] for b in v.block_ids), dtype=np.int64, count=v.rows)
        return (block_num * stride_w + v.window.astype(np.int64)) * stride_s + v.speaker.astype(np.int64)

    kg, kr = keys(golden), keys(run)
    for side, k, v in (("golden", kg, golden), ("run", kr, run)):
        uniq, counts = np.unique(k, return_counts=True)
        if (counts > 1).any():
            i = int(np.flatnonzero(k == uniq[counts > 1][0])[0])
            raise ScoringError(f"OP {int(golden.op)} {side} has row (block {v.block_ids[i]!r}, window "
                               f"{int(v.window[i])}, speaker {int(v.speaker[i])}) twice")
    _, gi, ri = np.intersect1d(kg, kr, assume_unique=True, return_indices=True)
    order = np.argsort(gi, kind="stable")  # keep golden order
    gi, ri = gi[order], ri[order]
    only_g = np.setdiff1d(np.arange(golden.rows), gi)
    only_r = np.setdiff1d(np.arange(run.rows), ri)
    a, b = golden.embedding[gi], run.embedding[ri]
    diff = row_diff(a, b)
    cosine, rel = cosine_and_rel_l2(b, a)
    same = ~diff.differs & (diff.non_finite == 0)
    cosine[same], rel[same] = 1.0, 0.0  # bit-identical rows: exact, not float64 rounding of a dot product
    inputs_differ = int((golden.weights[gi] != run.weights[ri]).any(axis=1).sum())
    label = lambda v, idx: [(str(v.block_ids[i]), int(v.window[i]), int(v.speaker[i])) for i in idx]  # noqa: E731
    return VoiceprintScore(
        op=golden.op,
        block_ids=golden.block_ids[gi],
        window=golden.window[gi],
        speaker=golden.speaker[gi],
        max_abs=diff.max_abs,
        max_ulp=diff.max_ulp,
        differs=diff.differs,
        differing_total=diff.differing,
        non_finite=diff.non_finite,
        cosine=cosine,
        rel_l2=rel,
        elements=geometry.embedding_dim,
        missing=label(golden, only_g),
        extra=label(run, only_r),
        inputs_differ=inputs_differ,
    )
