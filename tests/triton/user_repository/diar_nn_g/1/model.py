"""A user's own diar_nn_g (test stand-in): the small reference model, served without MODEL_INFO.

It wraps :func:`lanes.models.model_api.load_model` so the tests can check its answers bitwise against
the in-process model; what matters is what it lacks: no MODEL_INFO output, no parameters.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

INPUTS = ("SPAN", "OFFSETS", "VALID", "OP", "WEIGHTS", "IDX")


class TritonPythonModel:
    def initialize(self, args):
        from harness.data.numeric_settings import NumericSettings
        from lanes.models.model_api import load_model

        self.numerics = NumericSettings(threads=1)  # as the tests' in-process backend
        self.model = load_model("small")

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                tensors = {}
                for name in INPUTS:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is not None:
                        tensors[name] = tensor.as_numpy()
                wanted = set(request.requested_output_names())
                with self.numerics.applied():
                    outputs = self.model.infer(tensors)
                responses.append(
                    pb_utils.InferenceResponse(
                        output_tensors=[
                            pb_utils.Tensor(name, np.ascontiguousarray(value))
                            for name, value in outputs.items()
                            if name in wanted
                        ]
                    )
                )
            except Exception as exc:
                responses.append(
                    pb_utils.InferenceResponse(
                        output_tensors=[], error=pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
                    )
                )
        return responses
