"""Known-bad packers: the negative controls the laws must catch, at least one per law.

Each is a ``--packer``-style function or class (``harness laws --packer
harness.laws.law_controls:off_by_one_packer``) built on the harness's packer with one real-world
bug added:

=========================== ====================================================================
off_by_one_packer           OFFSETS of every block after the first rebased one sample too far
leaky_packer                windows run on for a whole window, into the next block's audio
speaker_dropping_packer     voiceprint rows lose their speaker labels
exclusive_index_packer      BATCH_ACCUMULATED_ELEMENT_COUNT emitted as starts, not ends
padded_index_packer         BATCH_ACCUMULATED_ELEMENT_COUNT one too high, only when padded
padding_length_packer       padding items given a length of one sample in the index tensors
truncate_at_16_packer       drops every block after the 16th; ``truncate_at_40_packer``: 40th
PaddingFirstPacker          padding placed first, and unpack returns the padding's outputs
NoRebaseNestingPacker       takes packs, but packing two packs does not rebase the second
=========================== ====================================================================

examples/packer_engine_example.py reproduces the first two behind the wire (``--bug off-by-one``,
``--bug leak``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from harness.data.blocks import Block
from harness.laws.strategies import W
from harness.packers.packing import PackedRequest, Segment, pack, ragged_batch_inputs, unpack


def off_by_one_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """Rebases the OFFSETS of every block after the first one sample too far."""
    good = pack(items, pad_to=pad_to)
    offsets = good.offsets.copy()
    for seg in good.segments[1:]:
        offsets[seg.window_slice] += 1
    return PackedRequest(good.op, good.span, offsets, good.valid, good.weights, good.idx, good.speakers, good.segments)


def leaky_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """Lets every non-empty window run on for a whole window (law geometry), into the next block's audio."""
    good = pack(items, pad_to=pad_to)
    valid = np.minimum(W, good.span.shape[0] - good.offsets).astype(np.int32)
    valid = np.where(good.valid > 0, valid, 0).astype(np.int32)
    return PackedRequest(good.op, good.span, good.offsets, valid, good.weights, good.idx, good.speakers, good.segments)


def speaker_dropping_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """Forgets the voiceprint rows' speakers (scoring could no longer match rows by speaker)."""
    good = pack(items, pad_to=pad_to)
    return PackedRequest(good.op, good.span, good.offsets, good.valid, good.weights, good.idx, None, good.segments)


def exclusive_index_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """Emits BATCH_ACCUMULATED_ELEMENT_COUNT as an exclusive prefix sum (starts, not ends): off by one item."""
    good = pack(items, pad_to=pad_to)
    index = good.ragged_index()  # Triton's index tensors by their input names: the wire format itself
    # the accumulated counts without and with the leading zero, by their Triton input names
    index["BATCH_ACCUMULATED_ELEMENT_COUNT"] = index["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"][:-1]
    return PackedRequest(
        good.op, good.span, good.offsets, good.valid, good.weights, good.idx, good.speakers, good.segments, index
    )


def padded_index_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """Emits Triton's index tensors, BATCH_ACCUMULATED_ELEMENT_COUNT one too high when the request is padded.

    Spans of 40/30/20/35 samples padded to 6 give [41 71 91 126 126 126], past the 125-sample SPAN.
    """
    good = pack(items, pad_to=pad_to)
    index = good.ragged_index()  # Triton's index tensors by their input names: the wire format itself
    if any(s.padding for s in good.segments):
        # the accumulated counts, by their Triton input name
        index["BATCH_ACCUMULATED_ELEMENT_COUNT"] = index["BATCH_ACCUMULATED_ELEMENT_COUNT"] + np.int32(1)
    return PackedRequest(
        good.op, good.span, good.offsets, good.valid, good.weights, good.idx, good.speakers, good.segments, index
    )


def padding_length_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """Emits Triton's index tensors with every padding item one sample long (the layout says 0)."""
    good = pack(items, pad_to=pad_to)
    index = ragged_batch_inputs([(s.span_length + int(s.padding),) for s in good.segments], dtype=np.int32)
    return PackedRequest(
        good.op, good.span, good.offsets, good.valid, good.weights, good.idx, good.speakers, good.segments, index
    )


def _truncating(limit: int) -> Callable[[Sequence[Block], int | None], PackedRequest]:
    def truncating_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
        return pack(list(items)[:limit], pad_to=None if pad_to is None else min(pad_to, limit))

    truncating_packer.__doc__ = f"Packs at most {limit} blocks (padding included), dropping the rest."
    return truncating_packer


truncate_at_16_packer = _truncating(16)
truncate_at_40_packer = _truncating(40)


class PaddingFirstPacker:
    """Puts the padding blocks first, then unpacks the first n segments as if they were the real blocks."""

    name = "padding-first"

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
        real = pack(items)
        if pad_to is None or pad_to == len(items):
            return real
        padded = pack(items, pad_to=pad_to)
        pads = [s for s in padded.segments if s.padding]
        # the same request with the empty padding blocks moved to the front (their spans are empty)
        windows = sum(s.windows for s in pads)
        segments: list[Segment] = []
        for seg in pads:
            segments.append(Segment(seg.block_id, 0, 0, len(segments) * seg.windows, seg.windows, 0, 0, True))
        for seg in real.segments:
            segments.append(
                Segment(
                    seg.block_id,
                    seg.span_start,
                    seg.span_length,
                    seg.window_start + windows,
                    seg.windows,
                    seg.row_start,
                    seg.rows,
                )
            )
        lead_offsets = np.zeros(windows, np.int64)
        idx = None if real.idx is None else (real.idx + windows).astype(np.int32)
        return PackedRequest(
            real.op,
            real.span,
            np.r_[lead_offsets, real.offsets],
            np.r_[np.zeros(windows, np.int32), real.valid],
            real.weights,
            idx,
            real.speakers,
            tuple(segments),
        )

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        out = outputs[packed.op.output_name]
        real = len(packed.block_ids)
        return [
            np.array(out[s.window_slice] if not packed.op.is_voiceprint else out[s.row_slice])
            for s in packed.segments[:real]
        ]

    def describe(self) -> dict[str, str]:
        """The Packer protocol's description of a control: its name and kind, every value a string."""
        return {"name": self.name, "kind": "control"}

    def close(self) -> None:
        """Nothing to release."""


class NoRebaseNestingPacker:
    """Takes packs (like the harness's packer) but concatenates them without rebasing the second one."""

    name = "no-rebase-nesting"
    accepts_packs = True

    def pack(self, items: Sequence[Block | PackedRequest], pad_to: int | None = None) -> PackedRequest:
        if not any(isinstance(i, PackedRequest) for i in items):
            return pack(items, pad_to=pad_to)
        whole = pack(items, pad_to=pad_to)
        raw = np.concatenate([i.offsets for i in items])
        return PackedRequest(
            whole.op,
            whole.span,
            raw.astype(np.int64),
            whole.valid,
            whole.weights,
            whole.idx,
            whole.speakers,
            whole.segments,
        )

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return unpack(packed, outputs)

    def describe(self) -> dict[str, str]:
        """The Packer protocol's description of a control: its name and kind, every value a string."""
        return {"name": self.name, "kind": "control"}

    def close(self) -> None:
        """Nothing to release."""
