"""Schemas of the golden store's files: golden and run manifests, output and corpus metadata."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from harness.data.modes import BY_ALIAS, VOICEPRINT_INPUTS_KEY, VoiceprintInputsField
from harness.data.schemas.base import (
    KIND_SPECS,
    Count,
    GoldenId,
    KindSpec,
    NonNeg,
    Number,
    Open,
    OpKey,
    OptionalKeys,
    Positive,
    RelPath,
    SafeName,
    Sha256,
    ShapeKey,
    Strict,
    Timestamp,
)
from harness.data.schemas.localisation import ModuleFloors
from harness.data.schemas.machine import BackendRecord, EnvironmentModel, NumericsRecord
from harness.data.schemas.neighbours import ControlFigures
from harness.data.shape import EXACT, ShapeInt, lane_name


class GeometryModel(Strict):
    sample_rate: Positive = Field(description="samples per second")
    window_samples: Positive = Field(description="samples a window sees")
    frames_per_window: Positive = Field(description="segmentation frames per window")
    frame_step: Positive = Field(description="samples between segmentation frames")
    speakers: Positive = Field(description="local speakers per window")
    max_simultaneous: Positive = Field(description="speakers active at once in a powerset class")
    embedding_dim: Positive = Field(description="voiceprint width")
    windows_per_block: Positive = Field(description="windows per block (8)")


class FileEntry(Strict):
    sha256: Sha256 = Field(description="sha256 of the file's bytes")
    bytes: Count = Field(description="size in bytes")
    rows: Count | None = Field(description="Parquet rows (None for other files)")


class ModelInfo(OptionalKeys, Open):
    optional_keys: ClassVar[frozenset[str]] = frozenset({"name"})

    fingerprint: Annotated[str, Field(min_length=1)] = Field(description="changes whenever the outputs could")
    name: str = Field("?", description="human name of the model")


class CorpusSummary(Strict):
    blocks: Positive
    audio_windows: Count
    short_windows: Count
    padding_windows: Count
    span_seconds: NonNeg
    max_span_samples: Count = Field(description="longest block span (request size estimates)")
    sources: list[str]


class Floor(OptionalKeys, Strict):
    """How the exact lane differs from itself for one OP (recorded twice, interleaved)."""

    optional_keys: ClassVar[frozenset[str]] = frozenset({"min_cosine", "max_rel_l2", "argmax_flips"})  # per OP kind

    bitwise: bool
    max_abs: NonNeg
    max_ulp: Count
    min_cosine: Number | None = None
    max_rel_l2: NonNeg | None = None
    argmax_flips: Count | None = None


class Reproducibility(Strict):
    repeats: Annotated[int, Field(ge=2)]
    bitwise: bool
    ops: dict[OpKey, Floor]

    @model_validator(mode="after")
    def _op0(self) -> Reproducibility:
        if "0" not in self.ops:
            raise ValueError("ops must hold OP '0'")
        if self.bitwise != all(f.bitwise for f in self.ops.values()):
            raise ValueError("bitwise disagrees with its OPs")
        return self


def _ops_list(value: list[int]) -> list[int]:
    if not value or value[0] != 0 or len(set(value)) != len(value) or value != sorted(value):
        raise ValueError("must list OP 0 first, each OP once, ascending")
    return value


OpsList = Annotated[list[Literal[0, 1, 2]], AfterValidator(_ops_list)]


class LawsVerdict(Strict):
    """The packing-laws verdict of the packer a run's fast lane used, judged at the start of the run
    (``harness.laws.check_packer``; copied into the score): a shape passes only when it is ``hold``."""

    packer_identity: Annotated[str, Field(min_length=1)] = Field(description="the packer's describe()['identity']")
    examples: Count = Field(description="examples per law (0: not judged: packer.laws_examples = 0)")
    seed: int = Field(description="the fixed seed the examples were drawn with")
    verdict: Literal["hold", "broken", "not-judged"] = Field(description="hold: every law held on judged examples")
    broken: list[str] = Field(description="the laws that did not hold (broken, or never judged)")
    laws: dict[str, str] = Field(description="law name -> held, broken or not judged")
    harness_version: str = Field(description="the harness (and its law kit) that judged")

    @model_validator(mode="after")
    def _consistent(self) -> LawsVerdict:
        if (self.verdict == "not-judged") != (self.examples == 0):
            raise ValueError("verdict is 'not-judged' exactly when examples is 0")
        if self.verdict == "hold" and (self.broken or any(v != "held" for v in self.laws.values()) or not self.laws):
            raise ValueError("verdict 'hold' needs every law held and none listed as broken")
        if self.verdict == "broken" and not self.broken:
            raise ValueError("verdict 'broken' names the laws that did not hold")
        return self


class GoldenManifest(OptionalKeys, Strict):
    """``<golden>/manifest.json``: what the exact lane produced and everything that produced it."""

    model_config = BY_ALIAS
    optional_keys: ClassVar[frozenset[str]] = frozenset({"module_floors"})

    kind: Literal["harness.golden"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[2] = Field(description="layout version; others are refused")
    release: SafeName
    golden_id: GoldenId = Field(description="release@ + 12 hex of the manifest's own digest (re-derived on load)")
    created: Timestamp
    geometry: GeometryModel
    model: ModelInfo
    environment: EnvironmentModel
    backend: BackendRecord
    numerics: NumericsRecord
    numerics_profile: str
    # the harness.toml tables that decide the answers, as ConfigFile.to_dict() writes them (settings that are
    # None left out); read back through ConfigFile's own sections where needed (golden_merge: masks)
    config: dict[str, Any] = Field(description="the configuration's recorded tables (release to corpus)")
    ops: OpsList
    voiceprint_inputs: VoiceprintInputsField = Field(alias="mode", description=VOICEPRINT_INPUTS_KEY)
    corpus: CorpusSummary
    reproducibility: Reproducibility
    module_floors: ModuleFloors | None = Field(
        None,
        description="per-module noise floors of a few sampled blocks (harness.localisation.module_floors; absent: "
        "recorded "
        "before they existed, or [localise] floor_blocks = 0)",
    )
    files: dict[RelPath, FileEntry]
    manifest_sha256: Sha256 = Field(description="sha256 of this manifest's canonical JSON without this key")


class VariantEntry(Strict):
    """One variant lane of a run (``lanes.running.arrangers``): what it is, so that scoring knows how to judge it."""

    k: ShapeInt = Field(description="the plain shape it re-runs")
    kind: Literal["arrangement", "duplicate", "repeat", "neighbours"] = Field(
        description="arrangement: shuffled (k4.a1 ..); duplicate: every block twice in one request (k4.d, k4.d2); "
        "repeat: the plain lane again (k4.r2 ..); neighbours: every block at its slot beside other audio (k4.n)"
    )
    index: Count = Field(description="arrangement number, copy index (duplicate: 0, 1) or repeat number")


class RunEvidence(Strict):
    """``evidence`` of a run manifest (``--arrangements``, ``--repeats``; absent: 1 and 1, today's run)."""

    arrangements: Positive = Field(description="arrangements per shape, the plain one included")
    repeats: Positive = Field(description="runs of every packed lane")
    seed: Count = Field(description="the arrangements' seed")
    variants: dict[str, VariantEntry] = Field(description="every variant lane: k{k}.{tag} -> what it is")

    @model_validator(mode="after")
    def _names(self) -> RunEvidence:
        for name, entry in self.variants.items():
            if not name.startswith(f"k{entry.k}.") or name == f"k{entry.k}.":
                raise ValueError(f"variant lane {name!r} is not a lane of k={entry.k} (k{entry.k}.<tag>)")
        return self


class RunLayout(Strict):
    """What decides which lanes of a run are scored and how: the run manifest's ``shapes``, ``ops``, ``mode``
    (the voiceprint inputs) and ``evidence``, as written, or, before the run exists, as it will be written
    (the nightly's live score is built from the same). Two equal layouts score the same lanes the same way."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, **BY_ALIAS)

    shapes: list[ShapeInt]
    ops: OpsList
    voiceprint_inputs: VoiceprintInputsField = Field(alias="mode", description=VOICEPRINT_INPUTS_KEY)
    evidence: RunEvidence | None = None


class RunManifest(OptionalKeys, Strict):
    """``<run>/manifest.json``: the lanes of one run (always the exact lane, interleaved)."""

    model_config = BY_ALIAS
    # a merged run has no shard and names what it merged; a run before them has no evidence or wall
    optional_keys: ClassVar[frozenset[str]] = frozenset(
        {"evidence", "lanes_wall_s", "shard", "merged_from", "neighbour_controls", "evidence_kinds"}
    )

    kind: Literal["harness.run"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[2]
    run_id: SafeName
    created: Timestamp
    golden_id: GoldenId
    golden_manifest_sha256: Sha256
    geometry: GeometryModel
    model: ModelInfo
    environment: EnvironmentModel
    backend: BackendRecord
    numerics: NumericsRecord
    numerics_profile: str
    # the harness.toml tables that decide the answers, as ConfigFile.to_dict() writes them (settings that are
    # None left out); read back through ConfigFile's own sections where needed (golden_merge: masks)
    config: dict[str, Any] = Field(description="the configuration's recorded tables (release to corpus)")
    ops: OpsList
    voiceprint_inputs: VoiceprintInputsField = Field(alias="mode", description=VOICEPRINT_INPUTS_KEY)
    pad_to_fixed: bool
    # the Packer protocol's describe(): a free-form JSON object of the packer's own keys
    packer: dict[str, Any] = Field(
        description="the fast lane's packer's describe(): its own keys (name, identity; an external one's digest, "
        "parts and version)"
    )
    laws: LawsVerdict = Field(description="the packing-laws verdict of that packer, judged at the start of the run")
    shapes: list[ShapeInt]
    lanes: list[str]
    blocks: Positive
    blocks_sha256: Sha256 = Field(description="digest of the run's block ids, in order")
    shard: str | None = None
    merged_from: list[str] | None = None
    evidence: RunEvidence | None = Field(
        None, description="the variant lanes (--arrangements, --repeats); absent: none, as a run before them"
    )
    lanes_wall_s: NonNeg | None = Field(
        None,
        description="the lanes' wall in this process, first group's start to "
        "the last answer taken (absent: a run before it, or merged shards)",
    )
    neighbour_controls: dict[ShapeKey, dict[OpKey, ControlFigures]] | None = Field(
        None,
        description="per shape and OP, the neighbour lane's control repeats: requests whose blocks moved beside "
        "other neighbours, sent once more (absent: none sent)",
    )
    evidence_kinds: list[KindSpec] | None = Field(None, description=KIND_SPECS)
    files: dict[RelPath, FileEntry]
    manifest_sha256: Sha256

    def layout(self) -> RunLayout:
        """The fields scoring reads (:class:`RunLayout`)."""
        return RunLayout(
            shapes=list(self.shapes), ops=list(self.ops), mode=self.voiceprint_inputs, evidence=self.evidence
        )

    @model_validator(mode="after")
    def _lanes(self) -> RunManifest:
        if len(set(self.shapes)) != len(self.shapes):
            raise ValueError("shapes: a shape is listed twice")
        variants = self.evidence.variants if self.evidence is not None else {}
        stray = sorted(name for name, v in variants.items() if v.k not in self.shapes)
        if stray:
            raise ValueError(f"evidence.variants: lane {stray[0]!r} varies a shape the run does not hold")
        want = sorted([EXACT, *(lane_name(k) for k in self.shapes), *variants])
        if sorted(self.lanes) != want:
            raise ValueError(f"lanes {self.lanes} must be exactly {want} (the exact lane always runs, interleaved)")
        return self


class OutputsMeta(Strict):
    """Schema metadata ``harness.data.outputs`` of every opN.parquet."""

    format: Literal[2]
    op: Literal[0, 1, 2]
    frames: Positive
    classes: Positive
    embedding_dim: Positive
    decisions: bool


class CorpusMeta(Strict):
    """Schema metadata ``harness.corpus`` of a corpus file: the geometry it was cut for."""

    version: Literal[1]
    sample_rate: Positive
    window_samples: Positive
    windows_per_block: Positive


class Provenance(Open):
    """Per corpus row, JSON: where the block came from (free keys)."""
