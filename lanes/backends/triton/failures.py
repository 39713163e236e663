"""How a failed Triton call is classified: retry it (connection down, 5xx, not ready) or say it once.

Retrying is only for failures that another attempt can change: a server that is restarting, briefly
overloaded or not yet ready. An error the model itself answered, a 4xx, an unknown model and a
timeout are final (a timed-out request is still running on the server: resending it would only
queue a second copy behind the first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.base.errors import BackendError, one_line

MODEL_ERROR_TAG = "diar_nn_g model error"  # set by model.py on errors the model itself answered
CONNECTION_WORDS = ("connection", "httpparse", "protocol", "remote", "incomplete", "badstatus")


@dataclass(frozen=True)
class CallPolicy:
    """How a Triton backend makes each call: its timeout, how often a failed one is retried and the pause
    before the first retry (doubled each time), and the largest request it sends (Triton's
    ``--http-max-input-size``)."""

    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 0.5
    max_request_bytes: int = 64 * 2**20


class Retryable(Exception):
    """A failure worth another try; ``what`` is how the final error will describe it."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def server_error(
    exc, where: str, url: str, model_name: str, models: Callable[[], str], on_timeout: Callable[[], BackendError]
) -> Exception:
    """An ``InferenceServerException`` as a final BackendError or a Retryable."""
    status = status_of(exc)
    message = one_line(exc.message() or str(exc))
    if MODEL_ERROR_TAG in message:
        return BackendError(f"{where}: the model answered an error: {message}")
    if status == 404 or "unknown model" in message.lower() or "not found" in message.lower():
        return BackendError(
            f"{where}: Triton at {url} has no model {model_name!r} loaded "
            f"(HTTP {status}: {message}; server models: {models()})"
        )
    if status is not None and 500 <= status < 600:
        return Retryable(f"failed with HTTP {status} ({message})")
    if "failed to obtain inference response" in message:  # get_result's own timeout
        return on_timeout()
    if "not ready" in message.lower() or "unavailable" in message.lower():
        return Retryable(f"is not ready ({message})")
    return BackendError(f"{where}: Triton at {url} refused the request (HTTP {status}: {message})")


def status_of(exc) -> int | None:
    try:
        return int(exc.status())
    except (TypeError, ValueError):
        return None


def describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(exc, BrokenPipeError):
        return "connection closed by the server"
    if isinstance(exc, EOFError):
        return "connection closed mid-answer"
    return f"{type(exc).__name__}: {one_line(exc)}"


def is_connection_failure(exc: BaseException) -> bool:
    name = type(exc).__name__.lower()
    return any(word in name for word in CONNECTION_WORDS)
