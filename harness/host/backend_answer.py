"""What a backend says about itself (``Backend.environment()``), parsed once where the harness reads it.

The backend protocol hands out a plain JSON object whose other keys are the backend's own (a server's URL, a
warning); the harness reads a few of them (the model's description, the device, a remote machine's environment,
the numeric settings) to write a manifest's provenance and name the model an audit re-ran on. Its own module,
beside :mod:`harness.host.environment`, so that reading the machine's environment does not import pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.base.errors import BackendError
from harness.base.keyhints import Problem


class BackendAnswer(BaseModel):
    """``Backend.environment()``'s answer (the backend protocol hands out a JSON object, its other keys the
    backend's own), parsed once where the harness reads it: the keys it reads, typed; the rest kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: dict[str, object] | None = None  # the model's own description (describe()): its keys the model's
    device: str = "cpu"
    environment: dict[str, object] | None = None  # a remote backend's own machine (None: this process)
    numerics_requested: dict[str, object] | None = None
    numerics_in_force: dict[str, object] | None = None

    @classmethod
    def of(cls, answer: Mapping[str, object]) -> BackendAnswer:
        """The answer parsed, or a BackendError naming each key that is not what the protocol says."""
        try:
            return cls.model_validate(answer)
        except ValidationError as exc:
            wrong = "; ".join(f"{'.'.join(map(str, p.loc)) or 'the answer'}: {p.msg}" for p in Problem.all_of(exc))
            raise BackendError(f"the backend's environment() answer is not the backend protocol's ({wrong})") from None
