"""Per-module error along the network, normalised by each module's own noise floor.

Naming the first module whose output *differs* says nothing under ulp-level noise: a packed kernel
that rounds one value differently makes the first layer "diverge" on every night. What a reader
needs is where the error *grows* beyond what the release does to itself. So every module compared
gets its max abs error, its relative error (max abs / the exact output's largest finite magnitude:
relative to the module's scale, so a zero output element cannot make it infinite) and a floor:

    floor = max(two-pass noise, one-ulp-jitter error, ulp(the module's output scale))

all three per module. The first two are :mod:`harness.localisation.module_floors`' record with the golden, on a
few sampled blocks run alone: how much the exact lane's two passes differ (often 0 on a CPU), and how
much the module's output moves when every leaf module's output is moved by one ulp (what a kernel
that rounds differently at every layer does, grown through the network as noise really grows:
measured on the small reference model, one ulp at the input is 52 ulps at the LSTM's output, so a
floor of one ulp alone names the LSTM under pure noise). The ulp term keeps the floor above zero.
A golden recorded before module floors existed has only the ulp term; the result says so
(``floor_source``: ``ulp``, with ``floor_note``). The first module whose ratio (error / floor)
exceeds ``multiple`` (``[localise] floor_multiple``), or whose non-finite values differ, is named.

Pure arithmetic on tensors: no model, no hooks (those are :mod:`harness.localisation.first_divergence`'s).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

DEFAULT_MULTIPLE = 4.0
GOLDEN = "golden"
ULP = "ulp"
ULP_NOTE = (
    "the golden records no module floors (recorded before they existed, or by a model without torch "
    "modules): each floor is one ulp of the module's output scale, which noise grown through the network "
    "can exceed"
)


def ulp_of(scale: float, dtype: torch.dtype) -> float:
    """One unit in the last place at ``scale`` for ``dtype`` (1 for integer and bool tensors: their step)."""
    if not dtype.is_floating_point:
        return 1.0
    info = torch.finfo(dtype)
    if not math.isfinite(scale) or scale < info.tiny:
        return float(info.eps * info.tiny)  # subnormal range: the smallest normal step
    _, exponent = math.frexp(scale)  # scale = m * 2**exponent, 0.5 <= m < 1
    return float(info.eps * 2.0 ** (exponent - 1))


def scale_of(t: torch.Tensor) -> float:
    """The largest finite magnitude of ``t`` (0.0 when it has none). One pass when every value is finite
    (a NaN or an infinity shows in the min or max; only then are the finite ones picked out)."""
    if t.numel() == 0:
        return 0.0
    lo, hi = (float(v) for v in torch.aminmax(t))
    if math.isfinite(lo) and math.isfinite(hi) or not t.dtype.is_floating_point:
        return max(abs(lo), abs(hi))
    magnitude = t.abs()
    magnitude = torch.where(torch.isfinite(magnitude), magnitude, torch.zeros((), dtype=t.dtype))
    return float(magnitude.max())


@dataclass(frozen=True)
class Difference:
    """How far one module's output is from another's: max abs, relative to ``scale`` (``want``'s largest finite
    magnitude), and the elements finite on one side only."""

    max_abs: float
    max_rel: float
    scale: float
    non_finite: int


@dataclass(frozen=True)
class ModuleRow:
    """One module's row of the profile (the localisation file's ``modules``: fields in its key order)."""

    module: str
    max_abs: float
    max_rel: float
    floor: float
    ratio: float
    non_finite: int


def difference(got: torch.Tensor, want: torch.Tensor, scale: float | None = None) -> Difference:
    """Max abs, relative (to ``want``'s scale; ``scale`` when known) error and the count of elements whose
    finiteness differs. Cheap on the common cases (this runs on every module of every sampled call): equal
    tensors cost one comparison, finite ones one subtraction; only a non-finite value takes the slow path."""
    scale = scale_of(want) if scale is None else scale
    tiny = float(torch.finfo(torch.float32).tiny)
    if torch.equal(got, want):  # the common case of the golden's two passes: nothing to measure
        return Difference(max_abs=0.0, max_rel=0.0, scale=scale, non_finite=0)
    if got.dtype.is_floating_point and want.dtype == got.dtype:
        max_abs = float((got - want).abs().max())  # NaN or inf when either side holds one
        if math.isfinite(max_abs):
            return Difference(max_abs=max_abs, max_rel=max_abs / max(scale, tiny), scale=scale, non_finite=0)
    g, w = got.double(), want.double()
    gf, wf = torch.isfinite(g), torch.isfinite(w)
    diff = torch.where(gf & wf, (g - w).abs(), torch.zeros((), dtype=torch.float64))
    max_abs = float(diff.max())
    return Difference(
        max_abs=max_abs, max_rel=max_abs / max(scale, tiny), scale=scale, non_finite=int((gf != wf).sum())
    )


ModuleRowJson = dict[str, str | float | int]  # a ModuleRow's fields, as the localisation file holds them


@dataclass(frozen=True)
class RecordedFloor:
    """The figures of one module's entry of the golden's ``module_floors`` that its floor is taken from."""

    max_abs: float
    scale: float = 0.0
    jitter: float = 0.0  # older goldens lack it

    @classmethod
    def of(cls, recorded: Mapping[str, Any]) -> RecordedFloor:
        """``recorded``: the entry as the manifest's JSON object (``ModuleFloor``'s dump, or an older golden's)."""
        return cls(**{f.name: float(recorded[f.name]) for f in fields(cls) if f.name in recorded})


@dataclass(frozen=True)
class Profile:
    """The profile's part of the localisation file's entry (``LocalisedOp``'s keys): every module's row (a
    :class:`ModuleRow`'s fields), the first over its floors, the multiple and where the floors came from, with a
    note without the golden's floors (None: there were floors)."""

    modules: list[ModuleRowJson]
    first_exceeding: str | None
    floor_multiple: float
    floor_source: str
    floor_note: str | None


def module_floor(recorded: RecordedFloor | None, scale: float, dtype: torch.dtype) -> float:
    """The floor of one module (module doc): the golden's two-pass noise or one-ulp-jitter error, whichever is
    larger, never below one ulp of the larger of the golden's recorded scale and this block's. ``recorded``: the
    module's entry of the golden manifest's ``module_floors`` (None: the golden records none for it)."""
    noise = max(recorded.max_abs, recorded.jitter) if recorded else 0.0
    recorded_scale = recorded.scale if recorded else 0.0
    return max(noise, ulp_of(max(scale, recorded_scale), dtype))


def along_network(
    pairs: Iterable[tuple[str, torch.Tensor, torch.Tensor]],
    floors: Mapping[str, Mapping[str, Any]] | None,
    multiple: float,
) -> Profile:
    """``pairs``: (module, packed slice, exact output) in execution order, iterated once (each pair may be read
    when reached and dropped after). ``floors``: per module, its entry of the golden's ``module_floors`` as the
    manifest's JSON object (None: the golden records none). Returns the per-module table, the first module over
    ``multiple`` x its floor, and where the floors came from."""
    modules = []
    first = None
    for name, got, want in pairs:
        d = difference(got, want)
        entry = (floors or {}).get(name)  # read when its module is reached, as the table is
        floor = module_floor(RecordedFloor.of(entry) if entry else None, d.scale, want.dtype)
        ratio = d.max_abs / floor
        modules.append(asdict(ModuleRow(name, d.max_abs, d.max_rel, floor, ratio, d.non_finite)))
        if first is None and (ratio > multiple or d.non_finite):
            first = name
    return Profile(modules, first, float(multiple), GOLDEN if floors else ULP, None if floors else ULP_NOTE)
