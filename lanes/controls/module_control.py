"""A negative control for per-module localisation: an error injected in one named middle module.

The reference ``small`` model, with ``size`` x the module's largest output magnitude added to every
element of one module's output, for packed calls only (a request of more windows than one block's):
alone it is the reference model, packed it differs from that module on. Localisation must name
that module as ``first_exceeding`` (the modules before it are untouched, so equal, or differ only
by noise), and ``size=0`` must name none. ``noise`` names an earlier module whose packed output is
moved by one ulp (``torch.nextafter``): the ulp-level noise under which the first *diverging* module
is that harmless one, and only the first *exceeding* one is the defect. An importable spec:

    --model "lanes.controls.module_control:perturbed?module='segmentation.lstm'&size=1e-3&noise='segmentation.sincnet'"

The default module of each network (``segmentation.lstm``, ``voiceprint.trunk.stages.2``) is in the
middle of it: after the front end, before the head. A tuple output (the LSTM's ``(output, state)``)
is perturbed in its first element, the one localisation compares.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np
import torch

from harness.base.errors import ModelError
from harness.data import ops
from lanes.models.diar_nn_g.model import DiarNNG

CONFIG = "small"
DEFAULTS = ("segmentation.lstm", "voiceprint.trunk.stages.2")


class PerturbedModel(DiarNNG):
    """``small`` with ``size`` x max|output| added to ``modules``' outputs in packed calls (module doc)."""

    # whether a call is packed is held on the model for its hooks: a second call inside would read the first's
    concurrent_calls = False

    def __init__(
        self, modules: tuple[str, ...], size: float, noise: tuple[str, ...] = (), seed: int = 0, device: str = "cpu"
    ) -> None:
        super().__init__(CONFIG, seed, device)
        self.modules, self.size, self._packed = modules, float(size), False
        named = {
            f"{family}.{name}": m
            for family, net in self.torch_modules().items()
            for name, m in net.named_modules()
            if name
        }
        for name in (*modules, *noise):
            if name not in named:
                raise ModelError(f"module control: no module {name!r} (modules: {', '.join(sorted(named))})")
            # registered before any localisation hook: those see the changed output
            named[name].register_forward_hook(self._perturb if name in modules else self._one_ulp)
        control = f"control:module:{modules}:{size!r}:noise:{noise}"
        self.fingerprint = hashlib.sha256(f"{self.fingerprint}|{control}".encode()).hexdigest()
        self.name = f"{self.name}-control-module-{'+'.join(modules)}"

    def _perturb(self, module: torch.nn.Module, args: object, output: object) -> object:
        if not self._packed or self.size == 0.0:
            return None  # the output as computed
        first = output[0] if isinstance(output, tuple) else output
        assert isinstance(first, torch.Tensor)
        changed = first + self.size * first.detach().abs().max()
        return (changed, *output[1:]) if isinstance(output, tuple) else changed

    def _one_ulp(self, module: torch.nn.Module, args: object, output: object) -> object:
        if not self._packed:
            return None
        assert isinstance(output, torch.Tensor)
        return torch.nextafter(output, torch.full_like(output, float("inf")))

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._packed = np.asarray(request[ops.OFFSETS]).shape[0] > self.geometry.windows_per_block
        try:
            return super().infer(request)
        finally:
            self._packed = False


def perturbed(
    module: str = "", size: float = 1e-3, noise: str = "", seed: int = 0, device: str = "cpu"
) -> PerturbedModel:
    """The control: ``module`` (default: the middle module of each network, ``DEFAULTS``) perturbed by ``size``
    x its largest output magnitude in packed calls; ``noise``: a module moved by one ulp there."""
    return PerturbedModel((module,) if module else DEFAULTS, size, (noise,) if noise else (), seed, device)
