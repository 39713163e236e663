"""How a Triton server is served, and the model's name there: one place for the server, its model repository and
the backend that calls it (each imports this; none imports another for it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from harness.base.errors import BackendError
from harness.data.numeric_settings import NumericSettings

MODEL_NAME: Final = "diar_nn_g"


@dataclass(frozen=True)
class ServerOptions:
    """How to serve. ``repository`` replaces the project's model repository (tests use it to
    serve a deliberately broken one); its ``config.pbtxt`` files get the same parameters, unless
    ``verbatim``: then the repository is served as it is (a user's own repository, probe models),
    copied unchanged, and ``model_spec``/``seed``/``device``/``numerics``/``instances`` do not apply."""

    model_spec: str = "full"
    seed: int = 0
    device: str = "cpu"
    # mypy's dataclass_transform reads pydantic's positional Field(default, ...) as no default
    numerics: NumericSettings = field(default_factory=NumericSettings)  # type: ignore[arg-type]
    instances: int = 1
    startup_timeout_s: float = 180.0
    stop_grace_s: float = 15.0
    extra_pythonpath: tuple[str, ...] = ()
    repository: Path | None = None
    model_name: str = MODEL_NAME
    log_verbose: int = 0
    log_path: Path | None = None  # kept after stop when given; otherwise inside the temp folder
    http_port: int = 0  # 0: a free port
    verbatim: bool = False

    def __post_init__(self) -> None:
        if self.instances < 1:
            raise BackendError(f"Triton server: instances must be >= 1, got {self.instances}")
