"""Triton's JSON answers, as small typed models: parsed once where the HTTP client hands them over, read by attribute.

The server's metadata, a model's metadata, its repository index, its statistics and an inference result's output
entry are JSON objects that Triton defines (its KServe-v2 HTTP protocol). Only the keys the Triton lane reads are
typed; every other key the server sends is ignored, and a key the server leaves out takes the default that the
lane always assumed for it.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.base.errors import BackendError
from harness.data.schemas.base import describe_error

M = TypeVar("M", bound=BaseModel)
_SERVERS = ConfigDict(extra="ignore", frozen=True, coerce_numbers_to_str=True)


class _Answer(BaseModel):
    """A JSON object the server wrote: the keys read here typed, the others ignored."""

    model_config = _SERVERS


class ServerMetadata(_Answer):
    """``/v2``: the server's name, version and extensions (only its version is read)."""

    version: str = ""


class TensorMetadata(_Answer):
    """One input or output as a model's metadata names it, or an output entry of an inference result."""

    name: str | None = None
    datatype: str | None = None
    shape: list[int] = Field(default_factory=list)


class ModelMetadata(_Answer):
    """``/v2/models/<name>``: the model's loaded versions and its outputs."""

    versions: list[str] = Field(default_factory=list)
    outputs: list[TensorMetadata] = Field(default_factory=list)

    @property
    def output_names(self) -> set[str | None]:
        return {o.name for o in self.outputs}


class RepositoryEntry(_Answer):
    """One model of the repository index (``/v2/repository/index``)."""

    name: str | None = None
    state: str = "?"


class Counter(_Answer):
    """One statistic of a model: how many, and the nanoseconds they took."""

    count: int = 0
    ns: int = 0


class InferenceStats(_Answer):
    """A model version's cumulative inference statistics (the parts the load sweep splits latency into)."""

    success: Counter = Field(default_factory=Counter)
    queue: Counter = Field(default_factory=Counter)
    compute_input: Counter = Field(default_factory=Counter)
    compute_infer: Counter = Field(default_factory=Counter)
    compute_output: Counter = Field(default_factory=Counter)


class ModelStats(_Answer):
    """One model version's entry of ``/v2/models/<name>/stats``; its statistics are kept as sent, to be typed
    (:class:`InferenceStats`) only for the model asked about, whose figures an error then shows as sent."""

    name: str | None = None
    inference_stats: object = Field(default_factory=dict)


class StatisticsAnswer(_Answer):
    """``/v2/models/<name>/stats``: an entry per model version."""

    model_stats: list[ModelStats] = Field(default_factory=list)


def parsed(model: type[M], answer: object, where: str) -> M:
    """``answer`` as ``model``, or a BackendError naming what in it is not what Triton sends."""
    try:
        return model.model_validate(answer)
    except ValidationError as exc:
        raise BackendError(f"{where}: the server's answer is not Triton's ({describe_error(exc)})") from None
