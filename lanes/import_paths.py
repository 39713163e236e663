"""A module's path without its folder (``lanes.model_api``, ``lanes.null_model``) resolves to the module in its folder.

A team's model imports ``lanes.model_api``; configurations, goldens and scripts name specs such as
``lanes.null_model:small`` or ``lanes.simulated_device:full``, and those must keep resolving. Each short
path is the module itself (one module object under two names), so a spec resolves to the same factory
and a class keeps one identity."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

# old path -> where the module lives now
MOVED = {
    **{
        f"lanes.{m}": f"lanes.running.{m}"
        for m in (
            "lanes",
            "arrangers",
            "variants",
            "run_plan",
            "runner",
            "device_queue",
            "calls_in_flight",
            "staging",
            "warm_up",
            "memory",
            "neighbour_lane",
            "neighbour_controls",
            "canaries",
            "device_timeline",
        )
    },
    **{f"lanes.{m}": f"lanes.backends.{m}" for m in ("backend", "backend_api", "backend_numerics", "triton")},
    **{
        f"lanes.{m}": f"lanes.models.{m}"
        for m in (
            "model_api",
            "model_contract",
            "null_model",
            "torchscript_model",
            "diar_nn_g",
            "model_check",
        )
    },
    **{
        f"lanes.{m}": f"lanes.controls.{m}"
        for m in (
            "ulp_controls",
            "noisy_control",
            "silent_control",
            "module_control",
            "load_control",
        )
    },
    "lanes.simulated_device": "lanes.simulation.simulated_device",
}


def moved_to(name: str) -> str | None:
    """Where a module named by an old path (or a module below an old package path) lives now."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the moved module (imported once, under its new name)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("lanes.") or moved_to(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self) -> None:
        self.own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = moved_to(spec.name)
        assert new is not None
        module = importlib.import_module(new)
        self.own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the old path's spec on the module: give it its own back
        module.__spec__ = self.own_specs.get(module.__name__, module.__spec__)


def install() -> None:
    """Once per process, first in line: below an old package path (``lanes.triton.server``) the
    path finder would find the file again and load a second copy under the old name."""
    if not any(isinstance(f, OldPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPaths())
