"""Matching voiceprint rows of two sides by (block, window, speaker), vectorised.

A batch holds hundreds of rows per side; matching them through Python tuples and dicts cost more
than judging their embeddings. Keys are packed into one int64 each (block code, window, speaker)
and matched by sorting. When both sides list the same keys in the same order (isolated mode: every
lane is called with the golden's rows) the match is the identity, found in one comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.data.outputs import VoiceprintOutputs

_BITS = 24  # window and speaker each below 2**24: packed keys are exact


@dataclass(frozen=True)
class RowMatch:
    """Golden rows ``golden[i]`` match run rows ``run[i]``; the rest are on one side only."""

    golden: np.ndarray  # int64 indices into the golden's rows, in golden order
    run: np.ndarray  # int64 indices into the run's rows
    golden_only: np.ndarray  # int64 indices, golden order
    run_only: np.ndarray  # int64 indices, run order
    identity: bool = False  # both sides hold the same keys in the same order


def key(v: VoiceprintOutputs, i: int) -> tuple[str, int, int]:
    """Row ``i``'s key as a tuple (for messages)."""
    return str(v.block_ids[i]), int(v.window[i]), int(v.speaker[i])


def first_duplicate(v: VoiceprintOutputs) -> tuple[str, int, int] | None:
    """The key of the first row (in order) whose key an earlier row already has; None if none."""
    codes = _packed(v, _codes(v.block_ids))
    if codes is None:
        return _first_duplicate_slow(v)
    _, first = np.unique(codes, return_index=True)
    if first.size == codes.size:
        return None
    seen_before = np.ones(codes.size, dtype=bool)
    seen_before[first] = False
    return key(v, int(np.flatnonzero(seen_before)[0]))


def match(golden: VoiceprintOutputs, run: VoiceprintOutputs) -> RowMatch:
    """Match rows by key (each side's keys distinct: see :func:`first_duplicate`)."""
    if _same_keys(golden, run):
        every = np.arange(golden.rows, dtype=np.int64)
        none = np.zeros(0, dtype=np.int64)
        return RowMatch(every, every, none, none, identity=True)
    both = np.concatenate([golden.block_ids, run.block_ids]).astype(object)
    codes = _codes(both)
    kg = _packed(golden, codes[: golden.rows])
    kr = _packed(run, codes[golden.rows :])
    if kg is None or kr is None:
        return _match_slow(golden, run)
    order = np.argsort(kr, kind="stable")
    pos = np.searchsorted(kr[order], kg)
    pos_in = np.minimum(pos, max(kr.size - 1, 0))
    found = (pos < kr.size) & (kr[order][pos_in] == kg) if kr.size else np.zeros(kg.size, dtype=bool)
    gi = np.flatnonzero(found).astype(np.int64)
    ri = order[pos_in[found]].astype(np.int64)
    run_only = np.flatnonzero(~np.isin(kr, kg)).astype(np.int64)
    return RowMatch(gi, ri, np.flatnonzero(~found).astype(np.int64), run_only)


def _same_keys(a: VoiceprintOutputs, b: VoiceprintOutputs) -> bool:
    return (
        a.rows == b.rows
        and np.array_equal(a.window, b.window)
        and np.array_equal(a.speaker, b.speaker)
        and bool((a.block_ids == b.block_ids).all())
    )


def _codes(block_ids: np.ndarray) -> np.ndarray:
    if block_ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, inverse = np.unique(block_ids.astype(str), return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def _packed(v: VoiceprintOutputs, codes: np.ndarray) -> np.ndarray | None:
    """One int64 per row, or None when a window or speaker lies outside what the packing holds."""
    w, s = v.window.astype(np.int64), v.speaker.astype(np.int64)
    if w.size and (w.min() < 0 or w.max() >= 1 << _BITS or s.min() < 0 or s.max() >= 1 << _BITS):
        return None
    return (codes << (2 * _BITS)) | (w << _BITS) | s


def _first_duplicate_slow(v: VoiceprintOutputs) -> tuple[str, int, int] | None:
    seen: set[tuple[str, int, int]] = set()
    for i in range(v.rows):
        k = key(v, i)
        if k in seen:
            return k
        seen.add(k)
    return None


def _match_slow(golden: VoiceprintOutputs, run: VoiceprintOutputs) -> RowMatch:
    kg = [key(golden, i) for i in range(golden.rows)]
    kr = [key(run, i) for i in range(run.rows)]
    pos_r = {k: i for i, k in enumerate(kr)}
    in_golden = set(kg)
    gi = np.array([i for i, k in enumerate(kg) if k in pos_r], dtype=np.int64)
    ri = np.array([pos_r[kg[i]] for i in gi], dtype=np.int64)
    return RowMatch(
        gi,
        ri,
        np.array([i for i, k in enumerate(kg) if k not in pos_r], dtype=np.int64),
        np.array([i for i, k in enumerate(kr) if k not in in_golden], dtype=np.int64),
    )
