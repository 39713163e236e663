"""Localisation: the first layer whose output differs between the exact and the packed run.

Forward hooks on the model's torch modules record every module's output, once with each
block of a failing pack run alone (the exact lane's shape) and once with the whole pack.
Each module's packed output is sliced back to the block's own windows (or voiceprint rows,
for the modules the model names as per-row) and compared with the block's exact output, in
execution order. The network's input (the windows as cut) counts as the first "layer", and
the model's final answer as the last, so a leak in window cutting or a change made outside
any module is still located.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

from harness.blocks import Block
from harness.ops import Op
from harness.packing import PackedRequest, pack

INPUT = "<input: windows as the network receives them>"
OUTPUT = "<output: the model's answer>"


class _Recorder:
    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        self.records: OrderedDict[str, list[torch.Tensor]] = OrderedDict()
        self.handles = []
        for prefix, top in modules.items():
            self.handles.append(top.register_forward_pre_hook(self._pre(f"{prefix}")))
            for name, module in top.named_modules():
                if name:
                    self.handles.append(module.register_forward_hook(self._post(f"{prefix}.{name}")))

    def _pre(self, name: str):
        def hook(module, args):
            if args and isinstance(args[0], torch.Tensor):
                self.records.setdefault(f"{name}:{INPUT}", []).append(args[0].detach().to("cpu").clone())
        return hook

    def _post(self, name: str):
        def hook(module, args, output):
            tensor = output[0] if isinstance(output, tuple | list) else output
            if isinstance(tensor, torch.Tensor) and tensor.dim() > 0:
                self.records.setdefault(name, []).append(tensor.detach().to("cpu").clone())
        return hook

    def close(self) -> None:
        for h in self.handles:
            h.remove()

    def outputs(self) -> OrderedDict[str, torch.Tensor]:
        out = OrderedDict()
        for name, parts in self.records.items():
            try:
                out[name] = torch.cat(parts, dim=0) if len(parts) > 1 else parts[0]
            except RuntimeError:
                out[name] = parts[0]
        return out


def _run(model, request: dict, modules: dict[str, torch.nn.Module]) -> tuple[OrderedDict, np.ndarray]:
    recorder = _Recorder(modules)
    try:
        answer = model.infer(request)
    finally:
        recorder.close()
    (output,) = answer.values()
    return recorder.outputs(), np.asarray(output)


def _divergence(layer: str, got: torch.Tensor, want: torch.Tensor) -> dict:
    finite = torch.isfinite(got) & torch.isfinite(want)
    diff = (got.double() - want.double()).abs()[finite]
    return {"layer": layer, "max_abs": float(diff.max()) if diff.numel() else 0.0,
            "non_finite": int((~finite).sum()), "fraction_differing": float((got != want).double().mean())}


def localise(model, blocks: Sequence[Block], pad_to: int | None = None) -> dict:
    """Compare each block of ``blocks`` alone vs packed; name the first diverging layer."""
    if not hasattr(model, "torch_modules"):
        return {"available": False, "reason": "the model exposes no torch modules to hook"}
    op = blocks[0].op
    nets = model.torch_modules()
    if op is Op.SEGMENTATION and "segmentation" in nets:
        nets = {"segmentation": nets["segmentation"]}
    elif op.is_voiceprint and "voiceprint" in nets:
        nets = {"voiceprint": nets["voiceprint"]}
    row_modules = tuple(getattr(model, "row_modules", lambda: ())())
    packed: PackedRequest = pack(list(blocks), pad_to=pad_to)
    packed_acts, packed_out = _run(model, packed.tensors(), nets)
    findings = []
    real = [s for s in packed.segments if not s.padding]
    for block, seg in zip(blocks, real, strict=True):
        exact_acts, exact_out = _run(model, block.tensors(), nets)
        first = None
        for name, exact in exact_acts.items():
            if name not in packed_acts:
                continue
            per_row = any(name == r or name.startswith(r + ".") for r in row_modules)
            sl = seg.row_slice if per_row else seg.window_slice
            got = packed_acts[name]
            if got.shape[0] < sl.stop or got.shape[1:] != exact.shape[1:]:
                continue
            part = got[sl]
            if part.shape != exact.shape:
                continue
            if not torch.equal(part, exact):
                first = _divergence(name.replace(f":{INPUT}", f" {INPUT}"), part, exact)
                break
        if first is None:
            slice_out = packed_out[seg.window_slice if op is Op.SEGMENTATION else seg.row_slice]
            if slice_out.shape == exact_out.shape and not np.array_equal(slice_out, exact_out, equal_nan=False):
                first = _divergence(OUTPUT, torch.from_numpy(slice_out), torch.from_numpy(exact_out))
        findings.append({"block": block.id, "first_diverging": first})
    located = [f for f in findings if f["first_diverging"]]
    return {
        "available": True,
        "op": int(op),
        "k": packed.k,
        "blocks": [b.id for b in blocks],
        "first_diverging_layer": located[0]["first_diverging"]["layer"] if located else None,
        "per_block": findings,
    }


def localise_shape(model, golden, run_shapes: Sequence[int], shape: dict, pad_to_fixed: bool = False) -> dict:
    """Localise every failing OP of one scored shape, on the pack holding its worst block.

    Voiceprint packs are rebuilt with the golden's WEIGHTS/IDX, so the network is judged
    alone even when the run was chained.
    """
    from lanes.runner import no_rows, pack_members

    k = int(shape["shape"])
    ids = golden.corpus.ids
    by_id = dict(zip(ids, golden.corpus.blocks, strict=True))
    inputs = golden.voiceprint_inputs()
    out = {}
    for op_key, verdict in shape["ops"].items():
        if verdict["passed"]:
            continue
        failing = [f["block"] for f in verdict.get("failing", []) if f.get("block") in by_id]
        if not failing:
            out[op_key] = {"available": False, "reason": "no failing block named (rows missing or corpus bound)"}
            continue
        members = pack_members(ids, run_shapes, k, failing[0])
        op = Op(int(op_key))
        blocks = [by_id[b] for b in members]
        if op.is_voiceprint:
            rows = {b.id: inputs[op].get(b.id) or no_rows(golden.geometry) for b in blocks}
            blocks = [b.with_voiceprint(op, rows[b.id].weights, rows[b.id].idx, rows[b.id].speakers, golden.geometry)
                      for b in blocks]
            if sum(b.rows for b in blocks) == 0:
                out[op_key] = {"available": False, "reason": "the failing pack has no voiceprint rows"}
                continue
        out[op_key] = localise(model, blocks, pad_to=k if pad_to_fixed else None)
    return out
