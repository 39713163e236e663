"""The packing laws on requests the engine captured in production, judged as they stand.

A captured request is the engine's packer's answer with the blocks it was given unknown: all
the audit has is the request and its layout. What can be judged from that alone is judged with
the laws' own checks (:mod:`harness.packers.validate`, :mod:`harness.laws.laws`):

- ``well-formed``: the request meets the contract (:func:`harness.data.blocks.check_request`: finite
  SPAN/WEIGHTS, OFFSETS + VALID inside SPAN, IDX in range, dtypes); its layout is consistent
  (:func:`harness.packers.validate.check_packed`: one segment per block, contiguous, covering
  SPAN, the windows and the rows exactly; padding blocks empty: VALID 0, no rows); every real
  block, split out by the layout, is a block the release sends (:meth:`harness.data.blocks.Block.create`:
  exactly ``windows_per_block`` windows, speaker labels in range); block ids unique in the request;
- ``rebased-inside``: each block's OFFSETS + VALID lie inside its own part of SPAN and its IDX
  inside its own windows (:func:`harness.laws.laws.rebased_inside`).

``own-samples`` (each window sees the samples it sees alone) follows from ``rebased-inside`` for a
request split by its own layout, so it adds nothing here. What no check on a request can see: a
rebase error that keeps every window inside its own block (e.g. every window of a block one sample
late, none reaching its span's end) is indistinguishable from a block with other offsets. That is
what ``harness laws --packer-cmd`` on the engine's packer is for (docs/audit.md).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from harness.base.errors import BlockError
from harness.capture.schema import CapturedRequest
from harness.data.blocks import Block, BlockRows, check_request
from harness.data.geometry import Geometry
from harness.data.schemas.audit import MAX_VIOLATIONS, Laws, Served, ViolationModel
from harness.laws.law_tools import LawBroken
from harness.laws.laws import rebased_inside
from harness.packers.packer_errors import PackerAnswerError
from harness.packers.packing import PackedRequest
from harness.packers.validate import check_packed

CAPTURE_LAWS = ("well-formed", "rebased-inside")


@dataclass(frozen=True)
class Violation:
    """One law one captured request breaks: which request (id, file row), which block, what differed."""

    law: str
    request_id: str
    row: int
    block_id: str | None
    what: str

    def line(self) -> str:
        block = f" block {self.block_id!r}" if self.block_id is not None else ""
        return f"law {self.law} broken by request {self.request_id!r} (row {self.row}){block}: {self.what}"

    def model(self) -> ViolationModel:
        """The audit file's violation object."""
        return ViolationModel(
            law=self.law, request_id=self.request_id, row=self.row, block_id=self.block_id, what=self.what
        )


def check_captured(request: CapturedRequest, geometry: Geometry) -> list[Violation]:
    """The law ``request`` breaks first ([] when all hold): one violation per request.

    A request that is not well formed is judged on nothing else (its layout cannot be trusted); a
    block whose windows leave its own part of SPAN is not then also named for its split-out offsets.
    """
    packed = request.packed

    def broken(law: str, what: str, block: str | None = None) -> Violation:
        return Violation(law, request.request_id, request.row, block, what)

    try:
        check_request(packed.tensors(), geometry, where="the request")
    except BlockError as exc:
        return [broken("well-formed", f"{exc.field}={exc.value!r}: {exc.reason}", _block_of(exc.field, packed))]
    real = [s for s in packed.segments if not s.padding]
    if not real:
        return [broken("well-formed", f"the layout holds {len(packed.segments)} padding segment(s) and no real block")]
    ids = [s.block_id for s in real]
    twice = next((b for i, b in enumerate(ids) if b in ids[:i]), None)
    if twice is not None:
        return [broken("well-formed", "the block id appears twice in the layout", twice)]
    pad_to = len(packed.segments) if len(real) < len(packed.segments) else None
    every = [s.block_id for s in packed.segments]
    split = packed.split()
    try:
        check_packed(packed, split, pad_to, geometry, "the request")
    except PackerAnswerError as exc:
        return [broken("well-formed", str(exc).removeprefix("the request: "), _named_block(str(exc), every))]
    try:
        rebased_inside(packed)
    except LawBroken as exc:  # the split blocks' offsets are then wrong for the same reason: one violation
        return [broken("rebased-inside", exc.what, _named_block(exc.what, every))]
    for block in split:
        try:
            Block.create(
                block.id,
                block.op,
                block.span,
                block.offsets,
                block.valid,
                geometry,
                BlockRows(block.weights, block.idx, block.speakers),
            )
        except BlockError as exc:
            return [
                broken(
                    "well-formed",
                    f"split out by the layout, it is not a block of this release: "
                    f"{exc.field}={exc.value!r}: {exc.reason}",
                    block.id,
                )
            ]
    return []


def blocks_of(request: CapturedRequest, geometry: Geometry) -> list[Block]:
    """The real blocks of a request that obeys the laws, as each was before packing (validated)."""
    return [
        Block.create(b.id, b.op, b.span, b.offsets, b.valid, geometry, BlockRows(b.weights, b.idx, b.speakers))
        for b in request.packed.split()
    ]


_INDEX = re.compile(r"^(SPAN|OFFSETS|VALID|WEIGHTS|IDX)\[(\d+)")


def _block_of(field: str, packed: PackedRequest) -> str | None:
    """The block holding the element a contract error names (``OFFSETS[12]`` -> the block of window 12)."""
    m = _INDEX.match(field)
    if not m:
        return None
    name, i = m.group(1), int(m.group(2))
    for seg in packed.segments:
        part = {
            "SPAN": seg.span_slice,
            "OFFSETS": seg.window_slice,
            "VALID": seg.window_slice,
            "WEIGHTS": seg.row_slice,
            "IDX": seg.row_slice,
        }[name]
        if part.start <= i < part.stop:
            return seg.block_id
    return None


def _named_block(text: str, ids: list[str]) -> str | None:
    """The first block id a law's message quotes (the laws name blocks as 'block <repr>')."""
    found = [(text.find(repr(b)), b) for b in ids if repr(b) in text]
    return min(found)[1] if found else None


@dataclass
class Survey:
    """The first pass over a capture: the laws on every request, and what the capture says about its
    traffic (who served it, where, when). Memory: counters and the first violations only."""

    geometry: Geometry
    requests: int = 0
    blocks: int = 0
    padding_blocks: int = 0
    op_requests: Counter[int] = field(default_factory=Counter)
    op_blocks: Counter[int] = field(default_factory=Counter)
    fingerprints: Counter[str] = field(default_factory=Counter)
    devices: Counter[str] = field(default_factory=Counter)
    versions: Counter[str] = field(default_factory=Counter)
    first: str | None = None
    last: str | None = None
    broken: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)

    def add(self, request: CapturedRequest) -> None:
        op = int(request.op)
        real = sum(not s.padding for s in request.packed.segments)
        self.requests += 1
        self.blocks += real
        self.padding_blocks += len(request.packed.segments) - real
        self.op_requests[op] += 1
        self.op_blocks[op] += real
        self.fingerprints[request.model_fingerprint] += 1
        self.devices[request.device_kind] += 1
        self.versions[request.engine_version] += 1
        self.first = min(self.first or request.captured_at, request.captured_at)
        self.last = max(self.last or request.captured_at, request.captured_at)
        for v in check_captured(request, self.geometry):
            self.broken[v.law] += 1
            if len(self.violations) < MAX_VIOLATIONS:
                self.violations.append(v)

    @property
    def passed(self) -> bool:
        return not self.broken

    def laws(self) -> Laws:
        """The audit file's ``laws`` object."""
        return Laws(
            passed=self.passed,
            judged=list(CAPTURE_LAWS),
            requests=self.requests,
            blocks=self.blocks,
            padding_blocks=self.padding_blocks,
            broken=dict(self.broken),
            violations=[v.model() for v in self.violations],
        )

    def served(self) -> Served:
        """The audit file's ``served`` object."""
        return Served(
            fingerprints=dict(self.fingerprints),
            devices=dict(self.devices),
            engine_versions=dict(self.versions),
            first=self.first,
            last=self.last,
        )
