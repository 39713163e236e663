"""Localisation: the first layer whose output differs between the exact and the packed run.

Forward hooks on the model's torch modules record, in execution order, each module's output
for one failing block: once when that block runs alone (the exact lane's shape) and once as
its own slice of the packed call (its windows, or its voiceprint rows for the modules the
model names as per-row). Only the block's slice is kept, so memory stays at one block's
activations even for a k = 32 pack on the full networks. The network's input (the windows
as cut) counts as the first "layer" and the model's final answer as the last, so a leak in
window cutting, or a change made outside any module, is still located.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.hooks import RemovableHandle

from harness.data.blocks import Block
from harness.data.ops import Op
from harness.packing import pack

INPUT = "<input: windows as the network receives them>"
OUTPUT = "<output: the model's answer>"


class Inferring(Protocol):
    """What localisation needs of a model: ``lanes.model_api.Model``'s call (harness does not import lanes).
    Its torch modules (``torch_modules()``, ``row_modules()``) are optional and looked up by name."""

    def infer(self, request: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]: ...


class _SliceRecorder:
    """Keeps, per module, the part of its outputs (over all its calls) inside one slice of dim 0."""

    def __init__(self, modules: dict[str, torch.nn.Module], windows: slice, rows: slice,
                 row_modules: tuple[str, ...]) -> None:
        self.parts: OrderedDict[str, list[torch.Tensor]] = OrderedDict()
        self.seen: dict[str, int] = {}
        self.handles: list[RemovableHandle] = []
        for prefix, top in modules.items():
            self.handles.append(top.register_forward_pre_hook(self._hook(f"{prefix} {INPUT}", windows, pre=True)))
            for name, module in top.named_modules():
                if name:
                    full = f"{prefix}.{name}"
                    per_row = any(full == r or full.startswith(r + ".") for r in row_modules)
                    self.handles.append(module.register_forward_hook(self._hook(full, rows if per_row else windows)))

    def _hook(self, name: str, want: slice, pre: bool = False) -> Callable[..., None]:
        def keep(tensor: object) -> None:
            if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
                return
            start = self.seen.get(name, 0)
            n = tensor.shape[0]
            self.seen[name] = start + n
            lo, hi = max(want.start, start), min(want.stop if want.stop is not None else start + n, start + n)
            if lo < hi:
                self.parts.setdefault(name, []).append(tensor[lo - start : hi - start].detach().clone())

        if pre:
            return lambda module, args: keep(args[0] if args else None)
        return lambda module, args, output: keep(output[0] if isinstance(output, tuple | list) else output)

    def close(self) -> None:
        for h in self.handles:
            h.remove()

    def outputs(self) -> OrderedDict[str, torch.Tensor]:
        return OrderedDict((k, torch.cat(v) if len(v) > 1 else v[0]) for k, v in self.parts.items())


def _record(model: Inferring, request: Mapping[str, np.ndarray], nets: dict[str, torch.nn.Module], windows: slice,
            rows: slice, row_modules: tuple[str, ...]) -> tuple[OrderedDict[str, torch.Tensor], np.ndarray]:
    recorder = _SliceRecorder(nets, windows, rows, row_modules)
    try:
        (answer,) = model.infer(request).values()
    finally:
        recorder.close()
    return recorder.outputs(), np.asarray(answer)


def _divergence(layer: str, got: torch.Tensor, want: torch.Tensor) -> dict[str, Any]:
    finite = torch.isfinite(got) & torch.isfinite(want)
    diff = (got.double() - want.double()).abs()[finite]
    return {"layer": layer, "max_abs": float(diff.max()) if diff.numel() else 0.0,
            "non_finite": int((~finite).sum()), "fraction_differing": float((got != want).double().mean())}


def localise(model: Inferring, blocks: Sequence[Block], target: str | None = None, pad_to: int | None = None
             ) -> dict[str, Any]:
    """Pack ``blocks``; compare ``target`` (default: the first) alone vs packed, layer by layer."""
    if not hasattr(model, "torch_modules"):
        return {"available": False, "reason": "the model exposes no torch modules to hook"}
    op = blocks[0].op
    nets: dict[str, torch.nn.Module] = model.torch_modules()
    family = "segmentation" if op is Op.SEGMENTATION else "voiceprint"
    nets = {family: nets[family]} if family in nets else nets
    row_modules = tuple(getattr(model, "row_modules", lambda: ())())
    target = target or blocks[0].id
    block = next(b for b in blocks if b.id == target)
    packed = pack(list(blocks), pad_to=pad_to)
    seg = next(s for s in packed.segments if s.block_id == target and not s.padding)
    packed_acts, packed_out = _record(model, packed.tensors(), nets, seg.window_slice, seg.row_slice, row_modules)
    exact_acts, exact_out = _record(model, block.tensors(), nets, slice(0, None), slice(0, None), row_modules)
    first: dict[str, Any] | None = None
    for name, exact in exact_acts.items():
        got = packed_acts.get(name)
        if got is None or got.shape != exact.shape:
            continue  # not batch-major over windows/rows (e.g. recurrent state): not comparable by slice
        if not torch.equal(got, exact):
            first = _divergence(name, got, exact)
            break
    if first is None:
        mine = packed_out[seg.window_slice if op is Op.SEGMENTATION else seg.row_slice]
        if mine.shape == exact_out.shape and not np.array_equal(mine, exact_out):
            first = _divergence(OUTPUT, torch.from_numpy(mine), torch.from_numpy(exact_out))
    return {
        "available": True,
        "op": int(op),
        "k": packed.k,
        "blocks": [b.id for b in blocks],
        "block": target,
        "first_diverging_layer": first["layer"] if first else None,
        "detail": first,
        "layers_compared": len(exact_acts),
    }
