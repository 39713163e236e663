"""What judging a packer found, as data (for tests and JSON) and as text (for people).

A broken law is shown the way a packer's author needs to fix it: the law, the *minimal* block
set hypothesis shrank to (ids, span lengths and audio, OFFSETS, VALID, rows), the request the
packer produced for it (tensors and layout), and what differed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from harness.data.blocks import Block
from harness.packers.packing import PackedRequest, Segment

HELD, BROKEN, NOT_JUDGED = "held", "broken", "not judged"
LAYOUT_SHOWN = 10  # segments of a request's layout shown in full


@dataclass(frozen=True)
class Counterexample:
    """The minimal example breaking a law, and what the packer made of it."""

    blocks: tuple[Block, ...]
    params: dict[str, Any]
    what: str
    packed: PackedRequest | None
    found_after: int  # examples tried before the first failure (shrinking not counted)
    reproducible: bool = True
    source: str = "search"  # "search": hypothesis's, shrunk; "boundary": a fixed example, blocks deleted


@dataclass(frozen=True)
class LawOutcome:
    """One law judged on one packer."""

    law: str
    statement: str
    status: str  # HELD, BROKEN or NOT_JUDGED (never ok: a custom law skipped examples, or none was judged)
    judged: int  # examples on which the law held (before its first counterexample)
    skipped: int  # examples a custom law could not judge (NotJudged); the kit's laws never skip one
    notes: tuple[str, ...] = ()
    counterexample: Counterexample | None = None
    boundary: int = 0  # of all examples, the fixed boundary ones (harness.laws.boundary) run first

    @property
    def ok(self) -> bool:
        """Held, on at least one example, none of them skipped."""
        return self.status == HELD and self.judged > 0 and not self.skipped

    def to_dict(self) -> dict[str, Any]:
        out = {
            "law": self.law,
            "statement": self.statement,
            "status": self.status,
            "judged": self.judged,
            "skipped": self.skipped,
            "boundary": self.boundary,
            "notes": list(self.notes),
        }
        if self.counterexample is not None:
            c = self.counterexample
            out["counterexample"] = {
                "blocks": [block_dict(b) for b in c.blocks],
                "params": c.params,
                "what": c.what,
                "found_after": c.found_after,
                "reproducible": c.reproducible,
                "source": c.source,
                "packed": None if c.packed is None else request_dict(c.packed),
            }
        return out


@dataclass(frozen=True)
class LawsReport:
    """Every law judged on one packer: ``ok`` only when each one held, judged on every example (never
    when one is broken or not judged; nor when there is no law at all)."""

    packer: dict[str, Any]
    examples: int
    seed: int
    outcomes: tuple[LawOutcome, ...]
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    max_blocks: int = 64  # the largest list of blocks (and pad_to) every law was judged at

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and all(o.ok for o in self.outcomes)

    @property
    def broken(self) -> list[LawOutcome]:
        return [o for o in self.outcomes if not o.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "packer": self.packer,
            "examples": self.examples,
            "seed": self.seed,
            "max_blocks": self.max_blocks,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "laws": [o.to_dict() for o in self.outcomes],
        }

    def render(self) -> str:
        lines = [
            f"packing laws for packer {self.packer.get('name', '?')!r}: boundary examples up to "
            f"{self.max_blocks} blocks, then up to {self.examples} examples per law, seed {self.seed}"
        ]
        width = max((len(o.law) for o in self.outcomes), default=0)
        for o in self.outcomes:
            if o.status == HELD:
                count = f"{o.judged} examples, {o.boundary} of them boundary"
            elif o.status == BROKEN:
                c = o.counterexample
                assert c is not None, "the runner records a counterexample with every broken law"
                kind = ", a boundary example cut down" if c.source == "boundary" else ""
                count = (
                    f"minimal counterexample of {len(c.blocks)} block(s){kind}, found after "
                    f"{c.found_after} example{'s' if c.found_after != 1 else ''}"
                )
            else:
                count = (
                    f"judged on {o.judged} example(s), {o.skipped} could not be judged: "
                    "counted as a failure, never as held"
                )
            note = "".join(f"; {n}" for n in o.notes)
            status = o.status if o.status == HELD else o.status.upper()
            lines.append(f"  {o.law:<{width}}  {status:<10} ({count}{note})")
        for o in self.outcomes:
            if o.status == BROKEN:
                lines.append("")
                lines.extend(render_broken(o))
        failed = self.broken
        lines.append("")
        lines.append(
            f"all {len(self.outcomes)} laws hold ({self.seconds:.1f} s)"
            if self.ok
            else f"{len(failed)} of {len(self.outcomes)} laws broken or not judged: "
            f"{', '.join(o.law for o in failed)} ({self.seconds:.1f} s)"
        )
        return "\n".join(lines)


def render_broken(outcome: LawOutcome) -> list[str]:
    c = outcome.counterexample
    assert c is not None
    lines = [f"law {outcome.law} BROKEN: {outcome.statement}"]
    if not c.reproducible:
        lines.append("  (not reproducible: the packer answered the same blocks differently on a second call)")
    params = describe_params(c.params, c.blocks)
    lines.append(f"  minimal block set: {len(c.blocks)} block(s), OP {int(c.blocks[0].op)}{params}")
    lines.extend(f"    {describe_block(b)}" for b in c.blocks)
    if c.packed is None:
        lines.append("  request the packer produced: none (it failed before answering with one)")
    else:
        lines.append("  request the packer produced:")
        lines.extend(f"    {line}" for line in describe_request(c.packed))
    lines.append(f"  what differed: {c.what}")
    return lines


def describe_params(params: dict[str, Any], blocks: Sequence[Block]) -> str:
    parts = []
    if params.get("pad_to") is not None:
        parts.append(f"padded to k={params['pad_to']}")
    if "extra" in params:
        parts.append(f"padded to k={len(blocks) + params['extra']}")
    if "cut" in params:
        parts.append(f"split after {blocks[params['cut'] - 1].id!r}")
    return "".join(f", {p}" for p in parts)


def _arr(values: np.ndarray, limit: int = 24) -> str:
    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind == "f":
        text = " ".join(f"{v:.4g}" for v in flat[:limit])
    else:
        text = " ".join(str(int(v)) for v in flat[:limit])
    return f"[{text}{' ...' if flat.size > limit else ''}]"


def describe_block(block: Block) -> str:
    text = (
        f"{block.id}: SPAN {block.span.shape[0]} samples {_arr(block.span, 8)}, OFFSETS {_arr(block.offsets)}, "
        f"VALID {_arr(block.valid)}"
    )
    if block.op.is_voiceprint and block.idx is not None:  # (Block.create: OP 1/2 blocks have IDX)
        text += f", rows {block.rows}: IDX {_arr(block.idx)}"
        if block.speakers is not None:
            text += f", speakers {_arr(block.speakers)}"
    return text


def describe_request(packed: PackedRequest) -> list[str]:
    lines = [
        f"OP {int(packed.op)}, k={packed.k}, SPAN {packed.span.shape[0]} samples {_arr(packed.span, 8)}",
        f"OFFSETS {_arr(packed.offsets, 48)}",
        f"VALID   {_arr(packed.valid, 48)}",
    ]
    if packed.idx is not None:
        weights = None if packed.weights is None else list(packed.weights.shape)
        lines.append(
            f"IDX {_arr(packed.idx, 48)}, WEIGHTS {weights}"
            + (f", speakers {_arr(packed.speakers, 48)}" if packed.speakers is not None else "")
        )
    shown = packed.segments if len(packed.segments) <= LAYOUT_SHOWN else packed.segments[: LAYOUT_SHOWN - 2]
    layout = "; ".join(_segment(s) for s in shown)
    if len(shown) < len(packed.segments):  # a request padded to 64: the first segments and the last one
        pads = sum(s.padding for s in packed.segments[len(shown) : -1])
        layout += (
            f"; ... {len(packed.segments) - len(shown) - 1} more ({pads} of them padding) ...; "
            f"{_segment(packed.segments[-1])}"
        )
    lines.append(f"layout: {layout}")
    if packed.batch_inputs:
        lines.append(
            "index tensors: "
            + ", ".join(
                f"{k} {_arr(v)}"
                for k, v in sorted(packed.batch_inputs.items())
                if k != "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"
            )
        )
    return lines


def _segment(s: Segment) -> str:
    return (
        f"{s.block_id}{' (padding)' if s.padding else ''} SPAN[{s.span_start}:{s.span_start + s.span_length}] "
        f"windows[{s.window_start}:{s.window_start + s.windows}] rows[{s.row_start}:{s.row_start + s.rows}]"
    )


def block_dict(block: Block) -> dict[str, Any]:
    out = {
        "id": block.id,
        "op": int(block.op),
        "span_length": int(block.span.shape[0]),
        "offsets": block.offsets.tolist(),
        "valid": block.valid.tolist(),
        "rows": block.rows,
    }
    if block.idx is not None:
        out["idx"] = block.idx.tolist()
    return out


def request_dict(packed: PackedRequest) -> dict[str, Any]:
    return {
        "op": int(packed.op),
        "k": packed.k,
        "span_length": int(packed.span.shape[0]),
        "offsets": packed.offsets.tolist(),
        "valid": packed.valid.tolist(),
        "idx": None if packed.idx is None else packed.idx.tolist(),
        "segments": [asdict(s) for s in packed.segments],
    }
