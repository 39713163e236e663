"""The calls of a model check: each request sent as the lanes send it, its answer kept or its failure in words.

Every call goes through the in-process backend (:class:`lanes.backends.backend.InProcessBackend`), as the lanes' calls
do: the numeric settings applied first, the answer's name, dtype and shape checked
(:func:`harness.data.response.check_response`), the call timed. A model that raises, or answers another
question, is a failed check here, not the end of the check. The request is handed over as copies and compared
afterwards: a model that writes into its request would change what the lanes send next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.base.errors import HarnessError
from harness.data.blocks import Block
from harness.data.ops import Op
from harness.packers.packing import PackedRequest, pack, unpack
from lanes.backends.backend import InProcessBackend

PAIRS = ("[A, B]", "[A, B']", "[B, A]", "[B', A]")  # the packed calls of each OP, in the order sent
SLOTS = ((0, "[A, B]", "[A, B']"), (1, "[B, A]", "[B', A]"))  # block A's slot, and the two calls compared there


@dataclass(frozen=True)
class Sent:
    """One call: what was sent (``label``: which blocks, alone or packed) and what came back."""

    op: Op
    label: str
    blocks: int
    windows: int
    rows: int
    output: np.ndarray | None
    seconds: float | None
    error: str | None
    packed: PackedRequest | None = None

    def part(self, slot: int) -> np.ndarray | None:
        """The answer of the block at ``slot`` (the whole answer of a block sent alone)."""
        if self.output is None:
            return None
        if self.packed is None:
            return self.output
        return unpack(self.packed, {self.op.output_name: self.output})[slot]


def send_alone(backend: InProcessBackend, block: Block, label: str) -> Sent:
    return _send(backend, block.op, block.tensors(), 1, block.windows, block.rows, label, None)


def send_packed(backend: InProcessBackend, blocks: Sequence[Block], label: str) -> Sent:
    packed = pack(list(blocks))
    return _send(backend, packed.op, packed.tensors(), packed.k, packed.windows, packed.rows, label, packed)


def _send(
    backend: InProcessBackend,
    op: Op,
    request: dict[str, np.ndarray],
    blocks: int,
    windows: int,
    rows: int,
    label: str,
    packed: PackedRequest | None,
) -> Sent:
    given = {name: np.array(value, copy=True) for name, value in request.items()}
    where = f"OP {int(op)}, {label}"
    try:
        result = backend.call(op, given, windows, rows, where)
    except HarnessError as exc:  # the model raised (named by the backend), or answered another question
        return Sent(op, label, blocks, windows, rows, None, None, str(exc), packed)
    for name, value in request.items():
        if given[name].shape != value.shape or given[name].tobytes() != value.tobytes():
            return Sent(
                op,
                label,
                blocks,
                windows,
                rows,
                None,
                None,
                f"{where}: infer wrote into its request's {name} (the lanes send a request's arrays again, to "
                "other lanes: copy an input before changing it)",
                packed,
            )
    return Sent(op, label, blocks, windows, rows, np.array(result.output, copy=True), result.wall_s, None, packed)


@dataclass(frozen=True)
class Difference:
    """How two answers of the same shape differ: elements whose bits differ, of how many, the largest finite
    difference and where it is (the index of the first element at that difference)."""

    differing: int
    total: int
    max_abs: float
    at: tuple[int, ...]
    non_finite: bool  # some differing element is NaN or Inf on one side

    def words(self, unit: str) -> str:
        where = ", ".join(f"{name} {i}" for name, i in zip(_axes(unit), self.at, strict=False))
        size = f"max abs {self.max_abs:.3g} at {where}" if not self.non_finite or self.max_abs > 0 else where
        extra = " (NaN or Inf on one side)" if self.non_finite else ""
        return f"{self.differing:,} of {self.total:,} values differ, {size}{extra}"


def difference(a: np.ndarray, b: np.ndarray) -> Difference | None:
    """None when ``a`` and ``b`` are the same bits; else how they differ."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return Difference(max(a.size, b.size), max(a.size, b.size), float("inf"), (), True)
    same = a.view(np.uint8).reshape(a.shape + (-1,)) == b.view(np.uint8).reshape(b.shape + (-1,))
    differs = ~same.all(axis=-1) if a.ndim else np.array(not bool(same.all()))
    count = int(np.count_nonzero(differs))
    if count == 0:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(a.astype(np.float64) - b.astype(np.float64))
    finite = np.isfinite(gap)
    non_finite = bool((differs & ~finite).any())
    worst = np.where(finite & differs, gap, -1.0)
    flat = int(np.argmax(worst)) if (finite & differs).any() else int(np.flatnonzero(differs.reshape(-1))[0])
    at = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    return Difference(count, int(a.size), float(max(worst.max(), 0.0)), at, non_finite)


def _axes(unit: str) -> tuple[str, ...]:
    return ("window", "frame", "class") if unit == "segmentation" else ("row", "element")


@dataclass
class OpCalls:
    """One OP's calls: block A alone twice, block B alone, the four packed calls, A staged (None: no stage())."""

    op: Op
    alone: list[Sent]
    pairs: dict[str, Sent]
    derived_rows: bool  # OP 1/2: the rows came from the model's own OP 0 answers (else stand-in rows)
    staged: Sent | None = None
    again: dict[str, list[Sent]] = field(default_factory=dict)  # pairs sent again: A's slot moved with its neighbour

    @property
    def sent(self) -> list[Sent]:
        staged = [self.staged] if self.staged is not None else []
        return [*self.alone, *self.pairs.values(), *staged, *(s for again in self.again.values() for s in again)]
