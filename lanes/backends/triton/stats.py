"""Triton's own account of a model's requests: queue and compute time, from the statistics endpoint.

``/v2/models/<name>/stats`` (tritonclient's ``get_inference_statistics``) holds cumulative counters
per model version: successful inferences, and nanoseconds spent queued, copying inputs in, running
the model and copying outputs out. The load sweep reads them before and after each (shape,
concurrency) point and keeps the difference, so the latency the client saw can be split into the
server's queue (requests waiting for a free model instance) and its compute.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pydantic import ValidationError

from harness.base.errors import BackendError
from harness.data.schemas.load import ServerStats
from lanes.backends.triton.triton_json import InferenceStats, StatisticsAnswer, parsed
from lanes.backends.triton.url import build_client, parse_triton_url

PARTS = ("queue", "compute_input", "compute_infer", "compute_output")


def parse_stats(answer: Mapping[str, object], model_name: str, where: str) -> ServerStats:
    """The counters of ``model_name`` summed over its versions (one, in this project's repository).

    ``answer`` is Triton's statistics JSON, typed here (:class:`StatisticsAnswer`) where it is read."""
    models = [m for m in parsed(StatisticsAnswer, answer, where).model_stats if m.name == model_name]
    if not models:
        raise BackendError(f"{where}: the server's statistics hold no model {model_name!r}")
    stats = []
    for m in models:
        try:
            stats.append(InferenceStats.model_validate(m.inference_stats))
        except ValidationError:
            raise BackendError(
                f"{where}: the server's statistics of {model_name!r} are not numbers: {m.inference_stats!r}"
            ) from None
    return ServerStats(
        requests=sum(s.success.count for s in stats),
        queue_ns=sum(s.queue.ns for s in stats),
        compute_input_ns=sum(s.compute_input.ns for s in stats),
        compute_infer_ns=sum(s.compute_infer.ns for s in stats),
        compute_output_ns=sum(s.compute_output.ns for s in stats),
    )


def difference(before: ServerStats, after: ServerStats, where: str) -> ServerStats:
    """``after - before``; a counter that went down means the server restarted between the two reads."""
    fields = ("requests", *(f"{p}_ns" for p in PARTS))
    delta = {f: getattr(after, f) - getattr(before, f) for f in fields}
    down = [f for f, v in delta.items() if v < 0]
    if down:
        raise BackendError(
            f"{where}: the server's statistics went down ({down[0]}: {getattr(before, down[0])} -> "
            f"{getattr(after, down[0])}): the server restarted during the point; run it again"
        )
    return ServerStats(**delta)


class StatsReader:
    """Reads one model's statistics from a Triton server over HTTP (its own connection, not the lanes')."""

    def __init__(self, url: str, model_name: str, timeout_s: float = 30.0) -> None:
        try:
            import tritonclient.http as httpclient
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise BackendError(
                f"Triton statistics need tritonclient[http] ({exc}); install the 'triton' extra"
            ) from None
        parsed = parse_triton_url(url, "Triton statistics")
        self.url, self.model_name = parsed.url, model_name
        self._client = build_client(
            httpclient.InferenceServerClient,
            parsed.host_port,
            ssl=parsed.ssl,
            connection_timeout=timeout_s,
            network_timeout=timeout_s,
        )

    def read(self) -> ServerStats:
        where = f"statistics of model {self.model_name!r} (Triton {self.url})"
        try:
            answer = self._client.get_inference_statistics(self.model_name)
        except Exception as exc:  # tritonclient raises its own exceptions and the socket's
            raise BackendError(f"{where}: {type(exc).__name__}: {' '.join(str(exc).split())}") from None
        if not isinstance(answer, Mapping):
            raise BackendError(f"{where}: expected a JSON object, got {type(answer).__name__}")
        return parse_stats(answer, self.model_name, where)

    def read_settled(self, wait_s: float = 2.0) -> ServerStats:
        """The statistics once two reads 20 ms apart agree (at most ``wait_s``): Triton records a request's
        figures after it answers it, so a read right after a call may miss it (the load sweep's backend
        probes the model as it is built, just before the point's first read: counted once by the server,
        it showed as one request more than the point sent, on a loaded machine)."""
        last = self.read()
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            time.sleep(0.02)
            now = self.read()
            if now == last:
                return now
            last = now
        return last

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # closing must never mask the sweep's own error
            pass

    def __enter__(self) -> StatsReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
