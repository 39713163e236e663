"""What judging a packer found, as data (for tests and JSON) and as text (for people).

A broken law is shown the way a packer's author needs to fix it: the law, the *minimal* block
set hypothesis shrank to (ids, span lengths and audio, OFFSETS, VALID, rows), the request the
packer produced for it (tensors and layout), and what differed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from harness.blocks import Block
from harness.packing import PackedRequest

HELD, BROKEN, NOT_JUDGED = "held", "broken", "not judged"


@dataclass(frozen=True)
class Counterexample:
    """The minimal example breaking a law, and what the packer made of it."""

    blocks: tuple[Block, ...]
    params: dict
    what: str
    packed: PackedRequest | None
    found_after: int  # examples tried before the first failure (shrinking not counted)
    reproducible: bool = True


@dataclass(frozen=True)
class LawOutcome:
    """One law judged on one packer."""

    law: str
    statement: str
    status: str  # HELD, BROKEN or NOT_JUDGED
    judged: int  # examples on which the law was judged
    skipped: int  # examples it could not judge (the packer's answer was not well formed)
    notes: tuple[str, ...] = ()
    counterexample: Counterexample | None = None

    def to_dict(self) -> dict:
        out = {"law": self.law, "statement": self.statement, "status": self.status, "judged": self.judged,
               "skipped": self.skipped, "notes": list(self.notes)}
        if self.counterexample is not None:
            c = self.counterexample
            out["counterexample"] = {"blocks": [block_dict(b) for b in c.blocks], "params": c.params, "what": c.what,
                                     "found_after": c.found_after, "reproducible": c.reproducible,
                                     "packed": None if c.packed is None else request_dict(c.packed)}
        return out


@dataclass(frozen=True)
class LawsReport:
    """Every law judged on one packer: ``ok`` only when each one held on judged examples."""

    packer: dict
    examples: int
    seed: int
    outcomes: tuple[LawOutcome, ...]
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return all(o.status == HELD for o in self.outcomes)

    @property
    def broken(self) -> list[LawOutcome]:
        return [o for o in self.outcomes if o.status != HELD]

    def to_dict(self) -> dict:
        return {"packer": self.packer, "examples": self.examples, "seed": self.seed, "ok": self.ok,
                "seconds": round(self.seconds, 3), "laws": [o.to_dict() for o in self.outcomes]}

    def render(self) -> str:
        lines = [f"packing laws for packer {self.packer.get('name', '?')!r}: up to {self.examples} examples per law, "
                 f"seed {self.seed}"]
        width = max(len(o.law) for o in self.outcomes)
        for o in self.outcomes:
            if o.status == HELD:
                count = f"{o.judged} examples" + (f", {o.skipped} not judged (malformed answers)" if o.skipped else "")
            elif o.status == BROKEN:
                found = o.counterexample.found_after
                count = f"minimal counterexample of {len(o.counterexample.blocks)} block(s), found after " \
                        f"{found} example{'s' if found != 1 else ''}"
            else:
                count = f"none of {o.skipped} examples could be judged: every answer was malformed"
            note = "".join(f"; {n}" for n in o.notes)
            status = o.status if o.status == HELD else o.status.upper()
            lines.append(f"  {o.law:<{width}}  {status:<10} ({count}{note})")
        for o in self.outcomes:
            if o.status == BROKEN:
                lines.append("")
                lines.extend(render_broken(o))
        failed = self.broken
        lines.append("")
        lines.append(f"all {len(self.outcomes)} laws hold ({self.seconds:.1f} s)" if not failed else
                     f"{len(failed)} of {len(self.outcomes)} laws broken or not judged: "
                     f"{', '.join(o.law for o in failed)} ({self.seconds:.1f} s)")
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


def describe_params(params: dict, blocks: Sequence[Block]) -> str:
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
    text = (f"{block.id}: SPAN {block.span.shape[0]} samples {_arr(block.span, 8)}, OFFSETS {_arr(block.offsets)}, "
            f"VALID {_arr(block.valid)}")
    if block.op.is_voiceprint:
        text += f", rows {block.rows}: IDX {_arr(block.idx)}"
        if block.speakers is not None:
            text += f", speakers {_arr(block.speakers)}"
    return text


def describe_request(packed: PackedRequest) -> list[str]:
    lines = [f"OP {int(packed.op)}, k={packed.k}, SPAN {packed.span.shape[0]} samples {_arr(packed.span, 8)}",
             f"OFFSETS {_arr(packed.offsets, 48)}", f"VALID   {_arr(packed.valid, 48)}"]
    if packed.idx is not None:
        weights = None if packed.weights is None else list(packed.weights.shape)
        lines.append(f"IDX {_arr(packed.idx, 48)}, WEIGHTS {weights}"
                     + (f", speakers {_arr(packed.speakers, 48)}" if packed.speakers is not None else ""))
    layout = "; ".join(
        f"{s.block_id}{' (padding)' if s.padding else ''} SPAN[{s.span_start}:{s.span_start + s.span_length}] "
        f"windows[{s.window_start}:{s.window_start + s.windows}] rows[{s.row_start}:{s.row_start + s.rows}]"
        for s in packed.segments)
    lines.append(f"layout: {layout}")
    if packed.batch_inputs:
        lines.append("index tensors: " + ", ".join(f"{k} {_arr(v)}" for k, v in sorted(packed.batch_inputs.items())
                                                    if k != "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"))
    return lines


def block_dict(block: Block) -> dict:
    out = {"id": block.id, "op": int(block.op), "span_length": int(block.span.shape[0]),
           "offsets": block.offsets.tolist(), "valid": block.valid.tolist(), "rows": block.rows}
    if block.idx is not None:
        out["idx"] = block.idx.tolist()
    return out


def request_dict(packed: PackedRequest) -> dict:
    return {"op": int(packed.op), "k": packed.k, "span_length": int(packed.span.shape[0]),
            "offsets": packed.offsets.tolist(), "valid": packed.valid.tolist(),
            "idx": None if packed.idx is None else packed.idx.tolist(),
            "segments": [asdict(s) for s in packed.segments]}
