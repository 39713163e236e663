"""What every packer adapter checks on the harness's side, before anything is sent.

The same refusals as :func:`harness.packers.packing.pack` / :func:`harness.packers.packing.unpack` (one OP per
request, no duplicate block, an output that covers the request), so a foreign packer is never
asked a question the harness's own packer would refuse, and never blamed for one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from harness.base.errors import PackingError
from harness.data.blocks import Block
from harness.data.ops import Op
from harness.packers.packing import PackedRequest


def check_items(items: Sequence[Block], pad_to: int | None, label: str) -> None:
    """Refuse (PackingError) what no packer may be asked: no blocks, packs, mixed OPs, duplicates."""
    if not items:
        raise PackingError(f"{label}: nothing to pack: give at least one block")
    for item in items:
        if not isinstance(item, Block):
            raise PackingError(f"{label}: packs blocks only, got a {type(item).__name__}")
    op = items[0].op
    seen: set[str] = set()
    for block in items:
        if block.op is not op:
            raise PackingError(
                f"{label}: cannot mix OPs in one request: block {items[0].id!r} is OP {int(op)}, "
                f"block {block.id!r} is OP {int(block.op)}"
            )
        if block.id in seen:
            raise PackingError(f"{label}: block {block.id!r} appears twice in one pack")
        seen.add(block.id)
    if pad_to is not None and pad_to < len(items):
        raise PackingError(f"{label}: cannot pad {len(items)} blocks down to k={pad_to}")


def check_output(packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> tuple[str, np.ndarray]:
    """The output tensor to unpack, refused unless it covers exactly the request's windows or rows."""
    name = packed.op.output_name
    if name not in outputs:
        raise PackingError(f"OP {int(packed.op)} answer lacks output {name!r} (got {sorted(outputs)})")
    out = np.asarray(outputs[name])
    expected = packed.windows if packed.op is Op.SEGMENTATION else packed.rows
    if out.ndim < 1 or out.shape[0] != expected:
        unit = "windows" if packed.op is Op.SEGMENTATION else "rows"
        raise PackingError(
            f"output {name} has shape {list(out.shape)}: expected {expected} {unit} "
            f"for blocks {packed.block_ids[:3]}{'...' if len(packed.block_ids) > 3 else ''}"
        )
    return name, out


def describe_items(items: Sequence[Block]) -> str:
    """'3 OP 0 blocks ['a', 'b', 'c']' (ids cut after four): for error messages."""
    ids = [b.id for b in items]
    shown = str(ids) if len(ids) <= 4 else f"[{', '.join(repr(i) for i in ids[:3])}, ..., {ids[-1]!r}]"
    return f"{len(items)} OP {int(items[0].op)} block(s) {shown}"
