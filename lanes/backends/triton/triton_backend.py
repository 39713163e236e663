"""The Triton backend: the same seam as the in-process backend, over HTTP with binary tensors.

Both lanes of a comparison call one backend, so running them through a real server measures
what the engine will see: Triton's transport, the Python backend's copies, and the model code
of ``model_repository/diar_nn_g/1/model.py`` (which loads the very same model object).

What the model is: asked of the server, never assumed (see :mod:`lanes.backends.triton.model_identity`). A model
with this project's ``MODEL_INFO`` output reports its fingerprint and geometry; a user's own model
without it is accepted only with a ``model_label`` and the caller's ``geometry`` (checked against
the shape of a one-window answer), and everything it produces says ``weights_verified: False``.

Serving as the engine does: ``concurrency`` requests in flight (default 2, the engine's two per
GPU) through :meth:`TritonBackend.call_many`; results never depend on it (tested bitwise).
``shm=True`` moves the tensors through system shared memory (:mod:`lanes.backends.triton.shm`; client and
server on one host) instead of the HTTP body.

Failure policy: every failure is one :class:`BackendError` line naming the request, the URL and what
happened; only what another attempt can change (connection refused or reset, HTTP 5xx, not ready) is
retried, ``retries`` times with exponential backoff (:mod:`lanes.backends.triton.triton_connection`, which also
holds the client; the failures' words: :mod:`lanes.backends.triton.failures`). An answer with the wrong outputs,
shape or dtype is final (:func:`harness.data.response.check_response`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.base.errors import BackendError
from harness.data import ops
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.response import check_response, expected_shape
from lanes.backends.backend_api import Call, CallResult
from lanes.backends.triton.failures import CallPolicy
from lanes.backends.triton.failures import Retryable as _Retryable
from lanes.backends.triton.model_identity import INFO_OUTPUT, WEIGHTS_NOTE, ServerAnswers, ServerModel, unverified_model
from lanes.backends.triton.server_options import MODEL_NAME
from lanes.backends.triton.shm import ShmPool, infer_through_shm
from lanes.backends.triton.triton_connection import TritonConnection
from lanes.backends.triton.triton_json import ModelMetadata, ServerMetadata, parsed
from lanes.backends.triton.url import parse_triton_url

try:
    import gevent
    import gevent.pool
    import tritonclient.http as httpclient
except ImportError as _exc:  # pragma: no cover - depends on the install
    httpclient = None
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None

__all__ = ["DEFAULT_CONCURRENCY", "INFO_OUTPUT", "MODEL_NAME", "CallPolicy", "ServerModel", "TritonBackend"]

DEFAULT_CONCURRENCY = 2  # the engine keeps about two requests in flight per GPU
WIRE_DTYPES: dict[str, tuple[type, str]] = {
    ops.SPAN: (np.float32, "FP32"),
    ops.OFFSETS: (np.int64, "INT64"),
    ops.VALID: (np.int32, "INT32"),
    ops.OP: (np.int32, "INT32"),
    ops.WEIGHTS: (np.float32, "FP32"),
    ops.IDX: (np.int32, "INT32"),
}

GeometrySource = Geometry | Callable[[], Geometry] | None


@dataclass
class _Prepared:
    """One call, validated and ready to send (any number of times)."""

    op: Op
    arrays: dict[str, np.ndarray]
    windows: int
    rows: int
    where: str  # the caller's words plus the server and model
    http_inputs: list | None  # binary HTTP inputs, built once; None with shm


class TritonBackend(TritonConnection):
    """Runs requests on a Triton server's ``model_name``. See the module doc for the failure policy."""

    name = "triton"

    def __init__(
        self,
        url: str,
        model_name: str = MODEL_NAME,
        *,
        policy: CallPolicy = CallPolicy(),
        concurrency: int = DEFAULT_CONCURRENCY,
        shm: bool = False,
        model_label: str | None = None,
        geometry: GeometrySource = None,
    ) -> None:
        p = policy
        if _IMPORT_ERROR is not None:
            raise BackendError(f"Triton backend needs tritonclient[http] ({_IMPORT_ERROR}); install the 'triton' extra")
        if p.retries < 0 or concurrency < 1 or p.timeout_s <= 0 or p.max_request_bytes <= 0:
            raise BackendError(
                f"Triton backend: bad settings retries={p.retries} concurrency={concurrency} "
                f"timeout_s={p.timeout_s} max_request_bytes={p.max_request_bytes}"
            )
        if model_label is not None and not model_label.strip():
            raise BackendError("Triton backend: model_label is empty; give the name of the model you serve")
        parsed = parse_triton_url(url, "Triton backend")  # before any client exists: see lanes.backends.triton.url
        self.url, self._host, self._ssl = parsed.url, parsed.host_port, parsed.ssl
        self.model_name = model_name
        self.timeout_s, self.retries, self.backoff_s = float(p.timeout_s), int(p.retries), float(p.backoff_s)
        self.max_request_bytes, self.concurrency = int(p.max_request_bytes), int(concurrency)
        self.policy = CallPolicy(self.timeout_s, self.retries, self.backoff_s, self.max_request_bytes)
        self.shm = bool(shm)
        self.model_label = model_label.strip() if model_label else None
        self._geometry_source = geometry
        self._client: Any = None
        self._shm_pool: ShmPool | None = None
        self.server_version = ""
        try:
            self.server = self._connect()
            if self.shm:
                self._shm_pool = ShmPool(self.concurrency, self._register_region, self._unregister_region)
        except BaseException:
            self.close()
            raise
        self.geometry: Geometry = self.server.geometry
        self.fingerprint: str = self.server.fingerprint

    @property
    def device_kind(self) -> str:
        return self.server.device_kind

    @property
    def weights_verified(self) -> bool:
        """False for a model without MODEL_INFO: its fingerprint cannot cover the weights."""
        return self.server.weights_verified

    @property
    def shm_prefix(self) -> str | None:
        """The name prefix of this backend's shared-memory regions (tests look for leftovers by it)."""
        return self._shm_pool.prefix if self._shm_pool is not None else None

    # -- the seam --------------------------------------------------------------------------
    def call(self, op: Op, request: Mapping[str, np.ndarray], windows: int, rows: int, where: str) -> CallResult:
        call = self._prepare(op, request, windows, rows, where)
        outputs, wall = self._with_retries(call.where, lambda: self._attempt(call))
        return self._result(call, outputs, wall)

    def call_many(self, calls: Sequence[Call]) -> list[CallResult]:
        """Send ``calls`` with up to ``concurrency`` in flight; results in the order of ``calls``.

        Every call is validated before any is sent. ``wall_s`` of each is its own latency (send to
        answer), which overlaps the others'. A call that fails in flight with a retryable error is
        retried alone afterwards, with the retries it has left; a final error is raised once every
        call sent has answered, naming its call (and how many others failed). Outputs are the same
        bits at any concurrency: each request is answered on its own.
        """
        prepared = [self._prepare(*c) for c in calls]
        if self.concurrency == 1 or len(prepared) <= 1:
            return [
                self._result(c, *self._with_retries(c.where, functools.partial(self._attempt, c))) for c in prepared
            ]
        outcomes: list[Any] = [None] * len(prepared)

        def job(i: int) -> None:
            call = prepared[i]
            try:
                outcomes[i] = self._once(call.where, lambda: self._attempt(call), in_flight=True)
            except Exception as exc:  # kept, so that every call answers before any error is raised
                outcomes[i] = exc

        pool = gevent.pool.Pool(self.concurrency)
        gevent.joinall([pool.spawn(job, i) for i in range(len(prepared))])
        failed = [i for i, o in enumerate(outcomes) if isinstance(o, BackendError)]
        if any(isinstance(o, Exception) for o in outcomes):
            self._drop_connection()  # nothing is in flight now: a connection that failed is never reused
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, BackendError | _Retryable):
                raise outcome  # a bug, not a server's answer
        if failed:
            first = outcomes[failed[0]]
            if len(failed) == 1:
                raise first
            raise BackendError(
                f"{first} ({len(failed) - 1} more of the {len(prepared)} calls sent together failed too)"
            ) from None
        results = []
        for call, outcome in zip(prepared, outcomes, strict=True):
            if isinstance(outcome, _Retryable):
                outcome = self._with_retries(
                    call.where, functools.partial(self._attempt, call), first_attempt=1, first_failure=outcome
                )
            results.append(self._result(call, *outcome))
        return results

    def environment(self) -> dict:
        model = dict(self.server.describe)
        model.setdefault("fingerprint", self.fingerprint)
        if self.model_label and self.weights_verified:
            model.setdefault("label", self.model_label)
        env = {
            "backend": self.name,
            "url": self.url,
            "server_version": self.server_version,
            "model_name": self.model_name,
            "device": self.server.device,
            "device_kind": self.device_kind,
            "model": model,
            "numerics_requested": self.server.numerics_requested,
            "numerics_in_force": self.server.numerics_in_force,
            "environment": self.server.environment,
            "weights_verified": self.weights_verified,
            "concurrency": self.concurrency,
            "transport": "shm" if self.shm else "http",
        }
        if not self.weights_verified:
            env["warning"] = WEIGHTS_NOTE  # the environment is the manifests' JSON object (provenance)
        return env

    def close(self) -> None:
        """Unregister and unmap the shared-memory regions (if any), then close the connection."""
        pool, self._shm_pool = self._shm_pool, None
        if pool is not None:
            pool.close()
        self._drop_connection()

    def __enter__(self) -> TritonBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connecting ------------------------------------------------------------------------
    def _connect(self) -> ServerModel:
        where = f"connecting to model {self.model_name!r}"
        metadata = self._with_retries(where, lambda: self._client_now().get_server_metadata())
        self.server_version = parsed(ServerMetadata, metadata, where).version
        ready = self._with_retries(where, lambda: self._client_now().is_model_ready(self.model_name))
        if not ready:
            raise BackendError(
                f"{where}: Triton at {self.url} has no ready model {self.model_name!r} "
                f"(server models: {self._models()})"
            )
        answer = self._with_retries(where, lambda: self._client_now().get_model_metadata(self.model_name))
        model_meta = parsed(ModelMetadata, answer, where)
        if INFO_OUTPUT not in model_meta.output_names:
            return self._connect_unverified(where, model_meta)
        probe_where = f"{where} (Triton {self.url}, {INFO_OUTPUT} probe)"
        result = self._with_retries(probe_where, lambda: self._probe(INFO_OUTPUT))
        raw = result.as_numpy(INFO_OUTPUT)
        if raw is None or raw.size != 1:
            raise BackendError(
                f"{probe_where}: no {INFO_OUTPUT} output: the server's model is not this project's diar_nn_g repository"
            )
        return ServerModel.parse(raw, probe_where)

    def _connect_unverified(self, where: str, model_meta: ModelMetadata) -> ServerModel:
        """A model without MODEL_INFO: a label and a geometry from the caller, checked by one answer."""
        source = self._geometry_source
        geometry = source() if callable(source) and self.model_label else source
        config = versions = shape = None
        if self.model_label and geometry is not None:
            config = self._with_retries(where, lambda: self._client_now().get_model_config(self.model_name))
            versions = list(model_meta.versions)
            result = self._with_retries(where, lambda: self._probe(Op.SEGMENTATION.output_name))
            answer = result.as_numpy(Op.SEGMENTATION.output_name)
            shape = None if answer is None else tuple(answer.shape)
        return unverified_model(
            where,
            self.url,
            self.model_name,
            self.model_label,
            geometry,
            ServerAnswers(config, versions, shape, self.server_version),
        )

    def _probe(self, output: str) -> Any:
        """One window of silence (VALID 0), OP 0, asking for ``output`` only."""
        probe: dict[str, np.ndarray] = {
            ops.SPAN: np.zeros(1, np.float32),
            ops.OFFSETS: np.zeros(1, np.int64),
            ops.VALID: np.zeros(1, np.int32),
            ops.OP: np.zeros(1, np.int32),
        }
        inputs = _http_inputs(probe)
        return self._client_now().infer(
            self.model_name, inputs, outputs=[httpclient.InferRequestedOutput(output, binary_data=True)]
        )

    # -- requests and answers --------------------------------------------------------------
    def _where(self, where: str) -> str:
        return f"{where} (Triton {self.url} model {self.model_name!r})"

    def _prepare(self, op: Op, request: Mapping[str, np.ndarray], windows: int, rows: int, where: str) -> _Prepared:
        where = self._where(where)
        arrays: dict[str, np.ndarray] = {}
        for name, value in request.items():
            if value is None:
                continue
            if name not in WIRE_DTYPES:
                raise BackendError(f"{where}: {name!r} is not an input of the contract {list(ops.INPUT_NAMES)}")
            arrays[name] = np.ascontiguousarray(value, dtype=WIRE_DTYPES[name][0])
        size = sum(int(a.nbytes) for a in arrays.values())
        if size > self.max_request_bytes:
            raise BackendError(
                f"{where}: request of {size / 2**20:.1f} MiB exceeds max_request_bytes "
                f"{self.max_request_bytes / 2**20:.1f} MiB (Triton's --http-max-input-size, "
                "64 MiB by default from Triton 25.06); use a smaller k"
            )
        return _Prepared(op, arrays, windows, rows, where, None if self.shm else _http_inputs(arrays))

    def _attempt(self, call: _Prepared) -> tuple[dict[str, np.ndarray], float]:
        """One send: the outputs (as arrays) and the round trip's seconds."""
        if self._shm_pool is not None:
            return self._attempt_shm(call, self._shm_pool)
        outputs = [httpclient.InferRequestedOutput(call.op.output_name, binary_data=True)]
        start = time.perf_counter()
        result = self._client_now().infer(self.model_name, call.http_inputs, outputs=outputs)
        wall = time.perf_counter() - start
        out = result.as_numpy(call.op.output_name)
        return ({} if out is None else {call.op.output_name: out}), wall

    def _attempt_shm(self, call: _Prepared, pool: ShmPool) -> tuple[dict[str, np.ndarray], float]:
        """Inputs written into this call's region, the output read back from it (the HTTP body is JSON only)."""
        out_shape = expected_shape(call.op, call.windows, call.rows, self.geometry)
        dtypes = {key: WIRE_DTYPES[key][1] for key in call.arrays}
        return infer_through_shm(
            self._client_now(), self.model_name, pool, call.op.output_name, call.arrays, dtypes, out_shape, call.where
        )

    def _result(self, call: _Prepared, outputs: dict[str, np.ndarray], wall: float) -> CallResult:
        output = check_response(call.op, call.windows, call.rows, outputs, self.geometry, call.where)
        return CallResult(output, wall, None)


def _http_inputs(arrays: Mapping[str, np.ndarray]) -> list:
    inputs = []
    for name, array in arrays.items():
        tensor = httpclient.InferInput(name, list(array.shape), WIRE_DTYPES[name][1])
        tensor.set_data_from_numpy(array, binary_data=True)
        inputs.append(tensor)
    return inputs
