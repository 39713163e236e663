"""The neighbour arrangement: every block at its own slot of its own request, beside neighbours of other audio.

Two questions that one shuffled arrangement confounds, and physics tells apart. *Where* a block sits (the
request's size, its slot) may move an honest network's answer by a few ULPs: kernels choose their
blocking by shape. *Whom* it sits with may not: at a fixed request and slot, a GEMM row, a convolution, an
LSTM step read only their own sample, and the kernel is chosen by the shapes, never by the contents. So
an honest network on a deterministic backend answers a block bitwise the same whatever audio its
neighbours hold, and an answer that moves with the neighbours' audio is a leak at any size: one user's
audio inside another user's answer.

This arrangement measures exactly that. Each plain request (the consecutive chunk of the plain lane
``k4``, the short tail included) is sent twice more, as lane ``k4.n``: once with the blocks of its even
slots as they are and the blocks of its odd slots *filled* (their audio replaced by seeded noise of the
same loudness: :func:`filler`), once the other way round. A filled block keeps everything but its audio:
its id on the wire (``id~n``), its span's length, OFFSETS, VALID and, for OP 1/2, the WEIGHTS/IDX rows of
the plain request, so the request has the plain request's geometry to the byte (its windows, its rows,
every block at its slot): only the neighbours' audio differs. The answers of the blocks sent as they
are are collected in ``k4.n``; a filled block's answer is dropped. Every block is thus answered once at
its own slot beside other audio, at the cost of two requests per plain request. A request of one block
has no neighbour: it is sent once, as it is.

Fillers use noise rather than another block's audio because noise has no silence: a window that reads
any sample of a neighbour (the 64 samples past its end, the whole request's loudness) reads other
values, and the test cannot miss a leak where two blocks happen to be silent alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

import numpy as np

from harness.data.blocks import Block
from lanes.running.variants import FILLER, Arranger, Fill

NEIGHBOUR_TAG: Final = "n"  # the lane k{k}.n
FILLER_MARK: Final = "~n"  # a filled block's id on the wire: f"{id}~n"
SILENT_LEVEL: Final = 0.05  # the noise's RMS where the block itself is silent


def filler(block: Block, seed: int) -> Block:
    """``block`` with its audio replaced by seeded Gaussian noise of the same RMS (``SILENT_LEVEL`` where the
    block is silent), sent as ``id~n``: every other field (span length, OFFSETS, VALID, WEIGHTS, IDX,
    speakers) is the block's own, so the request keeps its geometry. Deterministic from ``seed`` and the id:
    the same in every process, shard and re-sent control request."""
    span = np.asarray(block.span, dtype=np.float32)
    rms = float(np.sqrt(np.mean(np.square(span, dtype=np.float64)))) if span.size else 0.0
    level = rms if rms > 0.0 else SILENT_LEVEL
    digest = hashlib.sha256(f"neighbour-filler|{seed}|{block.id}".encode()).digest()
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))
    noise = np.asarray(rng.standard_normal(span.shape[0]) * level, dtype=np.float32)
    return dataclasses.replace(block, id=f"{block.id}{FILLER_MARK}", span=noise)


def split_chunks(members: Sequence[Block], k: int) -> list[list[tuple[Block, int]]]:
    """The neighbour arrangement of one group at shape k: per plain chunk (consecutive, as the plain lane
    sends them) of more than one block, two requests, the even slots answered and the odd ones filled, then
    the other way round; a chunk of one block once, as it is. Entries: (member, 0) answered, (member,
    ``FILLER``) filled."""
    out: list[list[tuple[Block, int]]] = []
    for start in range(0, len(members), k):
        chunk = list(members[start : start + k])
        if len(chunk) == 1:
            out.append([(chunk[0], 0)])
            continue
        for parity in (0, 1):
            out.append([(b, 0 if slot % 2 == parity else FILLER) for slot, b in enumerate(chunk)])
    return out


def request_count(n: int, k: int) -> int:
    """The requests :func:`split_chunks` makes of a group of ``n`` blocks at ``k``: two per plain chunk of more
    than one block, one for a chunk of one."""
    full, rest = divmod(n, k)
    return 2 * full + min(rest, 2)


def arranger() -> Arranger:
    """The runner's arranger of the neighbour lane."""
    return split_chunks


FILLS_KEPT: Final = 32  # fillers kept for reuse: a group's (the lanes' groups hold at most 32 blocks)
_KEPT: OrderedDict[tuple[int, str], tuple[weakref.ref[np.ndarray], np.ndarray]] = OrderedDict()
_KEPT_LOCK = threading.Lock()


def fill(seed: int) -> Fill:
    """The neighbour lane's fill: :func:`filler` with the run's seed. A block's noise is drawn once per group, not
    once per shape and OP (drawing a full-geometry block's noise costs milliseconds of the host's time, which the
    device waits for): the last ``FILLS_KEPT`` drawn in this process are kept, each with a weak reference to the
    audio it replaced, and given again for the same seed, block id and span object: the same bits :func:`filler`
    draws. The block around it is the one given (its OP, its rows)."""

    def filled(block: Block) -> Block:
        key = (int(seed), block.id)
        with _KEPT_LOCK:
            found = _KEPT.get(key)
            if found is not None and found[0]() is block.span:
                _KEPT.move_to_end(key)
                return dataclasses.replace(block, id=f"{block.id}{FILLER_MARK}", span=found[1])
        made = filler(block, seed)
        with _KEPT_LOCK:
            _KEPT[key] = (weakref.ref(block.span), made.span)
            _KEPT.move_to_end(key)
            while len(_KEPT) > FILLS_KEPT:
                _KEPT.popitem(last=False)
        return made

    return filled


def neighbours_of(entries: Sequence[tuple[Block, int]]) -> list[tuple[str, int]]:
    """The filled blocks of one neighbour request and their slots: whose audio changed around the answered ones."""
    return [(b.id, slot) for slot, (b, copy) in enumerate(entries) if copy == FILLER]
