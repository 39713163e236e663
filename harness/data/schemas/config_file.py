"""The release configuration (``harness.toml``) as the harness validates it and every command runs with it.

:class:`ConfigFile` is the one configuration type: the file's tables, with the command line's ``--set`` merged
in, validated once (:mod:`harness.release_config` reads the file and merges the flags). Declared in the data
layer because the configuration is a file like the others (its table is generated into the file schemas' page).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from harness.data import limits  # the upper bound of every count a user can set
from harness.data.masks import MaskPolicy
from harness.data.modes import VoiceprintInputs, VoiceprintInputsField
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas.base import KindSpec
from harness.data.shape import ShapeInt
from harness.data.shard_text import shard_refusal
from harness.data.tolerances import Tolerances

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
        default="diar_nn_g-reference", description="release name: the golden's folder name and the report's title"
    )
    device: Annotated[str, Field(pattern=DEVICE_PATTERN)] = Field(
        default="cpu", description="cpu | cuda | cuda:N (--device overrides)"
    )


class ModelSection(_Section):
    spec: Annotated[str, Field(min_length=1)] = Field(
        default="full", description="full | small | package.module:factory | path/to/model.pt"
    )
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
        default_factory=lambda: [Shape(1)], description="blocks per call the release uses, or {op0, op1, op2}"
    )
    candidates: list[Shape] = Field(default_factory=lambda: [Shape(2), Shape(4)], description="packed shapes to judge")
    pad_to_fixed: bool = Field(default=False, description="pad every pack to exactly k with empty blocks")

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list[int]) -> list[int]:
        return _distinct(v)

    @field_validator("release")
    @classmethod
    def _release(cls, v: list[int] | PerOpShapes) -> list[int] | PerOpShapes:
        per_op = [v] if isinstance(v, list) else [v.op0, v.op1, v.op2]
        if any(1 not in ks for ks in per_op):
            raise ValueError("every OP's release shapes must include 1 (the exact lane runs one block per call)")
        return _distinct(v) if isinstance(v, list) else v

    def per_op(self) -> dict[Op, tuple[int, ...]]:
        """The release's shapes of each OP (one list given: every OP's)."""
        if isinstance(self.release, list):
            return {op: tuple(self.release) for op in ALL_OPS}
        return {op: tuple(getattr(self.release, f"op{int(op)}")) for op in ALL_OPS}


class LanesSection(_Section):
    voiceprint_inputs: VoiceprintInputsField = Field(
        default=VoiceprintInputs.ISOLATED,
        description="where each lane's voiceprint WEIGHTS/IDX come from: isolated = the "
        "golden's (the voiceprint network judged alone); chained = the lane's own segmentation, as production would",
    )
    warm_up: Literal["auto", "every-lane", "exact-lane"] = Field(
        default="auto",
        description="untimed first calls: every lane's, or the exact lane's only; auto = every lane's "
        "on a GPU or a server (autotuning, lazy start), the exact lane's on an in-process CPU (lanes.running.warm_up)",
    )


class CorpusSection(_Section):
    # a Literal type: the one corpus source a configuration may name, not a key read
    source: Literal["synth"] = Field(default="synth", description="the corpus built when no --corpus is given")
    blocks: Annotated[int, Field(ge=1, le=limits.MAX_BLOCKS)] = Field(default=4, description="synthetic blocks")
    seed: Seed = Field(default=0, description="seed of the synthetic audio")
    step: Annotated[int, Field(ge=0, le=limits.MAX_STEP_SAMPLES)] = Field(
        default=0, description="window step in samples; 0 = a quarter window"
    )


class BackendSection(_Section):
    """``[backend]``: what runs the requests (``--backend``, or ``--set backend.KEY=VALUE``)."""

    url: Annotated[str, Field(min_length=1)] = Field(
        default="in-process", description="'in-process' or a Triton server URL, e.g. http://127.0.0.1:8000 (--backend)"
    )
    concurrency: Annotated[int, Field(ge=1, le=limits.MAX_CONCURRENCY)] | None = Field(
        default=None,
        description="Triton: requests in flight at once (default 2, as the engine); results do not depend on it",
    )
    shm: bool = Field(default=False, description="Triton on this host: tensors through system shared memory")
    model_label: Annotated[str, Field(min_length=1)] | None = Field(
        default=None, description="Triton model without MODEL_INFO: the name of the model it serves (required there)"
    )


class RaySection(_Section):
    """``[ray]``: fan the shards out on Ray (``--ray``, or ``--set ray.KEY=VALUE``)."""

    address: str | None = Field(
        default=None, description="'local', 'auto' or a cluster address (ray://head:10001); unset: no Ray (--ray)"
    )
    workers: Annotated[int, Field(ge=1, le=limits.MAX_RAY_WORKERS)] | None = Field(
        default=None, description="workers to start (default: one per GPU, or per [numerics] threads CPUs)"
    )
    shards: Annotated[int, Field(ge=1, le=limits.MAX_RAY_SHARDS)] | None = Field(
        default=None, description="shards to cut the corpus or capture in (default: 4 per worker)"
    )
    retries: Annotated[int, Field(ge=0, le=limits.MAX_RAY_RETRIES)] = Field(
        default=3, description="restarts of a worker that died"
    )
    accelerator: str | None = Field(default=None, description="workers only on nodes with this GPU kind (H100)")


class PackerSection(_Section):
    """``[packer]``: the fast lane's packer (``--set packer.KEY=VALUE``)."""

    spec: str | None = Field(
        default=None, description="'harness' (default) or a Python packer 'package.module:function'"
    )
    cmd: str | None = Field(
        default=None, description="a packer process speaking the wire protocol (docs/packer-protocol.md)"
    )
    digest: str | None = Field(
        default=None,
        description="sha256 of the cmd packer's program (e.g. its release "
        "binary), in its identity in place of hashing the program; the rest of the command "
        "still counts",
    )

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", v):  # as --packer-digest is checked
            raise ValueError(f"{v[:80]!r}: expected a sha256, 64 hex digits")
        return v

    laws_examples: Annotated[int, Field(ge=0, le=limits.MAX_LAWS_EXAMPLES)] = Field(
        default=100,
        description="examples per packing law judged at the start of a run; 0: not judged (no shape can be promoted)",
    )


class NightlySection(_Section):
    """``[nightly]``: where the nightly writes its ledger and manifest, which shard it runs."""

    shard: str | None = Field(default=None, description="run shard i/n of the corpus only (combine with merge)")
    ledger: str | None = Field(default=None, description="ledger path (default: ledger.json beside the golden)")
    manifest: str | None = Field(default=None, description="promoted-shapes manifest path (default: beside the golden)")

    @field_validator("shard")
    @classmethod
    def _shard(cls, v: str | None) -> str | None:
        why = None if v is None else shard_refusal(v)
        if why is not None:  # the one rule (harness.data.shard_text), wherever the value is given
            raise ValueError(why)
        return v


class HistorySection(_Section):
    """``[history]``: margins over nights in the report and the nightly's summary (``harness.ledger.margins``)."""

    nights: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=10, description="nights (ledger commits) a margin trend looks back over"
    )
    shrink_factor: Annotated[float, Field(gt=1.0, allow_inf_nan=False)] = Field(
        default=4.0,
        description="warn when a check's margin (observed/allowed) grew by more than this factor over the window",
    )
    near_limit: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        default=0.8, description="warn when a check's last margin is at least this fraction of its limit"
    )
    fail_on_warning: bool = Field(
        default=False,
        description="a warning (margins; evidence beyond the release's "
        "floor, within the mode's limits) fails the nightly (exit 1) though verdicts held",
    )


class EvidenceSection(_Section):
    """``[evidence]``: how much evidence each packed shape gets beyond today's one run of one arrangement
    (``--arrangements``, ``--repeats``). More of either multiplies the packed lanes' device time."""

    arrangements: Annotated[int, Field(ge=1, le=limits.MAX_EVIDENCE_RUNS)] = Field(
        default=3,
        description="arrangements per candidate shape, today's consecutive one included (other "
        "neighbours, other slots, duplicates); 1 = today's only (--arrangements)",
    )
    repeats: Annotated[int, Field(ge=1, le=limits.MAX_EVIDENCE_RUNS)] = Field(
        default=1, description="runs of every packed lane (its plain arrangement); 1 = once, as today (--repeats)"
    )
    seed: Seed = Field(default=0, description="seed of the arrangements' shuffles and of the neighbours' audio")
    neighbours: bool = Field(
        default=True,
        description="every block also answered at its own slot beside neighbours of other audio (lane k<k>.n, two "
        "requests per plain request): an answer that moves with them is a leak, refused at any size",
    )
    neighbour_controls: Annotated[int, Field(ge=0, le=limits.MAX_NEIGHBOUR_CONTROLS)] = Field(
        default=4,
        description="plain requests per shape and OP whose blocks moved beside other neighbours, sent once more "
        "(with their neighbour requests) to tell a leak from a backend that does not repeat itself",
    )
    canaries: bool = Field(
        default=True,
        description="every nightly plants known defects (a faint leak, a rebasing fault, two answers exchanged, a "
        "shift beyond the tolerance) through the model and backend, and fails when one is not refused",
    )
    kinds: list[KindSpec] = Field(
        default_factory=list,
        description="a team's kinds of evidence beside the harness's own, each 'package.module:Attr' (an "
        "EvidenceKind instance or class; docs/design.md): scored, refused, reported and re-derived at promotion "
        "like the built-in ones, and recorded by spec in the run manifest and score; empty: none",
    )

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        twice = sorted({s for s in v if v.count(s) > 1})
        if twice:
            raise ValueError(f"{twice[0]!r} is listed twice")
        return v


class LoadSection(_Section):
    """``[load]``: the nightly's concurrency sweep on a Triton backend (``--sweep-concurrency``)."""

    concurrency: list[Annotated[int, Field(ge=1, le=limits.MAX_CONCURRENCY)]] = Field(
        default_factory=list,
        description="concurrencies to sweep each candidate shape at, e.g. [1, 2, 4, 8]; empty: no sweep",
    )
    p99_budget_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        default=None, description="p99 latency budget: the report names the fastest accurate (k, concurrency)"
    )
    blocks: Annotated[int, Field(ge=1, le=limits.MAX_BLOCKS)] | None = Field(
        default=None, description="blocks sent per point; unset: all"
    )

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: list[int]) -> list[int]:
        return _distinct(v, "concurrency") if v else v


class LocaliseSection(_Section):
    """``[localise]``: per-module error along the network: each module's packed-vs-alone error is
    normalised by its own noise floor, recorded with the golden (:mod:`harness.localisation.module_floors`)."""

    floor_multiple: Annotated[float, Field(ge=1.0, allow_inf_nan=False)] = Field(
        default=4.0,
        description="localisation names the first module whose error exceeds this many times its "
        "noise floor (first_exceeding)",
    )
    floor_blocks: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=1,
        description="blocks sampled at golden record to measure each module's noise floor (every OP "
        "run alone twice and once under one-ulp jitter, hooked: three calls per block and OP); 0 = none",
    )
    floor_seed: Seed = Field(default=0, description="seed of that sample")


# the tables a golden or run records of its configuration (what decides the answers); the others say how a job
# runs ([lanes] warm_up included), and a run's manifest records what they changed where it matters (evidence)
RECORDED = ("release", "model", "shapes", "lanes", "masks", "numerics", "tolerances", "corpus")
# the settings code may change by name (with_overrides): a section's key, by the section it lives in
SETTING_SECTIONS = {
    "name": "release",
    "device": "release",
    "candidates": "shapes",
    "pad_to_fixed": "shapes",
    "voiceprint_inputs": "lanes",
    "warm_up": "lanes",
}


class ConfigFile(_Section):
    """``harness.toml``: every section optional; the configuration a command runs with."""

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
    _source: Path | None = PrivateAttr(default=None)  # the file read (None: embedded): an input of a command

    @property
    def source(self) -> Path | None:
        return self._source

    def read_from(self, path: Path) -> ConfigFile:
        """This configuration, as read from the file ``path`` (a command checks no output lands on it)."""
        copy = self.model_copy()
        copy._source = Path(path)
        return copy

    @property
    def release_shapes(self) -> dict[Op, tuple[int, ...]]:
        return self.shapes.per_op()

    def release_shapes_json(self) -> dict[str, list[int]]:
        return {str(int(op)): list(ks) for op, ks in self.release_shapes.items()}

    def to_dict(self) -> dict[str, dict[str, object]]:
        """What a golden or run records as its ``config`` (the :data:`RECORDED` tables; the release's shapes
        per OP; of ``[lanes]``, the voiceprint inputs), as JSON."""
        return {name: self._recorded(name) for name in RECORDED}

    def _recorded(self, name: str) -> dict[str, object]:
        """One recorded table as JSON."""
        if name == "lanes":
            return {"voiceprint_inputs": self.lanes.voiceprint_inputs.value}
        table: dict[str, object] = getattr(self, name).model_dump(mode="json", exclude_none=True)
        if name == "shapes":  # the release's shapes per OP, in the place of the table's own
            return {**table, "release": {f"op{int(op)}": list(ks) for op, ks in self.release_shapes.items()}}
        return table

    def with_overrides(self, **changes: Any) -> ConfigFile:
        """This configuration with sections (``tolerances=Tolerances(...)``), settings (``candidates=(2, 4)``,
        :data:`SETTING_SECTIONS`) or the release's shapes per OP (``release_shapes``) replaced; None leaves one as
        it is. Code's changes, already typed: a user's
        go through ``--set`` and the validator."""
        copy = self.model_copy()  # each change applied to the copy in turn: a later one sees the earlier ones
        for key, value in changes.items():
            if value is None:
                continue
            if key == "release_shapes":  # per OP, as release_shapes gives them
                per_op = PerOpShapes(**{f"op{int(op)}": list(ks) for op, ks in value.items()})
                copy = copy.model_copy(update={"shapes": copy.shapes.model_copy(update={"release": per_op})})
            elif key in SETTING_SECTIONS:  # validated with its section: a word becomes its member, a number a Shape
                name = SETTING_SECTIONS[key]
                table: BaseModel = getattr(copy, name)
                value = list(value) if key == "candidates" else value
                copy = copy.model_copy(update={name: type(table).model_validate({**dict(table), key: value})})
            elif key in type(self).model_fields:
                copy = copy.model_copy(update={key: value})
            else:
                raise TypeError(f"with_overrides: no section or setting {key!r}")
        copy._source = self._source
        return copy
