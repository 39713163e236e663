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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.data import limits  # the upper bound of every count a user can set
from harness.data.errors import ConfigError
from harness.data.keyhints import did_you_mean
from harness.data.masks import MaskPolicy
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas import describe_error
from harness.data.shape import ShapeInt
from harness.data.tolerances import Tolerances
from harness.data.tomlio import read_toml
from harness.numerics import NumericSettings

VOICEPRINT_INPUTS = ("isolated", "chained")  # [lanes] voiceprint_inputs: whose segmentation voiceprints use
SEED_MAX = 2**32 - 1  # numpy's RandomState takes seeds in 0..2**32-1
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
Shape = ShapeInt  # k's range lives in one place: harness.data.shape (MIN_K, MAX_K)
DEVICE_PATTERN = r"^(cpu|cuda|cuda:[0-9]{1,3})$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _distinct(shapes: list[int], what: str = "shape") -> list[int]:
    if not shapes:
        raise ValueError(f"give at least one {what}")
    if len(set(shapes)) != len(shapes):
        raise ValueError(f"a {what} is listed twice in {shapes}")
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
    warm_up: Literal["auto", "every-lane", "exact-lane"] = Field(
        default="auto", description="untimed first calls: every lane's, or the exact lane's only; auto = every lane's "
        "on a GPU or a server (autotuning, lazy start), the exact lane's on an in-process CPU (lanes.warm_up)")


class CorpusSection(_Section):
    source: Literal["synth"] = Field(default="synth", description="the corpus built when no --corpus is given")
    blocks: Annotated[int, Field(ge=1, le=limits.MAX_BLOCKS)] = Field(default=4, description="synthetic blocks")
    seed: Seed = Field(default=0, description="seed of the synthetic audio")
    step: Annotated[int, Field(ge=0, le=limits.MAX_STEP_SAMPLES)] = Field(
        default=0, description="window step in samples; 0 = a quarter window")


class BackendSection(_Section):
    """``[backend]``: what runs the requests (``--backend``, or ``--set backend.KEY=VALUE``)."""

    url: Annotated[str, Field(min_length=1)] = Field(
        default="in-process", description="'in-process' or a Triton server URL, e.g. http://127.0.0.1:8000 "
        "(--backend)")
    concurrency: Annotated[int, Field(ge=1, le=limits.MAX_CONCURRENCY)] | None = Field(
        default=None, description="Triton: requests in flight at once (default 2, as the engine); results do not "
        "depend on it")
    shm: bool = Field(default=False, description="Triton on this host: tensors through system shared memory")
    model_label: Annotated[str, Field(min_length=1)] | None = Field(
        default=None, description="Triton model without MODEL_INFO: the name of the model it serves (required there)")


class RaySection(_Section):
    """``[ray]``: fan the shards out on Ray (``--ray``, or ``--set ray.KEY=VALUE``)."""

    address: str | None = Field(
        default=None, description="'local', 'auto' or a cluster address (ray://head:10001); unset: no Ray (--ray)")
    workers: Annotated[int, Field(ge=1, le=limits.MAX_RAY_WORKERS)] | None = Field(
        default=None, description="workers to start (default: one per GPU, or per [numerics] threads CPUs)")
    shards: Annotated[int, Field(ge=1, le=limits.MAX_RAY_SHARDS)] | None = Field(
        default=None, description="shards to cut the corpus or capture in (default: 4 per worker)")
    retries: Annotated[int, Field(ge=0, le=limits.MAX_RAY_RETRIES)] = Field(
        default=3, description="restarts of a worker that died")
    accelerator: str | None = Field(default=None, description="workers only on nodes with this GPU kind (H100)")


class PackerSection(_Section):
    """``[packer]``: the fast lane's packer (``--set packer.KEY=VALUE``)."""

    spec: str | None = Field(default=None, description="'harness' (default) or a Python packer "
                             "'package.module:function'")
    cmd: str | None = Field(default=None, description="a packer process speaking the wire protocol "
                            "(docs/packer-protocol.md)")
    digest: str | None = Field(default=None, description="sha256 of the cmd packer's program (e.g. its release "
                               "binary), in its identity in place of hashing the program; the rest of the command "
                               "still counts")
    laws_examples: Annotated[int, Field(ge=0, le=limits.MAX_LAWS_EXAMPLES)] = Field(
        default=100, description="examples per packing law judged at the start of a run; 0: not judged (no shape "
        "can be promoted)")


class NightlySection(_Section):
    """``[nightly]``: where the nightly writes its ledger and manifest, which shard it runs."""

    shard: str | None = Field(default=None, description="run shard i/n of the corpus only (combine with merge)")
    ledger: str | None = Field(default=None, description="ledger path (default: ledger.json beside the golden)")
    manifest: str | None = Field(default=None, description="promoted-shapes manifest path (default: beside the "
                                 "golden)")


class HistorySection(_Section):
    """``[history]``: margins over nights in the report and the nightly's summary (``harness.ledger.margins``)."""

    nights: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=10, description="nights (ledger commits) a margin trend looks back over")
    shrink_factor: Annotated[float, Field(gt=1.0, allow_inf_nan=False)] = Field(
        default=4.0, description="warn when a check's margin (observed/allowed) grew by more than this factor "
        "over the window")
    near_limit: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        default=0.8, description="warn when a check's last margin is at least this fraction of its limit")
    fail_on_warning: bool = Field(default=False, description="a warning (margins; evidence beyond the release's "
                                  "floor, within the mode's limits) fails the nightly (exit 1) though verdicts held")


class EvidenceSection(_Section):
    """``[evidence]``: how much evidence each packed shape gets beyond today's one run of one arrangement
    (``--arrangements``, ``--repeats``). More of either multiplies the packed lanes' device time."""

    arrangements: Annotated[int, Field(ge=1, le=limits.MAX_EVIDENCE_RUNS)] = Field(
        default=3, description="arrangements per candidate shape, today's consecutive one included (other "
        "neighbours, other slots, duplicates); 1 = today's only (--arrangements)")
    repeats: Annotated[int, Field(ge=1, le=limits.MAX_EVIDENCE_RUNS)] = Field(
        default=1, description="runs of every packed lane (its plain arrangement); 1 = once, as today (--repeats)")
    seed: Seed = Field(default=0, description="seed of the arrangements' shuffles")


class LoadSection(_Section):
    """``[load]``: the nightly's concurrency sweep on a Triton backend (``--sweep-concurrency``)."""

    concurrency: list[Annotated[int, Field(ge=1, le=limits.MAX_CONCURRENCY)]] = Field(
        default_factory=list, description="concurrencies to sweep each candidate shape at, e.g. [1, 2, 4, 8]; empty: "
        "no sweep")
    p99_budget_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        default=None, description="p99 latency budget: the report names the fastest accurate (k, concurrency)")
    blocks: Annotated[int, Field(ge=1, le=limits.MAX_BLOCKS)] | None = Field(
        default=None, description="blocks sent per point; unset: all")

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: list[int]) -> list[int]:
        return _distinct(v, "concurrency") if v else v


class LocaliseSection(_Section):
    """``[localise]``: per-module error along the network: each module's packed-vs-alone error is
    normalised by its own noise floor, recorded with the golden (:mod:`harness.localisation.module_floors`)."""

    floor_multiple: Annotated[float, Field(ge=1.0, allow_inf_nan=False)] = Field(
        default=4.0, description="localisation names the first module whose error exceeds this many times its "
        "noise floor (first_exceeding)")
    floor_blocks: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=1, description="blocks sampled at golden record to measure each module's noise floor (every OP "
        "run alone twice and once under one-ulp jitter, hooked: three calls per block and OP); 0 = none")
    floor_seed: Seed = Field(default=0, description="seed of that sample")


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
    backend: BackendSection = Field(default_factory=BackendSection)
    ray: RaySection = Field(default_factory=RaySection)
    packer: PackerSection = Field(default_factory=PackerSection)
    nightly: NightlySection = Field(default_factory=NightlySection)
    history: HistorySection = Field(default_factory=HistorySection)
    evidence: EvidenceSection = Field(default_factory=EvidenceSection)
    localise: LocaliseSection = Field(default_factory=LocaliseSection)
    load: LoadSection = Field(default_factory=LoadSection)


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
    voiceprint_inputs: str = "isolated"  # one of VOICEPRINT_INPUTS; runs' and scores' file key is "mode"
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
            "shapes": {"release": {f"op{int(op)}": list(ks) for op, ks in self.release_shapes.items()},
                       "candidates": list(self.candidates), "pad_to_fixed": self.pad_to_fixed},
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
        raise ConfigError(f"--set {text!r}: expected TABLE.KEY=VALUE, e.g. backend.concurrency=4 (keys: "
                          "docs/configuration.md)")
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


def config_from_dict(data: dict[str, Any], where: str = "config", overrides: Sequence[Override] = ()
                     ) -> ReleaseConfig:
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
        raise ConfigError(f"{where}: shapes.release: every OP's release shapes must include 1 (the exact lane "
                          "runs one block per call)")
    return ReleaseConfig(
        name=parsed.release.name,
        device=parsed.release.device,
        model=ModelSpec(parsed.model.spec, parsed.model.seed),
        release_shapes=release,
        candidates=tuple(shapes.candidates),
        pad_to_fixed=shapes.pad_to_fixed,
        voiceprint_inputs=parsed.lanes.voiceprint_inputs,
        warm_up=parsed.lanes.warm_up,
        **{name: getattr(parsed, name) for name in ("masks", "numerics", "tolerances", "corpus", "backend", "ray",
                                                    "packer", "nightly", "history", "evidence", "localise", "load")},
    )
