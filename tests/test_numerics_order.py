"""Numeric settings are in force for a torch model whatever the order of applying them and torch's import.

``NumericSettings.applied()`` sets torch's flags only once torch is imported (a model that is not a
torch network never pays torch's start-up), so a caller that applies them before the model's factory
imports torch must apply them again after it. The Triton Python backend's ``model.py`` did not: its
``initialize`` applied the settings, then loaded the model (importing torch), then recorded
``numerics_in_force`` with torch's default thread count (the server said threads 2 where 1 was
requested). Both places that run a model are checked here, in a fresh interpreter where torch is not
yet imported (the order is the point), with a thread count torch would never pick by itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUESTED = 3  # not torch's default on any CI box (its default is the number of cores)

SCRIPT = textwrap.dedent(f"""
    import json, sys, types
    assert "torch" not in sys.modules, "the test needs an interpreter without torch"
    # The Triton stub's module, faked: only initialize() and info() are exercised here.
    sys.modules["triton_python_backend_utils"] = types.ModuleType("triton_python_backend_utils")
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "diar_nn_g_model", "lanes/backends/triton/model_repository/diar_nn_g/1/model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    numerics = {{"threads": {REQUESTED}}}
    config = {{"parameters": {{"MODEL_SPEC": {{"string_value": "small"}},
                               "NUMERICS": {{"string_value": json.dumps(numerics)}}}}}}
    server = module.TritonPythonModel()
    server.initialize({{"model_config": json.dumps(config)}})
    triton = json.loads(server.info())["numerics_in_force"]

    import torch
    torch.set_num_threads(1)  # a flag changed behind the backend's back: the backend must set it again
    from harness.data.numeric_settings import NumericSettings
    from lanes.backends.backend import InProcessBackend
    from lanes.models.model_api import load_model
    backend = InProcessBackend(load_model("small"), NumericSettings(threads={REQUESTED}))
    in_process = backend.environment()["numerics_in_force"]
    print(json.dumps({{"triton": triton, "in_process": in_process}}))
""")


def test_settings_applied_before_torch_is_imported_are_in_force_for_a_torch_model() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for where in ("triton", "in_process"):
        got = seen[where]
        assert got.get("torch_loaded", True), f"{where}: torch not loaded by the small model: {got}"
        assert got["threads"] == REQUESTED, (
            f"{where}: numerics_in_force threads {got['threads']}, requested {REQUESTED}: the settings "
            "were applied before the model imported torch and not again after (NumericsScope.apply)"
        )
        assert got["deterministic_algorithms"] is True, f"{where}: {got}"
