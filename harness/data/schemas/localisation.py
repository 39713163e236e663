"""Schemas of per-module error along the network: the golden's module floors and
what localisation writes per module (``harness.localisation.module_floors``, ``harness.localisation.module_errors``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from harness.data.schemas.base import Count, NonNeg, Open, OpKey, OptionalKeys, Strict


class ModuleFloor(Strict):
    """One module's noise floor: how much its output differs between the exact lane's two passes."""

    max_abs: NonNeg = Field(description="largest max |pass 2 - pass 1| over the sampled blocks")
    max_rel: NonNeg = Field(description="largest max abs / the module's scale over the sampled blocks")
    scale: NonNeg = Field(
        description="largest finite |output| of the module over the sampled blocks (the ulp floor is taken at it)"
    )
    jitter: NonNeg = Field(
        description="largest max abs change when every leaf module's output moves by one ulp "
        "(harness.localisation.first_divergence.one_ulp_jitter): noise grown through the network"
    )


class ModuleFloors(OptionalKeys, Strict):
    """The golden manifest's ``module_floors``: per OP and module, the noise floor (sealed with the manifest)."""

    optional_keys: ClassVar[frozenset[str]] = frozenset({"skipped", "serial"})

    format: Literal[1]
    passes: Literal[2] = Field(
        description="plain runs of each sampled block's requests, alone, hooked (and one more under one-ulp jitter)"
    )
    seed: Count = Field(description="seed of the sample ([localise] floor_seed)")
    blocks: list[str] = Field(description="the sampled blocks, in corpus order")
    ops: dict[OpKey, dict[str, ModuleFloor]] = Field(
        description="per OP, per module (harness.localisation.first_divergence's names: '<network>.<module>', the "
        "input and "
        "the model's answer included)"
    )
    skipped: str | None = Field(
        None,
        description="why no floor was recorded (a model without torch modules, "
        "modules that refuse hooks, a server's model); ops is then empty",
    )
    serial: str | None = Field(
        None,
        description="why the passes ran one after another instead of side by side (a model that three threads "
        "cannot enter at once: the same figures, measured slower); absent: side by side where the model allowed",
    )


class ModuleError(Strict):
    """One module's packed-vs-alone error along the network, against its floor."""

    module: str
    max_abs: NonNeg
    max_rel: NonNeg = Field(description="max abs / the exact output's largest finite magnitude")
    floor: NonNeg = Field(description="max(the golden's two-pass max abs and jitter, ulp of the module's scale)")
    ratio: NonNeg = Field(description="max_abs / floor")
    non_finite: Count = Field(description="elements finite on one side only")


class LocalisedOp(Open):
    """One failing (shape, OP) localised: today's first diverging layer and the per-module error. Other keys
    (op, layers_compared) are free-form, as written by ``harness.localisation.first_divergence``."""

    available: bool
    reason: str | None = Field(None, description="why it was not localised (available false)")
    k: int | None = Field(None, description="the shape replayed")
    blocks: list[str] | None = Field(None, description="the blocks of the failing pack")
    block: str | None = Field(None, description="the failing block localised")
    # the localiser's own JSON object for the layer (free keys, written as it gave them)
    detail: dict[str, Any] | None = Field(
        None, description="the first diverging layer's difference (layer, max_abs, non_finite, fraction_differing)"
    )
    first_diverging_layer: str | None = Field(None, description="the first module whose output differs at all")
    modules: list[ModuleError] | None = Field(None, description="every module compared, in execution order")
    first_exceeding: str | None = Field(
        None, description="the first module whose ratio exceeds floor_multiple (or whose non-finite values differ)"
    )
    floor_multiple: NonNeg | None = Field(None, description="[localise] floor_multiple in force")
    floor_source: Literal["golden", "ulp"] | None = Field(
        None,
        description="golden: the golden's module floors; ulp: one ulp of each module's scale (the golden records none)",
    )
    floor_note: str | None = Field(None, description="with ulp floors: what they leave out")
