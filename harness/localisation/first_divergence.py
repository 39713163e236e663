"""Localisation: the first layer whose output differs between the exact and the packed run.

Forward hooks on the model's torch modules record, in execution order, each module's output
for one failing block: once when that block runs alone (the exact lane's shape) and once as
its own slice of the packed call (its windows, or its voiceprint rows for the modules the
model names as per-row). Only the block's slice is kept, and kept out of memory
(:class:`harness.localisation.activations.ActivationStore`: written as produced, read back one module at a
time), so a comparison holds one module's outputs at a time even for a k = 32 pack on the full
networks. The network's input (the windows as cut) counts as the first "layer" and the model's
final answer as the last, so a leak in window cutting, or a change made outside any module, is
still located.

Besides the first module that differs at all, every module compared gets its error normalised by
its own noise floor, recorded with the golden (:mod:`harness.localisation.module_errors`,
:mod:`harness.localisation.module_floors`), and the first module whose error exceeds ``multiple`` x its floor is
named (``first_exceeding``): under ulp-level noise the first differing layer is always the first
one, but the error grows past the noise where the defect is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict

import numpy as np
import torch
from torch.utils.hooks import RemovableHandle

from harness.data.blocks import Block
from harness.data.ops import Op
from harness.localisation.activations import ActivationStore
from harness.localisation.module_errors import DEFAULT_MULTIPLE, ModuleRowJson, along_network
from harness.packers.packing import pack

INPUT = "<input: windows as the network receives them>"
OUTPUT = "<output: the model's answer>"


class Localised(TypedDict, total=False):
    """One failing OP's entry of the localisation file as it is written (``LocalisedOp`` reads it): ``available``
    and ``reason`` when it could not be localised, else what :func:`localise` found, its profile's keys last."""

    available: bool
    reason: str
    op: int
    k: int
    blocks: list[str]
    block: str
    first_diverging_layer: str | None
    detail: dict[str, str | float | int] | None  # a Divergence's fields
    layers_compared: int
    modules: list[ModuleRowJson]
    first_exceeding: str | None
    floor_multiple: float
    floor_source: str
    floor_note: str


class Inferring(Protocol):
    """What localisation needs of a model: ``lanes.models.model_api.Model``'s call (harness does not import lanes).
    Its torch modules (``torch_modules()``, ``row_modules()``) are optional and looked up by name."""

    def infer(self, request: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]: ...


class _SliceRecorder:
    """Keeps, per module, the part of its outputs (over all its calls) inside one slice of dim 0, in a store."""

    def __init__(
        self,
        modules: dict[str, torch.nn.Module],
        windows: slice,
        rows: slice,
        row_modules: tuple[str, ...],
        store: ActivationStore,
    ) -> None:
        self.store = store
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
                self.store.add(name, tensor[lo - start : hi - start])

        if pre:
            return lambda module, args: keep(args[0] if args else None)
        return lambda module, args, output: keep(output[0] if isinstance(output, tuple | list) else output)

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def record_activations(
    model: Inferring,
    request: Mapping[str, np.ndarray],
    nets: dict[str, torch.nn.Module],
    windows: slice,
    rows: slice,
    row_modules: tuple[str, ...],
    spill: Path | None = None,
) -> tuple[ActivationStore, np.ndarray]:
    """One call of ``model`` with every module of ``nets`` hooked: each module's output slice (``windows``
    of dim 0, or ``rows`` for the ``row_modules``), in execution order, in a store (close it: ``with``), and
    the model's answer. ``spill``: the folder its file goes in (the system's temporary folder if None)."""
    store = ActivationStore(spill)
    recorder = _SliceRecorder(nets, windows, rows, row_modules, store)
    try:
        (answer,) = model.infer(request).values()
    except BaseException:
        store.close()
        raise
    finally:
        recorder.close()
    return store, np.asarray(answer)


@dataclass(frozen=True)
class Divergence:
    """The first layer whose packed output differs from the block's alone, and by how much (the localisation
    file's ``detail``: fields in its key order)."""

    layer: str
    max_abs: float
    non_finite: int
    fraction_differing: float


def _divergence(layer: str, got: torch.Tensor, want: torch.Tensor) -> Divergence:
    finite = torch.isfinite(got) & torch.isfinite(want)
    diff = (got.double() - want.double()).abs()[finite]
    return Divergence(
        layer=layer,
        max_abs=float(diff.max()) if diff.numel() else 0.0,
        non_finite=int((~finite).sum()),
        fraction_differing=float((got != want).double().mean()),
    )


@contextmanager
def one_ulp_jitter(
    nets: Mapping[str, torch.nn.Module], seed: int, when: Callable[[], bool] = lambda: True
) -> Iterator[None]:
    """Every leaf module's floating output moved by one ulp, up or down at random (seeded), while inside.

    What a kernel that rounds differently does at every layer: the noise a packed call may carry with no
    defect at all, propagated through the network as it really grows (a norm layer amplifies it, a
    pooling shrinks it). :mod:`harness.localisation.module_floors` records the error it causes per module as part of
    the module's floor. Registered before the recorder's hooks, so a module's recorded output holds its
    own ulp and every upstream one. ``when``: asked at every module, the jitter applies only while it says
    so (the one call of several run side by side that is jittered: harness.localisation.lockstep)."""
    generator = torch.Generator().manual_seed(seed)

    def jitter(module: torch.nn.Module, args: object, output: object) -> object:
        first = output[0] if isinstance(output, tuple) else output
        if not isinstance(first, torch.Tensor) or not first.dtype.is_floating_point or not when():
            return None
        up = torch.rand(first.shape, generator=generator).to(first.device) < 0.5
        moved = torch.nextafter(first, torch.where(up, math.inf, -math.inf).to(first.dtype))
        return (moved, *output[1:]) if isinstance(output, tuple) else moved

    handles = [
        m.register_forward_hook(jitter)
        for top in nets.values()
        for _, m in top.named_modules()
        if not any(True for _ in m.children())
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def families(model: Inferring, op: Op) -> tuple[dict[str, torch.nn.Module], tuple[str, ...]]:
    """The networks an OP runs through (the model's ``torch_modules()``, narrowed to the OP's family when
    the model names one) and the modules whose outputs are per voiceprint row."""
    nets: dict[str, torch.nn.Module] = model.torch_modules()  # type: ignore[attr-defined]
    family = "segmentation" if op is Op.SEGMENTATION else "voiceprint"
    nets = {family: nets[family]} if family in nets else nets
    return nets, tuple(getattr(model, "row_modules", lambda: ())())


def comparable(
    want_acts: ActivationStore, *others: tuple[ActivationStore, np.ndarray], want_out: np.ndarray
) -> Iterator[tuple[str, torch.Tensor, tuple[torch.Tensor, ...]]]:
    """(module, want, (each other call's output)) in ``want_acts``' execution order, the model's answer last,
    read one module at a time: the modules whose slices have the same shape in every call (a recurrent state
    is not batch-major: not comparable by slice)."""
    for name in want_acts.names():
        shape = want_acts.shape(name)
        if all(name in acts and acts.shape(name) == shape for acts, _ in others):
            yield name, want_acts.get(name), tuple(acts.get(name) for acts, _ in others)
    if all(out.shape == want_out.shape for _, out in others):
        yield (
            OUTPUT,
            torch.from_numpy(np.ascontiguousarray(want_out)),
            tuple(torch.from_numpy(np.ascontiguousarray(out)) for _, out in others),
        )


def localise(
    model: Inferring,
    blocks: Sequence[Block],
    target: str | None = None,
    pad_to: int | None = None,
    floors: Mapping[str, Mapping[str, Any]] | None = None,
    multiple: float = DEFAULT_MULTIPLE,
    spill: Path | None = None,
) -> Localised:
    """Pack ``blocks``; compare ``target`` (default: the first) alone vs packed, layer by layer.

    ``floors``: the golden's module floors of this OP (``module_floors.ops[op]``; None: one ulp of each
    module's scale); ``multiple``: how many floors a module's error may reach before it is named; ``spill``:
    the folder the activations' files go in. Returns the localisation file's entry for the OP (``LocalisedOp``:
    its typed keys and the free-form ones this function writes)."""
    if not hasattr(model, "torch_modules"):
        return {"available": False, "reason": "the model exposes no torch modules to hook"}
    op = blocks[0].op
    nets, row_modules = families(model, op)
    target = target or blocks[0].id
    block = next(b for b in blocks if b.id == target)
    packed = pack(list(blocks), pad_to=pad_to)
    seg = next(s for s in packed.segments if s.block_id == target and not s.padding)
    packed_acts, packed_out = record_activations(
        model, packed.tensors(), nets, seg.window_slice, seg.row_slice, row_modules, spill
    )
    with packed_acts:
        exact_acts, exact_out = record_activations(
            model, block.tensors(), nets, slice(0, None), slice(0, None), row_modules, spill
        )
        with exact_acts:
            mine = packed_out[seg.window_slice if op is Op.SEGMENTATION else seg.row_slice]
            first: Divergence | None = None
            layers = len(exact_acts.names())

            def pairs() -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
                nonlocal first
                for name, want, (got,) in comparable(exact_acts, (packed_acts, mine), want_out=exact_out):
                    if first is None and not torch.equal(got, want):
                        first = _divergence(name, got, want)
                    yield name, got, want

            profile = along_network(pairs(), floors, multiple)
    found: Localised = {
        "available": True,
        "op": int(op),
        "k": packed.k,
        "blocks": [b.id for b in blocks],
        "block": target,
        "first_diverging_layer": first.layer if first else None,
        "detail": asdict(first) if first else None,
        "layers_compared": layers,
        "modules": profile.modules,
        "first_exceeding": profile.first_exceeding,
        "floor_multiple": profile.floor_multiple,
        "floor_source": profile.floor_source,
    }
    return found if profile.floor_note is None else {**found, "floor_note": profile.floor_note}
