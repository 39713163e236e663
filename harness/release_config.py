"""The release configuration (``harness.toml``): what the release is and how it is judged.

Declared once, as pydantic models in the data layer (:mod:`harness.data.schemas.config_file`: every section,
with :mod:`harness.data.tolerances`, :class:`harness.data.numeric_settings.NumericSettings` and
:class:`harness.data.masks.MaskPolicy`); this module reads the file and applies ``--set``. Every key is known;
an unknown key, a wrongly typed value or one out of range (an ``inf`` tolerance, a negative mask
fraction, a seed numpy cannot take) is refused with the key named, because a misspelt tolerance
silently falling back to a default is exactly the kind of error a sign-off must not contain.
See ``docs/configuration.md`` (and the annotated ``harness.toml.example``) for every key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.data.errors import ConfigError
from harness.data.keyhints import did_you_mean
from harness.data.masks import MaskPolicy
from harness.data.modes import VoiceprintInputs
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas import describe_error
from harness.data.schemas.config_file import (
    BackendSection,
    ConfigFile,
    CorpusSection,
    EvidenceSection,
    HistorySection,
    LoadSection,
    LocaliseSection,
    NightlySection,
    PackerSection,
    RaySection,
)
from harness.data.tolerances import Tolerances
from harness.data.tomlio import read_toml


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
    voiceprint_inputs: VoiceprintInputs = VoiceprintInputs.ISOLATED  # [lanes] voiceprint_inputs
    warm_up: str = "auto"  # [lanes] warm_up: how the job runs, kept out of to_dict
    masks: MaskPolicy = field(default_factory=MaskPolicy)
    numerics: NumericSettings = field(default_factory=NumericSettings)
    tolerances: Tolerances = field(default_factory=Tolerances)
    corpus: CorpusSection = field(default_factory=CorpusSection)
    # how the job runs, not what the release is: kept out of to_dict (a run's manifest records the release)
    backend: BackendSection = field(default_factory=BackendSection)
    ray: RaySection = field(default_factory=RaySection)
    packer: PackerSection = field(default_factory=PackerSection)
    nightly: NightlySection = field(default_factory=NightlySection)
    history: HistorySection = field(default_factory=HistorySection)
    evidence: EvidenceSection = field(default_factory=EvidenceSection)  # the run manifest's "evidence" records it
    localise: LocaliseSection = field(default_factory=LocaliseSection)  # the golden's module_floors record it
    load: LoadSection = field(default_factory=LoadSection)  # the score's "load" records the sweep
    source: Path | None = field(default=None, compare=False)  # the file read (None: embedded): an input of a command

    def to_dict(self) -> dict[str, Any]:
        return {
            "release": {"name": self.name, "device": self.device},
            "model": self.model.to_dict(),
            "shapes": {
                "release": {f"op{int(op)}": list(ks) for op, ks in self.release_shapes.items()},
                "candidates": list(self.candidates),
                "pad_to_fixed": self.pad_to_fixed,
            },
            "lanes": {"voiceprint_inputs": self.voiceprint_inputs},
            "masks": self.masks.model_dump(exclude_none=True),
            "numerics": self.numerics.to_dict(),
            "tolerances": self.tolerances.model_dump(exclude_none=True),
            "corpus": self.corpus.model_dump(),
        }

    def release_shapes_json(self) -> dict[str, list[int]]:
        return {str(int(op)): list(ks) for op, ks in self.release_shapes.items()}

    def with_overrides(self, **changes: Any) -> ReleaseConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True)
class Override:
    """One value given on the command line for one key of the file: ``--seed 3`` is
    ``Override("--seed", "model.seed", 3, "3")``. It is merged into the file's table and validated with
    it, by the one validator (:class:`ConfigFile`); a refusal names ``flag shown`` (the flag as typed)."""

    flag: str
    key: str  # dotted: "model.seed", "tolerances.op0.mode"
    value: Any
    shown: str


def load_config(path: str | Path | None, overrides: Sequence[Override] = ()) -> ReleaseConfig:
    """Read ``harness.toml`` (``None``: the embedded default), merge the command line's ``overrides``
    (later ones win) and validate the whole once."""
    data = {} if path is None else read_toml(Path(path))
    for item in overrides:
        merge_key(data, item.key, item.value)
    config = config_from_dict(data, "config" if path is None else str(path), overrides)
    return config if path is None else replace(config, source=Path(path))


def merge_key(data: dict[str, Any], key: str, value: Any) -> None:
    """``data[a][b] = value`` for ``key`` "a.b" (tables created; a non-table on the way is replaced)."""
    *tables, last = key.split(".")
    for name in tables:
        inner = data.get(name)
        if not isinstance(inner, dict):
            inner = data[name] = {}
        data = inner
    data[last] = value


def parse_set(text: str) -> Override:
    """``--set TABLE.KEY=VALUE``: VALUE is a TOML value (``4``, ``true``, ``"x"``, ``[2, 4]``); text that is
    no TOML value is taken as a string (``--set backend.url=http://h:8000``)."""
    key, eq, value = text.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not eq or len(parts) < 2 or not all(p.strip() and p == p.strip() for p in parts):
        raise ConfigError(
            f"--set {text!r}: expected TABLE.KEY=VALUE, e.g. backend.concurrency=4 (keys: docs/configuration.md)"
        )
    try:
        parsed: Any = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return Override("--set", key, parsed, repr(text))


def _refusal(exc: ValidationError, where: str, overrides: Sequence[Override]) -> ConfigError:
    """The one line for a refused configuration: the flag it came from when a flag gave the value,
    else the file (``where``) and the key."""
    line = describe_error(exc)
    close = did_you_mean(ConfigFile, exc)  # a misspelt key: every key has a default, so none is "missing"
    if close is not None and "did you mean" not in line:
        line = line.replace("unknown key", f"unknown key (did you mean {close!r}?)", 1)
    loc = line.split(": ", 1)[0]
    for item in reversed(overrides):  # the last one given for a key is the one validated
        if loc == item.key or loc.startswith(item.key + ".") or item.key.startswith(loc + "."):
            return ConfigError(f"{item.flag} {item.shown}: {line}")
    return ConfigError(f"{where}: {line}")


def config_from_dict(data: dict[str, Any], where: str = "config", overrides: Sequence[Override] = ()) -> ReleaseConfig:
    try:
        parsed = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise _refusal(exc, where, overrides) from None
    shapes = parsed.shapes
    if isinstance(shapes.release, list):
        release = {op: tuple(shapes.release) for op in ALL_OPS}
    else:
        release = {Op(int(k[2])): tuple(v) for k, v in shapes.release.model_dump().items()}
    if any(1 not in ks for ks in release.values()):
        raise ConfigError(
            f"{where}: shapes.release: every OP's release shapes must include 1 (the exact lane "
            "runs one block per call)"
        )
    return ReleaseConfig(
        name=parsed.release.name,
        device=parsed.release.device,
        model=ModelSpec(parsed.model.spec, parsed.model.seed),
        release_shapes=release,
        candidates=tuple(shapes.candidates),
        pad_to_fixed=shapes.pad_to_fixed,
        voiceprint_inputs=parsed.lanes.voiceprint_inputs,
        warm_up=parsed.lanes.warm_up,
        **{
            name: getattr(parsed, name)
            for name in (
                "masks",
                "numerics",
                "tolerances",
                "corpus",
                "backend",
                "ray",
                "packer",
                "nightly",
                "history",
                "evidence",
                "localise",
                "load",
            )
        },
    )
