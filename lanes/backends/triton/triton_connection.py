"""The Triton backend's connection to its server: the HTTP client, made on first use and dropped after a
failure (a broken connection is never reused); one attempt at a request and its retries, the failure
policy of :mod:`lanes.backends.triton.triton_backend` (what each failure means:
:mod:`lanes.backends.triton.failures`); the
registration of shared-memory regions; and the server's models, named in an error.

The client library (``tritonclient[http]``, with gevent) is optional: where it is missing, the backend
refuses to start, so nothing here runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

from harness.base.errors import BackendError, one_line
from lanes.backends.triton.failures import Retryable as _Retryable
from lanes.backends.triton.failures import describe_os_error as _describe_os_error
from lanes.backends.triton.failures import is_connection_failure as _is_connection_failure
from lanes.backends.triton.failures import server_error
from lanes.backends.triton.shm import ShmPool
from lanes.backends.triton.triton_json import RepositoryEntry
from lanes.backends.triton.url import build_client

try:
    import gevent
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError:  # pragma: no cover - depends on the install (TritonBackend refuses to start without it)
    httpclient = None


class TritonConnection:
    """The connection and the failure policy of :class:`lanes.backends.triton.triton_backend.TritonBackend`, whose
    constructor sets the attributes below (from its URL and its :class:`lanes.backends.triton.failures.CallPolicy`)."""

    url: str
    model_name: str
    timeout_s: float
    retries: int
    backoff_s: float
    concurrency: int
    _host: str
    _ssl: bool
    _client: Any
    _shm_pool: ShmPool | None

    # -- connecting ------------------------------------------------------------------------
    def _models(self) -> str:
        try:
            answer = self._client_now().get_model_repository_index()
            index = TypeAdapter(list[RepositoryEntry]).validate_python(answer)
        except Exception:  # only decorates an error message
            return "unknown"
        return ", ".join(f"{m.name} {m.state}" for m in index) or "none"

    def _client_now(self) -> Any:
        if self._client is None:
            self._client = build_client(
                httpclient.InferenceServerClient,
                self._host,
                ssl=self._ssl,
                concurrency=self.concurrency,
                connection_timeout=self.timeout_s,
                network_timeout=self.timeout_s,
            )
        return self._client

    def _drop_connection(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken connection must not mask the real error
                pass

    def _register_region(self, name: str, key: str, size: int) -> None:
        self._client_now().register_system_shared_memory(name, key, size)

    def _unregister_region(self, name: str) -> None:
        self._client_now().unregister_system_shared_memory(name)

    # -- failure policy ----------------------------------------------------------------------
    def _with_retries(
        self, where: str, send: Callable[[], Any], first_attempt: int = 0, first_failure: _Retryable | None = None
    ) -> Any:
        """``send`` until it answers, at most ``retries + 1`` attempts in all (``first_attempt`` of
        them already made, the last failing with ``first_failure``)."""
        what = first_failure.what if first_failure is not None else "failed"
        for attempt in range(first_attempt, self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
                self._reset_shm()
            try:
                return self._once(where, send)
            except _Retryable as exc:
                what = exc.what
        tries = (
            f"after {self.retries} {'retry' if self.retries == 1 else 'retries'}" if self.retries else "(no retries)"
        )
        raise BackendError(f"{where}: Triton at {self.url} {what} {tries}")

    def _reset_shm(self) -> None:
        """Before a retry: the server may have restarted and forgotten its registrations; register anew."""
        if self._shm_pool is not None:
            self._shm_pool.close()

    def _once(self, where: str, send: Callable[[], Any], in_flight: bool = False) -> Any:
        """One attempt: the answer, a final BackendError, or _Retryable.

        ``in_flight``: other requests share the connection pool; a failure drops the connection
        only for the retry phase (which reconnects), never under the others' feet."""
        drop = (lambda: None) if in_flight else self._drop_connection
        try:
            return send()
        except InferenceServerException as exc:
            raise self._server_error(exc, where) from None
        except (TimeoutError, gevent.Timeout):
            drop()  # the connection is mid-answer; never reuse it
            raise self._timeout(where) from None
        except ConnectionRefusedError:
            drop()
            raise _Retryable("is not reachable (connection refused)") from None
        except (ConnectionError, OSError, EOFError) as exc:
            drop()
            raise _Retryable(f"is not reachable ({_describe_os_error(exc)})") from None
        except Exception as exc:  # geventhttpclient raises its own parser/protocol errors
            if _is_connection_failure(exc):
                drop()
                raise _Retryable(f"dropped the connection ({type(exc).__name__}: {one_line(exc)})") from None
            raise

    def _timeout(self, where: str) -> BackendError:
        return BackendError(
            f"{where}: Triton at {self.url} did not answer within "
            f"timeout_s={self.timeout_s:g} s (timeout; not retried: the server is still "
            "working on the request)"
        )

    def _server_error(self, exc: InferenceServerException, where: str) -> Exception:
        def on_timeout() -> BackendError:
            self._drop_connection()
            return self._timeout(where)

        return server_error(exc, where, self.url, self.model_name, self._models, on_timeout=on_timeout)
