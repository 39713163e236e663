"""Triton Python-backend entry point of ``diar_nn_g``: a thin adapter, never a second model.

It loads the model with :func:`lanes.models.model_api.load_model`, exactly as the in-process backend
does, so the Triton lane and the in-process lane run the same code; the only work done here is
moving tensors between Triton and that model and turning failures into per-request errors.

Config parameters (see config.pbtxt): MODEL_SPEC, SEED, DEVICE, NUMERICS (JSON of
``NumericSettings.to_dict()``), PYTHONPATH (os.pathsep-separated folders put first on
``sys.path``, so a factory outside the installed packages can be imported by the stub).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import triton_python_backend_utils as pb_utils

if TYPE_CHECKING:
    from harness.host.environment import EnvironmentRecord

INPUTS = ("SPAN", "OFFSETS", "VALID", "OP", "WEIGHTS", "IDX")
INFO_OUTPUT = "MODEL_INFO"
# Marks an error that the model itself answered (bad input, a model exception): final, so the
# client must not retry it the way it retries a server that is down or overloaded.
MODEL_ERROR_TAG = "diar_nn_g model error"


class Parameters(NamedTuple):
    """The config's parameters (config.pbtxt; each field is its parameter's name in lower case), each a string:
    one absent or empty takes the default here. A named tuple, not a dataclass: a dataclass needs its module in
    ``sys.modules``, which a file loaded by path (Triton's stub, a test) need not be."""

    model_spec: str = "full"
    seed: str = "0"
    device: str = "cpu"
    numerics: str = "{}"
    pythonpath: str = ""

    @classmethod
    def of(cls, model_config: str) -> Parameters:
        """From Triton's model config JSON, whose ``parameters`` map each NAME to ``{"string_value": ...}``."""
        config = json.loads(model_config)
        # Triton's model config JSON, read here at its boundary by its own key names
        given = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        return cls(**{name: given[name.upper()] for name in cls._fields if given.get(name.upper())})


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        params = Parameters.of(args["model_config"])  # Triton's args: a dict of strings, by its key names
        for folder in reversed([p for p in params.pythonpath.split(os.pathsep) if p]):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        # Imported only now: PYTHONPATH above may be what makes them importable.
        from harness.data.numeric_settings import NumericSettings
        from lanes.models.model_api import load_model

        self.numerics = NumericSettings.from_dict(json.loads(params.numerics))
        # In force for the model's life in this stub process (its only job), given back at finalize.
        self.held = ExitStack()
        self.scope = self.held.enter_context(self.numerics.applied())
        spec = params.model_spec
        self.model = load_model(spec, seed=int(params.seed), device=params.device)
        # Again: torch's flags are set only once torch is imported (harness.numerics), and a torch
        # model's factory is what imports it. Without this the info below records torch's defaults.
        self.scope.apply()
        self.device = params.device
        self.spec = spec
        # Built once: a client that names no outputs gets every output, MODEL_INFO included.
        self.info_json = np.array([self.info().encode()], dtype=np.object_)

    def execute(self, requests: list) -> list:
        responses = []
        for request in requests:
            try:
                responses.append(self._answer(request))
            except Exception as exc:  # one bad request must never take the server (or its batch) down
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=_error(exc)))
        return responses

    def _answer(self, request) -> object:
        self.scope.apply()  # as the in-process backend does: no flag changed since (by a plugin) survives
        tensors = {}
        for name in INPUTS:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                tensors[name] = tensor.as_numpy()
        wanted = set(request.requested_output_names())
        outputs = self.model.infer(tensors)
        out = [pb_utils.Tensor(name, np.ascontiguousarray(value)) for name, value in outputs.items() if name in wanted]
        if INFO_OUTPUT in wanted:
            out.append(pb_utils.Tensor(INFO_OUTPUT, self.info_json))
        return pb_utils.InferenceResponse(output_tensors=out)

    def info(self) -> str:
        """What the client records: the fingerprint and geometry of the model actually loaded.

        Numerics in force are read after ``initialize`` applied them; ``execute`` re-applies the
        same settings before every request, so they stay what is recorded here."""
        from harness.data.geometry import geometry_of
        from harness.numerics import in_force
        from lanes.models.model_api import describe

        return json.dumps(
            {
                "fingerprint": self.model.fingerprint,
                "geometry": geometry_of(self.model).to_dict(),
                "model": describe(self.model),
                "spec": self.spec,
                "device": self.device,
                "device_kind": _device_kind(self.device),
                "numerics_requested": self.numerics.to_dict(),
                "numerics_in_force": in_force(self.device, self.model),
                "environment": _environment(self.device),
            },
            sort_keys=True,
        )

    def finalize(self) -> None:
        del self.model  # the networks' memory goes with the instance, before Triton unloads the stub
        self.held.close()


def _error(exc: Exception) -> object:
    """One line naming the error; a bad request (BlockError) is the caller's fault: HTTP 400."""
    from harness.base.errors import BlockError

    message = " ".join(f"{MODEL_ERROR_TAG}: {type(exc).__name__}: {exc}".split())
    code = pb_utils.TritonError.INVALID_ARG if isinstance(exc, BlockError) else pb_utils.TritonError.INTERNAL
    return pb_utils.TritonError(message, code)


def _environment(device: str) -> EnvironmentRecord | None:
    """The server's machine and libraries (the client may run elsewhere, with other versions)."""
    try:
        from harness.host.environment import environment

        return environment(device)
    except Exception:  # informative only; never fail a probe over it
        return None


def _device_kind(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"
