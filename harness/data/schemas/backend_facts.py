"""``score.json``'s ``backend``: what ran the requests, as the report and JUnit name it.

A night run through a Triton server (``--backend``) measures the server's transport and copies as
well as the model; a reader of its sign-off must see that it was one, which server, over which
transport and with how many requests in flight (then calls overlap: their summed time is no share
of the wall). The run manifest records the backend's own description (``backend``, an open table);
this is the part of it the score carries, typed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.data.schemas.base import Frozen, Positive
from harness.data.schemas.machine import BackendRecord


class BackendFacts(Frozen):
    """The backend of the run a score judged: this process, or a Triton server."""

    name: str = Field(description="'in-process' (the model in the harness's process) or 'triton'")
    url: str | None = Field(description="the Triton server's URL (None in-process)")
    transport: Literal["http", "shm"] | None = Field(
        description="how tensors travel to the server: http (in the request body) or shm (system shared memory); "
        "None in-process"
    )
    concurrency: Positive = Field(description="requests in flight at once (1 in-process: one call at a time)")
    calls_in_flight: Positive = Field(
        default=1,
        description="in-process: calls inside the model at once (2: a model without stage that two threads may "
        "enter, its host part beside the device's part of the call before; 1 otherwise)",
    )
    server_version: str | None = Field(description="the Triton server's version (None in-process)")
    model_name: str | None = Field(description="the model's name on the server (None in-process)")
    weights_verified: bool | None = Field(
        description="the server's model reports its fingerprint (MODEL_INFO); False: a label only; None in-process"
    )

    @classmethod
    def of(cls, backend: BackendRecord) -> BackendFacts:
        """From a run manifest's ``backend`` (``Backend.environment()`` less model and environment)."""
        return cls(
            name=backend.backend,
            url=backend.url,
            transport=backend.transport,
            concurrency=backend.concurrency or 1,
            calls_in_flight=backend.calls_in_flight or 1,
            server_version=backend.server_version or None,
            model_name=backend.model_name,
            weights_verified=backend.weights_verified,
        )

    @property
    def remote(self) -> bool:
        return self.url is not None

    def rows(self) -> dict[str, str]:
        """The report's rows, in order: what a reader needs to know the lanes' numbers are the server's."""
        if not self.remote:
            at_once = "one call at a time" if self.calls_in_flight == 1 else f"{self.calls_in_flight} calls in flight"
            return {"backend": f"{self.name} (the model in the harness's own process, {at_once})"}
        server = [("server version", self.server_version)] if self.server_version else []
        if self.model_name:
            label = "" if self.weights_verified is not False else " (weights not verified: a label only)"
            server.append(("server model", self.model_name + label))
        return {
            "backend": f"{self.name} server {self.url}",
            "transport": self.transport or "http",
            "shared memory": "yes" if self.transport == "shm" else "no",
            "requests in flight": str(self.concurrency),
            **dict(server),
        }
