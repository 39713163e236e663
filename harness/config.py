"""The release configuration (``harness.toml``): what the release is and how it is judged.

Every key is known; an unknown key or a bad value is refused with the key named, because a
misspelt tolerance silently falling back to a default is exactly the kind of error a
sign-off must not contain. See ``docs/configuration.md`` for every key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.errors import ConfigError
from harness.masks import MaskPolicy
from harness.numerics import NumericSettings
from harness.ops import ALL_OPS, Op
from harness.tolerances import Tolerances, build_dataclass
from lanes.model_api import ModelSpec
from lanes.runner import MODES

SECTIONS = ("release", "model", "shapes", "lanes", "masks", "numerics", "tolerances", "corpus")


@dataclass(frozen=True)
class CorpusSpec:
    """The corpus the main job builds when none is given: synthetic, deterministic."""

    source: str = "synth"
    blocks: int = 4
    seed: int = 0
    step: int = 0  # 0: a quarter window


@dataclass(frozen=True)
class ReleaseConfig:
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
    corpus: CorpusSpec = field(default_factory=CorpusSpec)

    def to_dict(self) -> dict:
        return {
            "release": {"name": self.name, "device": self.device},
            "model": self.model.to_dict(),
            "shapes": {"release": {f"op{int(op)}": list(ks) for op, ks in self.release_shapes.items()},
                       "candidates": list(self.candidates), "pad_to_fixed": self.pad_to_fixed},
            "lanes": {"mode": self.mode},
            "masks": {"min_active_fraction": self.masks.min_active_fraction,
                      **({"min_active_frames": self.masks.min_active_frames}
                         if self.masks.min_active_frames is not None else {})},
            "numerics": self.numerics.to_dict(),
            "tolerances": _drop_none(self.tolerances.to_dict()),
            "corpus": {"source": self.corpus.source, "blocks": self.corpus.blocks, "seed": self.corpus.seed,
                       "step": self.corpus.step},
        }

    def with_overrides(self, **changes) -> ReleaseConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_config(path: str | Path | None) -> ReleaseConfig:
    """Read ``harness.toml``; ``None`` gives the embedded default."""
    if path is None:
        return ReleaseConfig()
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    return config_from_dict(data, str(path))


def config_from_dict(data: dict, where: str = "config") -> ReleaseConfig:
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{where}: unknown section [{unknown[0]}] (known: {', '.join(SECTIONS)})")
    for name, section in data.items():
        if not isinstance(section, dict):
            raise ConfigError(f"{where}: [{name}] must be a table")

    release = _table(data, "release", {"name": str, "device": str}, where)
    model = _table(data, "model", {"spec": str, "seed": int}, where)
    shapes = _table(data, "shapes", {"release": (list, dict), "candidates": list, "pad_to_fixed": bool}, where)
    lanes = _table(data, "lanes", {"mode": str}, where)
    corpus = _table(data, "corpus", {"source": str, "blocks": int, "seed": int, "step": int}, where)

    cfg = ReleaseConfig()
    if "mode" in lanes and lanes["mode"] not in MODES:
        raise ConfigError(f"{where}: lanes.mode: bad value {lanes['mode']!r} (expected one of {MODES})")
    release_shapes = cfg.release_shapes
    if "release" in shapes:
        release_shapes = _release_shapes(shapes["release"], where)
    candidates = cfg.candidates
    if "candidates" in shapes:
        candidates = _shape_list(shapes["candidates"], f"{where}: shapes.candidates")
    if corpus.get("source", "synth") != "synth":
        raise ConfigError(f"{where}: corpus.source: only 'synth' can be built from the config; "
                          "give other corpora with --corpus FILE")
    for key in ("blocks",):
        if key in corpus and corpus[key] < 1:
            raise ConfigError(f"{where}: corpus.{key}: bad value {corpus[key]!r} (must be >= 1)")
    return ReleaseConfig(
        name=release.get("name", cfg.name),
        device=release.get("device", cfg.device),
        model=ModelSpec(model.get("spec", cfg.model.spec), model.get("seed", cfg.model.seed)),
        release_shapes=release_shapes,
        candidates=candidates,
        pad_to_fixed=shapes.get("pad_to_fixed", cfg.pad_to_fixed),
        mode=lanes.get("mode", cfg.mode),
        masks=build_dataclass(MaskPolicy, data.get("masks", {}), f"{where}: masks"),
        numerics=build_dataclass(NumericSettings, data.get("numerics", {}), f"{where}: numerics"),
        tolerances=Tolerances.from_dict(data.get("tolerances", {}), f"{where}: tolerances"),
        corpus=CorpusSpec(**{**vars(cfg.corpus), **corpus}),
    )


def _table(data: dict, name: str, keys: dict[str, type | tuple], where: str) -> dict:
    section = data.get(name, {})
    for key, value in section.items():
        if key not in keys:
            raise ConfigError(f"{where}: {name}.{key}: unknown key (known: {', '.join(keys)})")
        want = keys[key]
        if isinstance(value, bool) and want is int or not isinstance(value, want):
            raise ConfigError(f"{where}: {name}.{key}: bad value {value!r}")
    return section


def _shape_list(value: object, key: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{key}: expected a non-empty list of blocks per call, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{key}: bad value {v!r} (a shape is a whole number of blocks >= 1)")
        out.append(v)
    if len(set(out)) != len(out):
        raise ConfigError(f"{key}: a shape is listed twice in {out}")
    return tuple(out)


def _release_shapes(value: object, where: str) -> dict[Op, tuple[int, ...]]:
    if isinstance(value, list):
        shapes = _shape_list(value, f"{where}: shapes.release")
        return {op: shapes for op in ALL_OPS}
    out = {}
    for key, v in value.items():
        if key not in ("op0", "op1", "op2"):
            raise ConfigError(f"{where}: shapes.release.{key}: unknown key (expected op0, op1, op2)")
        out[Op(int(key[2]))] = _shape_list(v, f"{where}: shapes.release.{key}")
    missing = [f"op{int(op)}" for op in ALL_OPS if op not in out]
    if missing:
        raise ConfigError(f"{where}: shapes.release.{missing[0]}: missing (give every OP its release shapes)")
    return out


def _drop_none(value):
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value
