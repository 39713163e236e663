"""The release configuration (``harness.toml``): what the release is and how it is judged.

Declared once, as pydantic models (this module's sections, the tolerance models of the judges,
:class:`harness.numerics.NumericSettings`, :class:`harness.data.masks.MaskPolicy`). Every key is known;
an unknown key, a wrongly typed value or one out of range (an ``inf`` tolerance, a negative mask
fraction, a seed numpy cannot take) is refused with the key named, because a misspelt tolerance
silently falling back to a default is exactly the kind of error a sign-off must not contain.
See ``docs/configuration.md`` (and the annotated ``harness.toml.example``) for every key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.data.errors import ConfigError
from harness.data.masks import MaskPolicy
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas import describe_error
from harness.keyhints import did_you_mean
from harness.numerics import NumericSettings
from harness.tolerances import Tolerances

LANE_MODES = ("isolated", "chained")
SEED_MAX = 2**32 - 1  # numpy's RandomState takes seeds in 0..2**32-1
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
Shape = Annotated[int, Field(ge=1, le=100_000)]
DEVICE_PATTERN = r"^(cpu|cuda|cuda:[0-9]{1,3})$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _distinct(shapes: list[int]) -> list[int]:
    if not shapes:
        raise ValueError("give at least one shape")
    if len(set(shapes)) != len(shapes):
        raise ValueError(f"a shape is listed twice in {shapes}")
    return shapes


class ReleaseSection(_Section):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")] = Field(
        default="diar_nn_g-reference", description="release name: the golden's folder name and the report's title")
    device: Annotated[str, Field(pattern=DEVICE_PATTERN)] = Field(
        default="cpu", description="cpu | cuda | cuda:N (--device overrides)")


class ModelSection(_Section):
    spec: Annotated[str, Field(min_length=1)] = Field(
        default="full", description="full | small | package.module:factory | path/to/model.pt")
    seed: Seed = Field(default=0, description="seed of the reference weights")


class PerOpShapes(_Section):
    op0: list[Shape]
    op1: list[Shape]
    op2: list[Shape]

    @field_validator("op0", "op1", "op2")
    @classmethod
    def _check(cls, v: list[int]) -> list[int]:
        return _distinct(v)


class ShapesSection(_Section):
    release: list[Shape] | PerOpShapes = Field(
        default_factory=lambda: [1], description="blocks per call the release uses, or {op0, op1, op2}")
    candidates: list[Shape] = Field(default_factory=lambda: [2, 4], description="packed shapes to judge")
    pad_to_fixed: bool = Field(default=False, description="pad every pack to exactly k with empty blocks")

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list[int]) -> list[int]:
        return _distinct(v)

    @field_validator("release")
    @classmethod
    def _release(cls, v: list[int] | PerOpShapes) -> list[int] | PerOpShapes:
        return _distinct(v) if isinstance(v, list) else v


class LanesSection(_Section):
    voiceprint_inputs: Literal["isolated", "chained"] = Field(
        default="isolated", description="where each lane's voiceprint WEIGHTS/IDX come from: isolated = the "
        "golden's (the voiceprint network judged alone); chained = the lane's own segmentation, as production would")


class CorpusSection(_Section):
    source: Literal["synth"] = Field(default="synth", description="the corpus built when no --corpus is given")
    blocks: Annotated[int, Field(ge=1, le=10_000_000)] = Field(default=4, description="synthetic blocks")
    seed: Seed = Field(default=0, description="seed of the synthetic audio")
    step: Annotated[int, Field(ge=0)] = Field(default=0, description="window step in samples; 0 = a quarter window")


class ConfigFile(_Section):
    """``harness.toml``: every section optional."""

    release: ReleaseSection = Field(default_factory=ReleaseSection)
    model: ModelSection = Field(default_factory=ModelSection)
    shapes: ShapesSection = Field(default_factory=ShapesSection)
    lanes: LanesSection = Field(default_factory=LanesSection)
    masks: MaskPolicy = Field(default_factory=MaskPolicy)
    numerics: NumericSettings = Field(default_factory=NumericSettings)
    tolerances: Tolerances = Field(default_factory=Tolerances)
    corpus: CorpusSection = Field(default_factory=CorpusSection)


@dataclass(frozen=True)
class ModelSpec:
    """How to build the model (``lanes.model_api.load_model`` does): a spec and a seed."""

    spec: str = "full"
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "seed": self.seed}


@dataclass(frozen=True)
class ReleaseConfig:
    """The configuration a command runs with (file values, then command-line overrides)."""

    name: str = "diar_nn_g-reference"
    device: str = "cpu"
    model: ModelSpec = field(default_factory=ModelSpec)
    release_shapes: dict[Op, tuple[int, ...]] = field(default_factory=lambda: {op: (1,) for op in ALL_OPS})
    candidates: tuple[int, ...] = (2, 4)
    pad_to_fixed: bool = False
    mode: str = "isolated"
    masks: MaskPolicy = field(default_factory=MaskPolicy)
    numerics: NumericSettings = field(default_factory=NumericSettings)
    tolerances: Tolerances = field(default_factory=Tolerances)
    corpus: CorpusSection = field(default_factory=CorpusSection)

    def to_dict(self) -> dict[str, Any]:
        return {
            "release": {"name": self.name, "device": self.device},
            "model": self.model.to_dict(),
            "shapes": {"release": {f"op{int(op)}": list(ks) for op, ks in self.release_shapes.items()},
                       "candidates": list(self.candidates), "pad_to_fixed": self.pad_to_fixed},
            "lanes": {"voiceprint_inputs": self.mode},
            "masks": self.masks.model_dump(exclude_none=True),
            "numerics": self.numerics.to_dict(),
            "tolerances": self.tolerances.model_dump(exclude_none=True),
            "corpus": self.corpus.model_dump(),
        }

    def release_shapes_json(self) -> dict[str, list[int]]:
        return {str(int(op)): list(ks) for op, ks in self.release_shapes.items()}

    def with_overrides(self, **changes: Any) -> ReleaseConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_config(path: str | Path | None) -> ReleaseConfig:
    """Read ``harness.toml``; ``None`` gives the embedded default."""
    if path is None:
        return ReleaseConfig()
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: configuration file expected, found a directory") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); a configuration is a TOML text file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    return config_from_dict(data, str(path))


def config_from_dict(data: dict[str, Any], where: str = "config") -> ReleaseConfig:
    try:
        parsed = ConfigFile.model_validate(data)
    except ValidationError as exc:
        line = describe_error(exc)
        close = did_you_mean(ConfigFile, exc)  # a misspelt key: every key has a default, so none is "missing"
        if close is not None and "did you mean" not in line:
            line = line.replace("unknown key", f"unknown key (did you mean {close!r}?)", 1)
        raise ConfigError(f"{where}: {line}") from None
    shapes = parsed.shapes
    if isinstance(shapes.release, list):
        release = {op: tuple(shapes.release) for op in ALL_OPS}
    else:
        release = {Op(int(k[2])): tuple(v) for k, v in shapes.release.model_dump().items()}
    if any(1 not in ks for ks in release.values()):
        raise ConfigError(f"{where}: shapes.release: every OP's release shapes must include 1 (the exact lane "
                          "runs one block per call)")
    return ReleaseConfig(
        name=parsed.release.name,
        device=parsed.release.device,
        model=ModelSpec(parsed.model.spec, parsed.model.seed),
        release_shapes=release,
        candidates=tuple(shapes.candidates),
        pad_to_fixed=shapes.pad_to_fixed,
        mode=parsed.lanes.voiceprint_inputs,
        masks=parsed.masks,
        numerics=parsed.numerics,
        tolerances=parsed.tolerances,
        corpus=parsed.corpus,
    )
