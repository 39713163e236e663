"""The Triton lane: the ``diar_nn_g`` model repository, a client backend and a local server.

- ``model_repository/``: what a release ships to Triton (``config.pbtxt`` + ``1/model.py``, a thin
  adapter over :func:`lanes.models.model_api.load_model`);
- :mod:`lanes.backends.triton.triton_backend`: :class:`TritonBackend`, the same seam as the in-process backend,
  over HTTP with binary tensors (its connection and retries: :mod:`lanes.backends.triton.triton_connection`);
- :mod:`lanes.backends.triton.server`: starts/stops the ``tritonserver`` bundled with nvidia-pytriton (its process
  group: :mod:`lanes.backends.triton.process_group`).

Nothing here is imported by ``lanes``: tritonclient is an optional dependency.
"""
