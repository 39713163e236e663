"""Fixed boundary examples: every law is judged on them first, whatever ``examples`` is.

A random search of a few hundred examples rarely reaches the sizes where packers break: the
largest candidate k (what the engine packs, 32 or more), ``pad_to`` at its maximum, a window
ending on the last sample of a span or an empty one starting after it. A packer that drops
every block after the 16th holds "all laws" at 100 examples. So each law is also judged on this
deterministic list (hypothesis's ``@example`` idea, made explicit):

- block lists of 1, 2 and ``max_blocks`` blocks (the largest candidate k, 64 by default), of
  every OP, and ``max_blocks - 1`` blocks (one padding block);
- padded to ``pad_to = max_blocks`` (one real block and ``max_blocks - 1`` padding blocks, too);
- cuts after the first and before the last block (``associative``);
- blocks whose windows take the first sample, end on the last one, start at the very end of the
  span (empty), are all empty, hold a single sample; voiceprint rows on the first and last window,
  blocks with no rows and with the most rows.

The blocks depend only on their OP and position, so a run is reproducible to the byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.data.blocks import Block, BlockRows
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.laws.strategies import LAW_GEOMETRY, MAX_ROWS
from harness.packers.packing import LAWS_DEFAULT_MAX_BLOCKS

Example = tuple[list[Block], dict[str, Any]]  # blocks, and the law's keyword arguments by name (pad_to, cut, extra)
DEFAULT_MAX_BLOCKS = LAWS_DEFAULT_MAX_BLOCKS  # the largest list the laws pack unless the caller names its largest k


@dataclass(frozen=True)
class LawParams:
    """The kit's own keyword arguments of an example, typed: ``pad_to`` (the request padded to k), ``cut``
    (split after that many blocks) and ``extra`` (padding blocks added), each None where the example gives none.

    An example carries its parameters as the law's keyword arguments by name (``law(packer, blocks, **params)``;
    a custom law's examples may give others), so they stay a mapping there; what the kit itself reads of them
    (to show them, to move them as a counterexample shrinks) is read once, here."""

    pad_to: int | None = None
    cut: int | None = None
    extra: int | None = None

    @classmethod
    def of(cls, params: Mapping[str, object]) -> LawParams:
        # the law's keyword arguments, by name: the kit's three are read here (a custom law's others are its own)
        return cls(_int(params.get("pad_to")), _int(params.get("cut")), _int(params.get("extra")))


def _int(value: object) -> int | None:
    """An integer parameter as an int (numpy's too); None where absent, null or not an integer."""
    return int(value) if isinstance(value, int | np.integer) else None


KINDS = 5


def edge_block(op: Op, position: int, geometry: Geometry = LAW_GEOMETRY) -> Block:
    """Block ``b<position>`` of one of five edge kinds (position mod 5), its audio unique to (OP, position).

    Kind 1 keeps off its span's last sample: a packer that shifts windows shows a law's own
    failure on ``[b0, b1]`` (a window reading the next block), not only a window past SPAN.
    """
    w, n = geometry.window_samples, geometry.windows_per_block
    kind = position % KINDS
    if kind == 1:  # windows inside the span, none reaching its last sample
        length = 2 * w
        offsets = np.array([0, 3, 8, 16, 30, 40, 50, w], np.int64)
        valid = np.array([w, 20, w, 9, w, 0, 13, w - 1], np.int32)
        rows = 4
    elif kind == 0:  # first sample, a full window ending on the last sample, an empty one at the very end
        length = 2 * w + 3
        offsets = np.array([0, 1, w // 2, w, w + 1, length - w, length - w, length], np.int64)
        valid = np.array([w, w, w, w, w // 2, w, 0, 0], np.int32)
        rows = MAX_ROWS
    elif kind == 2:  # every window empty, all of them at the very end of the span
        length = w + 1
        offsets, valid, rows = np.full(n, length, np.int64), np.zeros(n, np.int32), 0
    elif kind == 3:  # a single sample, read by the first window only
        length = 1
        offsets = np.r_[0, np.ones(n - 1)].astype(np.int64)
        valid = np.r_[1, np.zeros(n - 1)].astype(np.int32)
        rows = 1
    else:  # short windows, the last one ending on the last sample
        length = 3 * w
        offsets = np.linspace(0, length - 5, n).astype(np.int64)
        valid = np.minimum(np.full(n, 5), length - offsets).astype(np.int32)
        rows = 3
    rng = np.random.default_rng([int(op), position])
    span = rng.standard_normal(length).astype(np.float32)
    weights = idx = speakers = None
    if op.is_voiceprint:
        idx = (np.arange(rows) * (n - 1) // max(rows - 1, 1)).astype(np.int32)[::-1].copy()  # last window first
        speakers = (np.arange(rows) % geometry.speakers).astype(np.int32)
        weights = rng.random((rows, geometry.frames_per_window)).astype(np.float32)
    return Block.create(f"b{position}", op, span, offsets, valid, geometry, BlockRows(weights, idx, speakers))


def edge_list(op: Op, k: int) -> list[Block]:
    """``k`` edge blocks of one OP, ids ``b0..b<k-1>``."""
    return [edge_block(op, i) for i in range(k)]


def sizes(max_blocks: int) -> list[int]:
    """1, 2, ``max_blocks - 1`` and ``max_blocks`` (those that exist), ascending."""
    return sorted({k for k in (1, 2, max_blocks - 1, max_blocks) if 1 <= k <= max_blocks})


def plain(max_blocks: int) -> list[Example]:
    """Every size, every OP: the examples of the laws without parameters."""
    return [(edge_list(Op(op), k), {}) for k in sizes(max_blocks) for op in (0, 1, 2)]


def padded(max_blocks: int) -> list[Example]:
    """Every plain example unpadded (``pad_to`` None) and padded to ``max_blocks``."""
    return [(b, {"pad_to": pad}) for b, _ in plain(max_blocks) for pad in (None, max_blocks)]


def padding(max_blocks: int) -> list[Example]:
    """Every plain example padded to ``max_blocks`` (``extra`` padding blocks, 0 at the largest size)."""
    return [(b, {"extra": max_blocks - len(b)}) for b, _ in plain(max_blocks)]


def cuts(max_blocks: int) -> list[Example]:
    """Every plain example of two blocks or more, cut after its first block and before its last."""
    return [(b, {"cut": cut}) for b, _ in plain(max_blocks) if len(b) >= 2 for cut in sorted({1, len(b) - 1})]
