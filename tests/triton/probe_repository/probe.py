"""Probe models for the facts docs/triton.md records (test_triton_probes.py), Python backend, no torch.

Every probe model's ``1/model.py`` imports :class:`TritonPythonModel` from here. For each request
of an ``execute(requests)`` call the probe answers ``REPORT``: JSON with how many requests that
call held (``requests_in_execute``), which call it was (``execute``), and every input the request
carried -- the config's inputs *and* its ``batch_input`` targets -- with shape, dtype, byte size,
a float64 sum (content check) and, for small tensors, the values. ``execute`` sleeps ``DELAY_S``
(config parameter) first, so that concurrent requests queue up behind a running call: a batcher
that can form batches then does.
"""

from __future__ import annotations

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        self.delay_s = float(params.get("DELAY_S") or 0.0)
        self.batched = int(config.get("max_batch_size", 0)) > 0
        names = [i["name"] for i in config.get("input", [])]
        # A batch input's tensor would reach the model under its target name.
        names += [t for b in config.get("batch_input", []) for t in b.get("target_name", [])]
        self.names = names
        self.calls = 0

    def execute(self, requests: list) -> list:
        if self.delay_s:
            time.sleep(self.delay_s)
        call, self.calls = self.calls, self.calls + 1
        responses = []
        for request in requests:
            received = {}
            for name in self.names:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    received[name] = _describe(tensor.as_numpy())
            report = json.dumps({"requests_in_execute": len(requests), "execute": call, "inputs": received})
            out = np.array([report.encode()], dtype=np.object_)
            if self.batched:  # every output carries the batch dimension
                out = out.reshape(1, 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("REPORT", out)]))
        return responses


def _describe(array: np.ndarray) -> dict:
    info = {
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "nbytes": int(array.nbytes),
        "sum": float(np.sum(array, dtype=np.float64)),
    }
    if array.size <= 16:
        info["values"] = array.reshape(-1).tolist()
    return info
