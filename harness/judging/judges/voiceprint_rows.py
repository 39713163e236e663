"""The voiceprint evidence's row helpers: the worst value of one metric over the rows judged and where it
was, a row's label in words, and the empty outputs of a side that has no rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import VoiceprintOutputs


class _Worst:
    """The worst value of one metric and where it was, plus how many rows were over the limit."""

    def __init__(self, larger_is_worse: bool) -> None:
        self.sign = 1.0 if larger_is_worse else -1.0
        self.value: float | None = None
        self.where: str | None = None
        self.over = 0

    def add(self, values: np.ndarray, over: np.ndarray, where: Callable[[int], str]) -> None:
        """``where(i)``: the label of row i (asked for the worst row only)."""
        self.over += int(over.sum())
        finite = np.flatnonzero(np.isfinite(values))
        if finite.size:
            i = int(finite[np.argmax(self.sign * values[finite])])
            v = float(values[i])
            if self.value is None or self.sign * v > self.sign * self.value:
                self.value, self.where = v, where(i)


def _label(key: tuple[str, int, int]) -> str:
    return f"block {key[0]!r} window {key[1]} speaker {key[2]}"


def _empty(op: Op, g: Geometry) -> VoiceprintOutputs:
    return VoiceprintOutputs(
        op,
        np.zeros(0, dtype=object),
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
        np.zeros((0, g.frames_per_window), np.float32),
        np.zeros((0, g.embedding_dim), np.float32),
    )
