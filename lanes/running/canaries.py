"""Canaries: known defects planted through the user's own model and backend, so a night shows its gate can see.

A pipeline that compared the golden with itself would pass every shape; so would a gate whose evidence
cannot reach a leak on this model and device. Each night, at the smallest packed shape, a few requests of a
small sample of blocks are sent with a defect planted (``harness.pipeline.canaries`` chooses the blocks and
judges the answers with the night's own rules):

- ``leak``: one window of the first block has its valid samples mixed with 1e-6 of the same window of the
  block next to it in the request (a faint read of another user's audio);
- ``rebasing``: the voiceprint row of the first block with the most frame weight has its IDX rebased onto the
  first window of the block next to it (one block too far);
- ``exchange``: the answers of the first two blocks are exchanged on unpacking.

Each is sent as the plain lane would send the request and as the neighbour lane would (the block next to
the first filled with other audio, :mod:`lanes.running.neighbour_lane`): the defect, planted the same way in both, makes
the first block's answer follow its neighbour's audio. The fourth canary (``shift``: an answer moved by twice
its tolerance) needs no call: it moves the night's own answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from harness.data import ops
from harness.data.blocks import Block
from harness.data.masks import VoiceprintRows
from harness.data.ops import Op
from harness.packers.packing import Packer
from lanes.backends.backend_api import Call, CallResult
from lanes.running.device_queue import Ordered
from lanes.running.neighbour_lane import split_chunks
from lanes.running.variants import FILLER, Fill, sent_as

Sent = Literal["leak", "rebasing", "exchange"]
SENT: tuple[Sent, ...] = ("leak", "rebasing", "exchange")
MIX = np.float32(1e-6)  # how much of the neighbour's window the leak canary mixes in
OP_OF: Mapping[Sent, Op] = {"leak": Op.SEGMENTATION, "rebasing": Op.VOICEPRINT, "exchange": Op.SEGMENTATION}


@dataclass(frozen=True)
class CanarySample:
    """The blocks a night's canaries are planted in (k of them, slot order: the defects sit in the first), their
    OP 1 rows as the golden recorded them, and the leak canary's window."""

    k: int
    blocks: list[Block]
    rows: Mapping[str, VoiceprintRows]
    window: int
    fill: Fill


@dataclass
class Answers:
    """One canary's answers, per answered block: the plain request's, the neighbour request's, and the plain
    request sent again (None: not sent); the calls made and their device time."""

    plain: dict[str, np.ndarray]
    beside: dict[str, np.ndarray]
    again: dict[str, np.ndarray] | None = None
    calls: int = 0
    seconds: float = 0.0


def leak_window(first: Block, second: Block) -> int | None:
    """The window of ``first`` where mixing in ``MIX`` of the same window of ``second`` changes the most samples
    (both hold audio there); None: no window changes any."""
    best, found = 0, None
    for w in range(min(first.windows, second.windows)):
        n = int(min(first.valid[w], second.valid[w]))
        if n <= 0:
            continue
        a = first.span[int(first.offsets[w]) : int(first.offsets[w]) + n]
        b = second.span[int(second.offsets[w]) : int(second.offsets[w]) + n]
        changed = int(np.count_nonzero((a + MIX * b).astype(np.float32) != a))
        if changed > best:
            best, found = changed, w
    return found


def send(name: Sent, sample: CanarySample, line: Ordered, packer: Packer, again: bool) -> Answers:
    """Canary ``name`` sent as the plain lane would and as the neighbour lane would (and the plain request once more
    when ``again``), through the device ``line`` (the backend's own queue, as the lanes' calls) and ``packer``."""
    op = OP_OF[name]
    plain_entries = [(b, 0) for b in sample.blocks]
    beside_entries = split_chunks(sample.blocks, sample.k)[0]  # the first block answered, the next one filled
    out = Answers({}, {})
    out.plain = _request(name, op, plain_entries, sample, line, packer, out)
    out.beside = _request(name, op, beside_entries, sample, line, packer, out)
    if again:
        out.again = _request(name, op, plain_entries, sample, line, packer, out)
    return out


def _request(
    name: Sent,
    op: Op,
    entries: Sequence[tuple[Block, int]],
    sample: CanarySample,
    line: Ordered,
    packer: Packer,
    tally: Answers,
) -> dict[str, np.ndarray]:
    sent = [sent_as(b, c, sample.fill) for b, c in entries]
    if name == "leak":  # the first block's window mixed with the same window of its neighbour, as sent
        sent[0] = _mixed(sent[0], sent[1], sample.window)
    if op is not Op.SEGMENTATION:
        sent = [
            b.with_voiceprint(op, r.weights, r.idx, r.speakers, line.backend.geometry)
            for b, r in ((b, sample.rows[original.id]) for b, (original, _) in zip(sent, entries, strict=True))
        ]
    packed = packer.pack(sent)
    tensors = dict(packed.tensors())
    if name == "rebasing":  # the first block's heaviest row onto the next block's first window
        idx = np.array(tensors[ops.IDX], copy=True)
        idx[heaviest_row(sent[0])] = sent[0].windows
        tensors[ops.IDX] = idx
    call = Call(op, tensors, packed.windows, packed.rows, f"canary {name} k={sample.k} OP {int(op)}")
    results: list[CallResult] = []
    line.stage([(call, results.append)])
    line.drain()
    result = results[0]
    tally.calls += 1
    tally.seconds += float(result.wall_s)
    answers = list(packer.unpack(packed, {op.output_name: result.output}))
    if name == "exchange":  # the first two blocks' answers exchanged on unpacking
        answers[0], answers[1] = answers[1], answers[0]
    return {b.id: a for (b, c), a in zip(entries, answers, strict=True) if c != FILLER}


def heaviest_row(block: Block) -> int:
    """The voiceprint row of ``block`` with the most frame weight (a row whose frames barely reach the network's
    own frames would pool almost nothing, whichever window it points at)."""
    assert block.weights is not None
    return int(np.argmax(np.asarray(block.weights, dtype=np.float64).sum(axis=1)))


def _mixed(block: Block, neighbour: Block, w: int) -> Block:
    n = int(min(block.valid[w], neighbour.valid[w]))
    start, source = int(block.offsets[w]), int(neighbour.offsets[w])
    span = np.array(block.span, dtype=np.float32, copy=True)
    span[start : start + n] = (span[start : start + n] + MIX * neighbour.span[source : source + n]).astype(np.float32)
    return dataclasses.replace(block, span=span)
