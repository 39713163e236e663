"""A simulated engine that packs blocks, serves them and captures what it sent and got back.

What the engine does in production, in miniature (so the audit's tests, the docs and anyone
trying ``harness audit`` without an engine have real captures): blocks go through the engine's
packer ``k`` at a time as OP 0 requests; the served segmentation, unpacked by the request's
layout, gives each block's voiceprint rows (the engine's mask function,
:func:`harness.data.masks.voiceprint_rows`); those are packed and served as OP 1 and OP 2 requests.
Every request and its served output is appended to a capture (:class:`harness.capture.CaptureWriter`).

``pack`` is any function ``blocks -> PackedRequest`` (a :class:`harness.packers.packing.Packer`'s ``pack``,
or a deliberately defective one: the audit's negative controls) and is used as it is, unchecked,
as the engine would; ``backend`` serves the requests (its fingerprint and device are recorded).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.capture import CapturedRequest, CaptureWriter
from harness.data.blocks import Block
from harness.data.masks import MaskPolicy, voiceprint_rows
from harness.data.ops import ALL_OPS, Op
from harness.packers.packing import PackedRequest, pack, unpack

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend

ENGINE = "harness-simulated-engine"
PackFn = Callable[[Sequence[Block]], PackedRequest]
# MaskPolicy() itself: mypy takes pydantic's positional Field(default, ...) for a required field
DEFAULT_MASKS = MaskPolicy.model_validate({})


@dataclass(frozen=True)
class Engine:
    """The simulated engine whose captures these are: its name and version (recorded in the capture) and the
    mask policy it derives the voiceprint rows with."""

    name: str = ENGINE
    version: str = "0.0.0-sim"
    masks: MaskPolicy = DEFAULT_MASKS


def serve_and_capture(
    path: Path,
    blocks: Iterable[Block],
    backend: Backend,
    k: int,
    pack_fn: PackFn = pack,
    ops: Sequence[Op] = ALL_OPS,
    engine: Engine = Engine(),
) -> int:
    """Pack ``blocks`` k at a time, serve them with ``backend``, capture every request; returns requests written."""
    g = backend.geometry
    all_blocks = list(blocks)
    engine_version, masks = engine.version, engine.masks
    with CaptureWriter(path, g, engine.name) as writer:
        n = 0

        def serve(packed: PackedRequest) -> list[np.ndarray]:
            nonlocal n
            result = backend.call(packed.op, packed.tensors(), packed.windows, packed.rows, f"request r{n:06d}")
            writer.add(
                CapturedRequest(
                    f"r{n:06d}",
                    packed,
                    result.output,
                    backend.fingerprint,
                    backend.device_kind,
                    engine_version,
                    dt.datetime.now(dt.UTC).isoformat(),
                )
            )
            n += 1
            return unpack(packed, {packed.op.output_name: result.output})

        for start in range(0, len(all_blocks), k):
            chunk = all_blocks[start : start + k]
            segmentation = serve(pack_fn(chunk))
            for op in ops:
                if not op.is_voiceprint:
                    continue
                requests = []
                for block, seg in zip(chunk, segmentation, strict=True):
                    rows = voiceprint_rows(seg, block.valid, op, g, masks)
                    requests.append(block.with_voiceprint(op, rows.weights, rows.idx, rows.speakers, g))
                if sum(r.rows for r in requests):  # no speaker found in the whole chunk: the engine sends nothing
                    serve(pack_fn(requests))
        writer.close()
    return n
