"""A zero-cost network at a reference geometry: what the harness costs when the GPU is fast.

On a GPU the networks run 50-200x faster than on this CPU, so the harness's own per-block cost
(packing, masks, Parquet, scoring) decides whether the GPU sits idle. This model plugs into the
model contract like any other (``--model lanes.models.null_model:full``) and answers at near-zero cost,
so a benchmark of the whole pipeline measures the harness alone (benchmarks/bench_harness_cost.py).

What it still does, because a real model adapter does it too: it validates the request
(:func:`harness.data.blocks.check_request`: dtypes, ranks, finite audio, offsets inside SPAN).

Its answers are not zeros: each window's segmentation is a row of a precomputed table of
realistic log-probabilities (speaker turns, overlaps, near ties), chosen by a hash of what the
window sees (VALID and the bits of its first and last valid samples); each voiceprint row's
embedding is a table row chosen by its window's hash and its WEIGHTS' active-frame count. So
outputs depend on the input, masks yield voiceprint rows, and every answer depends only on its
own window: packed and unpacked calls agree bitwise (it is batch-invariant by construction).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from harness.base.errors import ModelError
from harness.data import ops
from harness.data.blocks import check_request
from harness.data.geometry import Geometry
from harness.data.ops import Op
from lanes.models.diar_nn_g.config import CONFIGS

SEGMENTATION_TABLE = 61  # distinct window answers (prime: hashes spread over all of them)
SHIFT_TABLE = 67  # per-frame shifts added to them: 61 x 67 distinct windows, full-entropy mantissas
EMBEDDING_TABLE = 251
EMBEDDING_SHIFTS = 257
_MIX = np.uint64(0x9E3779B97F4A7C15)


class NullModel:
    """The model contract (geometry, fingerprint, infer) with table look-ups for networks."""

    # two threads may be inside infer() at once, each answered as alone: it reads only its request and fixed
    # tables (lanes.running.calls_in_flight; a subclass with state shared between calls declares False)
    concurrent_calls: bool = True

    def __init__(self, geometry: Geometry, label: str, seed: int = 0) -> None:
        self.geometry = geometry
        self.seed = int(seed)
        self.name = f"null-{label}-seed{self.seed}"
        rng = np.random.RandomState([self.seed, 7])
        self._segmentation = _segmentation_table(rng, geometry)
        # a per-frame shift of every class keeps each frame's decision and margin (up to rounding) but
        # makes the bytes of every window distinct, as a network's are (Parquet compresses them alike)
        self._shift = (rng.standard_normal((SHIFT_TABLE, geometry.frames_per_window, 1)) * 0.01).astype(np.float32)
        self._embedding = (rng.standard_normal((EMBEDDING_TABLE, geometry.embedding_dim))).astype(np.float32)
        self._embedding_shift = (rng.standard_normal((EMBEDDING_SHIFTS, geometry.embedding_dim)) * 0.01).astype(
            np.float32
        )
        self.fingerprint = hashlib.sha256(
            f"lanes.null_model/1|{label}|{self.seed}|{sorted(geometry.to_dict().items())}".encode()
        ).hexdigest()

    def describe(self) -> dict:
        return {"name": self.name, "kind": "null", "seed": self.seed, "fingerprint": self.fingerprint}

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        fields = check_request(request, self.geometry)
        op = Op(int(fields[ops.OP][0]))
        keys = window_keys(fields[ops.SPAN], fields[ops.OFFSETS], fields[ops.VALID])
        if op is Op.SEGMENTATION:
            out = self._segmentation[keys % np.uint64(SEGMENTATION_TABLE)]
            out += self._shift[(keys >> np.uint64(32)) % np.uint64(SHIFT_TABLE)]
            return {op.output_name: out}
        weights, idx = fields[ops.WEIGHTS], fields[ops.IDX]
        active = np.count_nonzero(weights, axis=1).astype(np.uint64)
        with np.errstate(over="ignore"):
            rows = keys[idx] * _MIX + active
        out = self._embedding[rows % np.uint64(EMBEDDING_TABLE)]
        out += self._embedding_shift[(rows >> np.uint64(32)) % np.uint64(EMBEDDING_SHIFTS)]
        return {op.output_name: out}


def window_keys(span: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """[N] uint64: a hash of what each window sees (its VALID, its first and last valid sample)."""
    bits = np.ascontiguousarray(span, dtype=np.float32).view(np.uint32)
    last = max(int(bits.shape[0]) - 1, 0)
    first = bits[np.minimum(offsets, last)].astype(np.uint64)
    end = bits[np.clip(offsets + np.maximum(valid.astype(np.int64), 1) - 1, 0, last)].astype(np.uint64)
    has_audio = (valid > 0).astype(np.uint64)
    with np.errstate(over="ignore"):
        return ((first * has_audio) * _MIX + end * has_audio) * _MIX + valid.astype(np.uint64)


def _segmentation_table(rng: np.random.RandomState, g: Geometry) -> np.ndarray:
    """[T, frames, classes] float32 log-probabilities: piecewise-constant powerset classes (turns of
    40-300 frames among the 1 to ``speakers`` speakers present in the window: silence, one speaker,
    overlaps), confident mostly, some near ties."""
    frames, classes = g.frames_per_window, g.classes
    power = g.powerset
    table = np.empty((SEGMENTATION_TABLE, frames, classes), dtype=np.float32)
    for t in range(SEGMENTATION_TABLE):
        present = rng.permutation(g.speakers)[: int(rng.randint(1, g.speakers + 1))]
        allowed = [c for c in range(classes) if set(np.flatnonzero(power[c]).tolist()) <= set(present.tolist())]
        labels = np.empty(frames, dtype=np.int64)
        at = 0
        while at < frames:
            length = int(rng.randint(40, 301))
            labels[at : at + length] = allowed[int(rng.randint(len(allowed)))]
            at += length
        logits = rng.standard_normal((frames, classes)) * 0.5
        near_tie = rng.uniform(size=frames) < 0.02
        logits[np.arange(frames), labels] += np.where(
            near_tie, rng.uniform(0.0, 0.1, frames), rng.uniform(2.5, 6.0, frames)
        )
        logits -= logits.max(axis=1, keepdims=True)
        table[t] = (logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))).astype(np.float32)
    return table


def _config_geometry(config: str) -> Geometry:

    if config not in CONFIGS:
        raise ModelError(f"unknown reference geometry {config!r} (known: {sorted(CONFIGS)})")
    return CONFIGS[config].geometry()


def full(seed: int = 0, device: str = "cpu") -> NullModel:
    """The null network at the reference model's full geometry (the release's)."""
    return NullModel(_config_geometry("full"), "full", seed)


def small(seed: int = 0, device: str = "cpu") -> NullModel:
    """The null network at the small test geometry."""
    return NullModel(_config_geometry("small"), "small", seed)
