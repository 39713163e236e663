"""The Triton backend: the same seam as the in-process backend, over HTTP with binary tensors.

Both lanes of a comparison call one backend, so running them through a real server measures
what the engine will see: Triton's transport, the Python backend's copies, and the model code
of ``model_repository/diar_nn_g/1/model.py`` (which loads the very same model object).

The fingerprint and geometry are asked of the server (the ``MODEL_INFO`` output of a one-window
probe at connect time), never assumed: a golden recorded through Triton names the model the
server actually loaded.

Failure policy (every failure is one :class:`BackendError` line naming the request, the URL and
what happened):

- connection refused/reset and HTTP 5xx: retried ``retries`` times with exponential backoff
  (a restarting or briefly overloaded server);
- HTTP 4xx and any error the model itself answered: final (retrying cannot change the answer);
- a timeout: final too; the server is still working on the request, so resending it would only
  queue a second copy behind the first;
- an answer with the wrong outputs, shape or dtype: final, via :func:`harness.response.check_response`.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from harness import ops
from harness.errors import BackendError
from harness.geometry import Geometry
from harness.ops import Op
from harness.response import check_response
from lanes.backend import CallResult

try:
    import gevent
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as _exc:  # pragma: no cover - depends on the install
    httpclient = None
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None

MODEL_NAME = "diar_nn_g"
INFO_OUTPUT = "MODEL_INFO"
MODEL_ERROR_TAG = "diar_nn_g model error"  # set by model.py on errors the model itself answered
WIRE_DTYPES: dict[str, tuple[type, str]] = {
    ops.SPAN: (np.float32, "FP32"),
    ops.OFFSETS: (np.int64, "INT64"),
    ops.VALID: (np.int32, "INT32"),
    ops.OP: (np.int32, "INT32"),
    ops.WEIGHTS: (np.float32, "FP32"),
    ops.IDX: (np.int32, "INT32"),
}

_CONNECTION_WORDS = ("connection", "httpparse", "protocol", "remote", "incomplete", "badstatus")

Call = tuple[Op, Mapping[str, np.ndarray], int, int, str]


class _Retryable(Exception):
    """A failure worth another try; ``what`` is how the final error will describe it."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class ServerModel:
    """What the server says about the model it loaded (the MODEL_INFO output)."""

    fingerprint: str
    geometry: Geometry
    describe: dict
    device: str
    device_kind: str
    numerics_requested: dict | None
    numerics_in_force: dict | None
    environment: dict | None = None

    @classmethod
    def parse(cls, raw: Any, where: str) -> ServerModel:
        try:
            value = raw.reshape(-1)[0] if isinstance(raw, np.ndarray) else raw
            info = json.loads(value.decode() if isinstance(value, bytes) else str(value))
            return cls(str(info["fingerprint"]), Geometry.from_dict(info["geometry"]), dict(info["model"]),
                       str(info.get("device", "cpu")), str(info.get("device_kind", "cpu")),
                       info.get("numerics_requested"), info.get("numerics_in_force"), info.get("environment"))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise BackendError(f"{where}: MODEL_INFO is not the expected JSON "
                               f"({type(exc).__name__}: {exc})") from None


class TritonBackend:
    """Runs requests on a Triton server's ``model_name``. See the module doc for the failure policy."""

    name = "triton"

    def __init__(self, url: str, model_name: str = MODEL_NAME, *, timeout_s: float = 120.0, retries: int = 3,
                 backoff_s: float = 0.5, max_request_bytes: int = 64 * 2**20, concurrency: int = 1) -> None:
        if _IMPORT_ERROR is not None:
            raise BackendError(f"Triton backend needs tritonclient[http] ({_IMPORT_ERROR}); "
                               "install the 'triton' extra")
        if retries < 0 or concurrency < 1 or timeout_s <= 0 or max_request_bytes <= 0:
            raise BackendError(f"Triton backend: bad settings retries={retries} concurrency={concurrency} "
                               f"timeout_s={timeout_s} max_request_bytes={max_request_bytes}")
        self.url = url if "://" in url else f"http://{url}"
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise BackendError(f"Triton backend: {url!r} is not an http(s)://host:port URL")
        self._host, self._ssl = parts.netloc, parts.scheme == "https"
        self.model_name = model_name
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.max_request_bytes, self.concurrency = int(max_request_bytes), int(concurrency)
        self._client: Any = None
        self.server_version = ""
        try:
            self.server = self._connect()
        except BaseException:
            self.close()
            raise
        self.geometry: Geometry = self.server.geometry
        self.fingerprint: str = self.server.fingerprint

    @property
    def device_kind(self) -> str:
        return self.server.device_kind

    # -- the seam --------------------------------------------------------------------------
    def call(self, op: Op, request: Mapping[str, np.ndarray], windows: int, rows: int,
             where: str) -> CallResult:
        where = self._where(where)
        inputs = self._inputs(request, where)
        outputs = [httpclient.InferRequestedOutput(op.output_name, binary_data=True)]

        def timed() -> tuple[Any, float]:  # the answered attempt only: backoff sleeps are not the model's
            start = time.perf_counter()
            return self._infer(inputs, outputs), time.perf_counter() - start

        result, wall = self._with_retries(where, timed)
        return CallResult(self._output(op, result, windows, rows, where), wall, None)

    def call_many(self, calls: Sequence[Call]) -> list[CallResult]:
        """Send ``calls`` with up to ``concurrency`` in flight; results in order.

        ``wall_s`` of each is its own latency (send to answer), which overlaps the others'.
        A call that fails in flight with a retryable error is retried alone, synchronously.
        """
        if self.concurrency == 1 or len(calls) <= 1:
            return [self.call(*c) for c in calls]
        results: list[CallResult | None] = [None] * len(calls)
        in_flight: deque = deque()
        for i, (op, request, _, _, where) in enumerate(calls):
            inputs = self._inputs(request, self._where(where))
            outputs = [httpclient.InferRequestedOutput(op.output_name, binary_data=True)]
            try:
                handle = self._client_now().async_infer(self.model_name, inputs, outputs=outputs)
            except Exception as exc:  # classified below, like a failed get_result
                handle = exc
            in_flight.append((i, time.perf_counter(), handle))
            if len(in_flight) >= self.concurrency:
                self._collect(in_flight.popleft(), calls, results)
        while in_flight:
            self._collect(in_flight.popleft(), calls, results)
        return [r for r in results if r is not None]

    def environment(self) -> dict:
        model = dict(self.server.describe)
        model.setdefault("fingerprint", self.fingerprint)
        return {"backend": self.name, "url": self.url, "server_version": self.server_version,
                "model_name": self.model_name, "device": self.server.device, "device_kind": self.device_kind,
                "model": model, "numerics_requested": self.server.numerics_requested,
                "numerics_in_force": self.server.numerics_in_force,
                "environment": self.server.environment}

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken connection must not mask the real error
                pass

    def __enter__(self) -> TritonBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connecting ------------------------------------------------------------------------
    def _connect(self) -> ServerModel:
        where = f"connecting to model {self.model_name!r}"
        metadata = self._with_retries(where, lambda: self._client_now().get_server_metadata())
        self.server_version = str(metadata.get("version", ""))
        ready = self._with_retries(where, lambda: self._client_now().is_model_ready(self.model_name))
        if not ready:
            raise BackendError(f"{where}: Triton at {self.url} has no ready model {self.model_name!r} "
                               f"(server models: {self._models()})")
        probe = {ops.SPAN: np.zeros(1, np.float32), ops.OFFSETS: np.zeros(1, np.int64),
                 ops.VALID: np.zeros(1, np.int32), ops.OP: np.zeros(1, np.int32)}
        probe_where = f"{where} (Triton {self.url}, MODEL_INFO probe)"
        inputs = self._inputs(probe, probe_where)
        outputs = [httpclient.InferRequestedOutput(INFO_OUTPUT, binary_data=True)]
        result = self._with_retries(probe_where, lambda: self._infer(inputs, outputs))
        raw = result.as_numpy(INFO_OUTPUT)
        if raw is None or raw.size != 1:
            raise BackendError(f"{probe_where}: no {INFO_OUTPUT} output: the server's model is not this "
                               "project's diar_nn_g repository")
        return ServerModel.parse(raw, probe_where)

    def _models(self) -> str:
        try:
            index = self._client_now().get_model_repository_index()
        except Exception:  # only decorates an error message
            return "unknown"
        return ", ".join(f"{m.get('name')} {m.get('state', '?')}" for m in index) or "none"

    def _infer(self, inputs: list, outputs: list) -> Any:
        return self._client_now().infer(self.model_name, inputs, outputs=outputs)

    def _client_now(self) -> Any:
        if self._client is None:
            self._client = httpclient.InferenceServerClient(
                self._host, ssl=self._ssl, concurrency=self.concurrency,
                connection_timeout=self.timeout_s, network_timeout=self.timeout_s)
        return self._client

    # -- requests and answers --------------------------------------------------------------
    def _where(self, where: str) -> str:
        return f"{where} (Triton {self.url} model {self.model_name!r})"

    def _inputs(self, request: Mapping[str, np.ndarray], where: str) -> list:
        arrays = {}
        for name, value in request.items():
            if value is None:
                continue
            if name not in WIRE_DTYPES:
                raise BackendError(f"{where}: {name!r} is not an input of the contract "
                                   f"{list(ops.INPUT_NAMES)}")
            arrays[name] = np.ascontiguousarray(value, dtype=WIRE_DTYPES[name][0])
        size = sum(int(a.nbytes) for a in arrays.values())
        if size > self.max_request_bytes:
            raise BackendError(f"{where}: request of {size / 2**20:.1f} MiB exceeds max_request_bytes "
                               f"{self.max_request_bytes / 2**20:.1f} MiB (Triton's --http-max-input-size, "
                               "64 MiB by default); use a smaller k")
        inputs = []
        for name, array in arrays.items():
            tensor = httpclient.InferInput(name, list(array.shape), WIRE_DTYPES[name][1])
            tensor.set_data_from_numpy(array, binary_data=True)
            inputs.append(tensor)
        return inputs

    def _output(self, op: Op, result: Any, windows: int, rows: int, where: str) -> np.ndarray:
        out = result.as_numpy(op.output_name)
        outputs = {} if out is None else {op.output_name: out}
        return check_response(op, windows, rows, outputs, self.geometry, where)

    def _collect(self, item: tuple, calls: Sequence[Call], results: list) -> None:
        i, start, handle = item
        op, request, windows, rows, where = calls[i]
        full_where = self._where(where)
        try:
            if isinstance(handle, BaseException):
                raise handle
            result = self._once(full_where, lambda: handle.get_result(block=True, timeout=self.timeout_s))
        except _Retryable:
            results[i] = self.call(op, request, windows, rows, where)
            return
        wall = time.perf_counter() - start
        results[i] = CallResult(self._output(op, result, windows, rows, full_where), wall, None)

    # -- failure policy ----------------------------------------------------------------------
    def _with_retries(self, where: str, send: Callable[[], Any]) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return self._once(where, send)
            except _Retryable as exc:
                what = exc.what
                if attempt < self.retries:
                    time.sleep(self.backoff_s * 2**attempt)
        tries = f"after {self.retries} {'retry' if self.retries == 1 else 'retries'}" if self.retries \
            else "(no retries)"
        raise BackendError(f"{where}: Triton at {self.url} {what} {tries}")

    def _once(self, where: str, send: Callable[[], Any]) -> Any:
        """One attempt: the answer, a final BackendError, or _Retryable."""
        try:
            return send()
        except InferenceServerException as exc:
            raise self._server_error(exc, where) from None
        except (TimeoutError, gevent.Timeout):
            self.close()  # the connection is mid-answer; never reuse it
            raise self._timeout(where) from None
        except ConnectionRefusedError:
            self.close()
            raise _Retryable("is not reachable (connection refused)") from None
        except (ConnectionError, OSError, EOFError) as exc:
            self.close()
            raise _Retryable(f"is not reachable ({_describe_os_error(exc)})") from None
        except Exception as exc:  # geventhttpclient raises its own parser/protocol errors
            if _is_connection_failure(exc):
                self.close()
                raise _Retryable(f"dropped the connection ({type(exc).__name__}: {_one_line(exc)})") from None
            raise

    def _timeout(self, where: str) -> BackendError:
        return BackendError(f"{where}: Triton at {self.url} did not answer within "
                            f"timeout_s={self.timeout_s:g} s (timeout; not retried: the server is still "
                            "working on the request)")

    def _server_error(self, exc: InferenceServerException, where: str) -> Exception:
        status = _status(exc)
        message = _one_line(exc.message() or str(exc))
        if MODEL_ERROR_TAG in message:
            return BackendError(f"{where}: the model answered an error: {message}")
        if status == 404 or "unknown model" in message.lower() or "not found" in message.lower():
            return BackendError(f"{where}: Triton at {self.url} has no model {self.model_name!r} loaded "
                                f"(HTTP {status}: {message}; server models: {self._models()})")
        if status is not None and 500 <= status < 600:
            return _Retryable(f"failed with HTTP {status} ({message})")
        if "failed to obtain inference response" in message:  # get_result's own timeout
            self.close()
            return self._timeout(where)
        if "not ready" in message.lower() or "unavailable" in message.lower():
            return _Retryable(f"is not ready ({message})")
        return BackendError(f"{where}: Triton at {self.url} refused the request (HTTP {status}: {message})")


def _status(exc: InferenceServerException) -> int | None:
    try:
        return int(exc.status())
    except (TypeError, ValueError):
        return None


def _describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(exc, BrokenPipeError):
        return "connection closed by the server"
    if isinstance(exc, EOFError):
        return "connection closed mid-answer"
    return f"{type(exc).__name__}: {_one_line(exc)}"


def _is_connection_failure(exc: BaseException) -> bool:
    name = type(exc).__name__.lower()
    return any(word in name for word in _CONNECTION_WORDS)


def _one_line(exc: object, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
