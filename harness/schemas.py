"""The schema of every file the harness reads, declared once (pydantic v2), checked whole before use.

Each file kind is one model: golden and run manifests, the score, the ledger, the
promoted-shapes manifest, localisation results, the corpus's Parquet metadata and provenance, and
the output files' metadata (the configuration's models live in :mod:`harness.config`, the
tolerance models with their judges). Unknown keys, unknown format versions, unknown states and
values of the wrong type or range are refused with one line naming the file, the key and the
value: nothing is guessed. ``python -m harness.schemas`` prints the tables of docs/schemas.md.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import sys
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import HarnessError, SchemaError
from harness.tolerances import Tolerances

# ------------------------------------------------------------------------------------- scalars


def _timestamp(value: str) -> str:
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("not an ISO 8601 time") from None
    return value


def _relative(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in value:
        raise ValueError("not a plain relative path inside the directory")
    return value


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
SafeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")]
GoldenId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}@[0-9a-f]{12}$")]
Timestamp = Annotated[str, AfterValidator(_timestamp)]
RelPath = Annotated[str, AfterValidator(_relative)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Number = Annotated[float, Field(allow_inf_nan=False)]
OpKey = Literal["0", "1", "2"]
ShapeKey = Annotated[str, Field(pattern=r"^[1-9][0-9]{0,5}$")]
Verdict = Literal["pass", "fail"]
State = Literal["candidate", "promoted", "revoked"]


class Strict(BaseModel):
    """Every key known, every type exact."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Open(BaseModel):
    """Known keys typed; other keys kept (records written by other software, e.g. a server)."""

    model_config = ConfigDict(extra="allow", strict=True)


# ------------------------------------------------------------------------------------- pieces


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


class ModelInfo(Open):
    fingerprint: Annotated[str, Field(min_length=1)] = Field(description="changes whenever the outputs could")
    name: str = Field("?", description="human name of the model")


class NumericsRecord(Strict):
    requested: dict[str, Any] | None = Field(description="the release configuration's numeric settings")
    in_force: dict[str, Any] = Field(description="what torch actually had when the model ran")


class EnvironmentModel(Open):
    device_name: str = Field(description="'cpu' or the GPU's name")


class CorpusSummary(Strict):
    blocks: Positive
    audio_windows: Count
    short_windows: Count
    padding_windows: Count
    span_seconds: NonNeg
    max_span_samples: Count = Field(description="longest block span (request size estimates)")
    sources: list[str]


class Floor(Strict):
    """How the exact lane differs from itself for one OP (recorded twice, interleaved)."""

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


# ------------------------------------------------------------------------------------- manifests


class GoldenManifest(Strict):
    """``<golden>/manifest.json``: what the exact lane produced and everything that produced it."""

    kind: Literal["harness.golden"]
    format: Literal[2] = Field(description="layout version; others are refused")
    release: SafeName
    golden_id: GoldenId = Field(description="release@ + 12 hex of the manifest's own digest (re-derived on load)")
    created: Timestamp
    geometry: GeometryModel
    model: ModelInfo
    environment: EnvironmentModel
    backend: dict[str, Any]
    numerics: NumericsRecord
    numerics_profile: str
    config: dict[str, Any]
    ops: OpsList
    mode: Literal["isolated", "chained"]
    corpus: CorpusSummary
    reproducibility: Reproducibility
    files: dict[RelPath, FileEntry]
    manifest_sha256: Sha256 = Field(description="sha256 of this manifest's canonical JSON without this key")


class RunManifest(Strict):
    """``<run>/manifest.json``: the lanes of one run (always the exact lane, interleaved)."""

    kind: Literal["harness.run"]
    format: Literal[2]
    run_id: SafeName
    created: Timestamp
    golden_id: GoldenId
    golden_manifest_sha256: Sha256
    geometry: GeometryModel
    model: ModelInfo
    environment: EnvironmentModel
    backend: dict[str, Any]
    numerics: NumericsRecord
    numerics_profile: str
    config: dict[str, Any]
    ops: OpsList
    mode: Literal["isolated", "chained"]
    pad_to_fixed: bool
    packer: dict[str, Any]
    shapes: list[Positive]
    lanes: list[str]
    blocks: Positive
    blocks_sha256: Sha256 = Field(description="digest of the run's block ids, in order")
    shard: str | None = None
    merged_from: list[str] | None = None
    files: dict[RelPath, FileEntry]
    manifest_sha256: Sha256

    @model_validator(mode="after")
    def _lanes(self) -> RunManifest:
        if len(set(self.shapes)) != len(self.shapes):
            raise ValueError("shapes: a shape is listed twice")
        want = sorted(["exact", *(f"k{k}" for k in self.shapes)])
        if sorted(self.lanes) != want:
            raise ValueError(f"lanes {self.lanes} must be exactly {want} (the exact lane always runs, interleaved)")
        return self


class OutputsMeta(Strict):
    """Schema metadata ``harness.outputs`` of every opN.parquet."""

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


# ------------------------------------------------------------------------------------- score


class CheckModel(Strict):
    op: Literal[0, 1, 2]
    metric: Annotated[str, Field(min_length=1)]
    observed: bool | int | Number | None = Field(description="None: non-finite")
    relation: Literal["<=", ">=", "==", "report"]
    allowed: bool | int | Number | None = Field(description="None: reported, not gated")
    ok: bool | None
    unit: str
    offending: Count | None
    total: Count | None
    where: str | None
    note: str
    hint: str
    limit: str = Field(description="the limits key `allowed` came from; empty: a fixed 0")

    @model_validator(mode="after")
    def _gated(self) -> CheckModel:
        if (self.relation == "report") != (self.allowed is None) or (self.relation == "report") != (self.ok is None):
            raise ValueError("a reported check has neither allowed nor ok; a gated one has both")
        return self


class OpVerdictModel(Strict):
    op: Literal[0, 1, 2]
    shape: int | str
    passed: bool
    reasons: list[str]
    checks: list[CheckModel]
    metrics: dict[str, Any]
    limits: dict[str, Any]
    failing: list[dict[str, Any]]
    distribution: list[Number | None]


class ShapeScore(Strict):
    shape: Positive
    verdict: Verdict
    reasons: list[str]
    ops: dict[OpKey, OpVerdictModel]
    vs_exact: dict[str, Any] | None = Field(None, description="this shape against the run's own exact lane")

    @model_validator(mode="after")
    def _op0(self) -> ShapeScore:
        if "0" not in self.ops:
            raise ValueError("ops must hold OP '0'")
        return self


class Reproduction(Strict):
    """The run's interleaved exact lane against the golden (or a separate verification)."""

    golden_id: GoldenId
    status: Literal["bitwise", "within-noise-floor", "failed", "drift"]
    passed: bool
    bitwise: bool
    same_setup: bool
    fingerprint_matches: bool
    golden_reproducible: bool
    environment_differences: list[str]
    ops: dict[OpKey, OpVerdictModel]
    summary: str


class RunRef(Strict):
    id: SafeName
    path: str
    manifest_sha256: Sha256
    created: Timestamp


class GoldenRef(Strict):
    id: GoldenId
    path: str
    manifest_sha256: Sha256


class Score(Strict):
    """``score.json``: every OP of every shape judged, bound to the run and golden it judged."""

    kind: Literal["harness.score"]
    format: Literal[2]
    created: Timestamp
    release: SafeName
    golden: GoldenRef
    run: RunRef
    fingerprint: Annotated[str, Field(min_length=1)]
    model: ModelInfo
    device_kind: str
    numerics_profile: str
    numerics: NumericsRecord
    environment: EnvironmentModel
    mode: Literal["isolated", "chained"]
    pad_to_fixed: bool
    packer: dict[str, Any]
    corpus: CorpusSummary
    reproducibility: Reproducibility
    tolerances: Tolerances = Field(description="the tolerances every verdict was judged with (harness.toml's)")
    shapes: dict[ShapeKey, ShapeScore]
    verification: Reproduction
    throughput: dict[str, Any]
    exact_timing_source: str
    verdict: Verdict
    digest: Sha256 = Field(description="sha256 of this file's canonical JSON without this key")


class LocalisationFile(Strict):
    """``localisation.json``: first diverging layers of failing shapes (best effort, after the verdict)."""

    kind: Literal["harness.localisation"]
    format: Literal[1]
    score_digest: Sha256
    shapes: dict[ShapeKey, dict[OpKey, dict[str, Any]]]


# ------------------------------------------------------------------------------------- ledger


class LedgerEvent(Strict):
    seq: Positive
    at: Timestamp
    run_id: SafeName
    run_created: Timestamp
    score_digest: Sha256
    golden_id: GoldenId
    verdict: Verdict
    state: State
    reasons: list[str]
    evidence: dict[str, Any]


class LedgerEntry(Strict):
    fingerprint: Annotated[str, Field(min_length=1)]
    device_kind: Annotated[str, Field(min_length=1)]
    numerics_profile: Annotated[str, Field(min_length=1)]
    numerics: dict[str, Any]
    shape: Annotated[int, Field(ge=2)]
    state: State
    revoked_by: SafeName | None = None
    history: Annotated[list[LedgerEvent], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> LedgerEntry:
        last = self.history[-1]
        if last.state != self.state:
            raise ValueError(f"state {self.state!r} is not its last event's {last.state!r}")
        if self.state == "promoted" and last.verdict != "pass":
            raise ValueError("promoted, but its last event did not pass")
        if self.state == "revoked" and self.revoked_by is None:
            raise ValueError("revoked without revoked_by")
        seqs = [e.seq for e in self.history]
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            raise ValueError("history is not in commit order")
        return self


class Ledger(Strict):
    """``ledger.json``: every shape's history per (model, device kind, numerics profile)."""

    kind: Literal["harness.ledger"]
    format: Literal[2]
    seq: Count = Field(description="commits so far; every event carries the commit it was made in")
    updated: Timestamp | None
    release: str | None
    entries: dict[str, LedgerEntry]
    ledger_sha256: Sha256

    @model_validator(mode="after")
    def _keys(self) -> Ledger:
        for key, e in self.entries.items():
            want = entry_key(e.fingerprint, e.device_kind, e.numerics_profile, e.shape)
            if key != want:
                raise ValueError(f"entry {key!r} is filed under the wrong key (expected {want!r})")
            if e.history[-1].seq > self.seq:
                raise ValueError(f"entry {key!r} has an event from commit {e.history[-1].seq}, after the ledger's "
                                 f"{self.seq}")
        return self


def entry_key(fingerprint: str, device_kind: str, profile: str, shape: int) -> str:
    return f"{fingerprint}|{device_kind}|{profile}|{shape}"


class Evidence(Strict):
    run_id: SafeName
    golden_id: GoldenId
    promoted_at: Timestamp
    corpus_blocks: Positive


class ProfileShapes(Strict):
    numerics: dict[str, Any]
    release: str | None
    ops: dict[OpKey, list[Positive]]
    evidence: dict[ShapeKey, Evidence]


class DeviceShapes(Strict):
    profiles: dict[str, ProfileShapes]


class ModelShapes(Strict):
    devices: dict[str, DeviceShapes]


class PromotedShapes(Strict):
    """``promoted-shapes.json``: what the engine may use, derived from the ledger, never edited."""

    kind: Literal["harness.promoted-shapes"]
    format: Literal[2]
    generated: Timestamp
    ledger_seq: Count
    ledger_sha256: Sha256
    models: dict[str, ModelShapes]
    manifest_sha256: Sha256


# ------------------------------------------------------------------------------------- validation


FILE_KINDS: dict[str, type[BaseModel]] = {
    "golden manifest": GoldenManifest,
    "run manifest": RunManifest,
    "score": Score,
    "localisation": LocalisationFile,
    "ledger": Ledger,
    "promoted-shapes manifest": PromotedShapes,
    "corpus metadata": CorpusMeta,
    "corpus provenance (each row)": Provenance,
    "output file metadata": OutputsMeta,
}


def validate(model: type[BaseModel], data: object, where: str, error: type[HarnessError] = SchemaError) -> Any:
    """The validated model, or one line: '<where>: <key.path>: <what> (got <value>)'."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{where}: {describe_error(exc)}") from None


def describe_error(exc: ValidationError) -> str:
    """The most specific problem, as '<key.path>: <what> (got <value>)'."""
    errors = exc.errors(include_url=False)
    deepest = max(len(e["loc"]) for e in errors)  # in a union, the branch that got furthest
    # an unknown key before a missing one: a misspelt key is both, and its spelling is what to fix
    first = min((e for e in errors if len(e["loc"]) == deepest), key=lambda e: e["type"] != "extra_forbidden")
    loc = ".".join(str(p) for p in first["loc"] if not _type_tag(p))
    msg = first["msg"]
    if first["type"] in ("model_type", "model_attributes_type", "dict_type"):
        msg = "must be a JSON object"
    elif first["type"] == "extra_forbidden":
        msg = "unknown key"
        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == first["loc"][:-1]]
        close = difflib.get_close_matches(str(first["loc"][-1]), missing, n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
    elif first["type"] == "missing":
        msg = "missing (required)"
    elif first["type"].startswith("literal_error") and first["loc"] and first["loc"][-1] in ("format", "version"):
        msg = f"unknown format version ({msg})"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    shown = repr(first.get("input"))
    if len(shown) > 80:
        shown = shown[:77] + "..."
    more = len(errors) - 1
    whole = isinstance(first.get("input"), dict) and first["type"].startswith("value_error")  # a check of a whole
    got = "" if first["type"] == "missing" or whole else f" (got {shown})"  # object: its message says what
    head = f"{loc}: " if loc else ""
    return f"{head}{msg}{got}" + (f" [+{more} more problem(s)]" if more else "")


def _type_tag(part: object) -> bool:
    """Pydantic's union branch names in an error location ('list[int]', 'PerOpShapes'): not keys."""
    return isinstance(part, str) and ("[" in part or part in _model_names())


def _model_names() -> set[str]:
    names, stack = set(), [BaseModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__name__ not in names:
                names.add(sub.__name__)
                stack.append(sub)
    return names


# ------------------------------------------------------------------------------------- docs


def markdown(models: dict[str, type[BaseModel]] | None = None) -> str:
    """The schema tables of docs/schemas.md, generated from the models above (and the configuration's,
    declared in :mod:`harness.config`)."""
    if models is None:
        from harness.config import ConfigFile  # harness.config imports this module

        models = {**FILE_KINDS, "configuration": ConfigFile}
    out = ["# File schemas", "",
           "Generated by `python -m harness.schemas` from `harness/schemas.py` (the one declaration the harness "
           "validates with); a test keeps this page in step. Every file is checked whole before use: unknown keys, "
           "unknown `format`/`version` values, unknown states and wrongly typed values are refused with one line "
           "naming the file, key and value.", ""]
    seen: set[type] = set()
    for title, model in models.items():
        out += _table(f"{title}: `{model.__name__}`", model, seen)
    return "\n".join(out).rstrip() + "\n"


def _table(title: str, model: type[BaseModel], seen: set[type]) -> list[str]:
    seen.add(model)
    doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
    extra = model.model_config.get("extra")
    lines = [f"## {title}", ""]
    if doc:
        lines += [doc, ""]
    lines += ["| key | type | required | meaning |", "|---|---|---|---|"]
    nested: list[type[BaseModel]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        required = "yes" if field.is_required() else "no"
        if not field.is_required() and isinstance(field.default, (bool, int, float, str)):
            required += f" (default `{json.dumps(field.default)}`)"
        kind = _type_name(annotation, nested, field.metadata).replace("|", "\\|")  # a pipe would end the cell
        meaning = (field.description or "").replace("|", "\\|")
        lines.append(f"| `{name}` | {kind} | {required} | {meaning} |")
    if extra == "allow":
        lines.append("| (other keys) | any | no | kept as written |")
    lines.append("")
    for sub in nested:
        if sub not in seen:
            lines += _table(f"`{sub.__name__}`", sub, seen)
    return lines


def _constraints(metadata: list) -> str:
    text = ""
    for c in metadata:
        for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "length >=")):
            if getattr(c, attr, None) is not None:
                text += f" {sym} {getattr(c, attr)}"
        if getattr(c, "pattern", None):
            text += f" matching `{c.pattern}`"
        if getattr(c, "allow_inf_nan", None) is False:
            text += ", finite"
        func = getattr(c, "func", None)
        if func is not None:
            text += f" ({func.__name__.strip('_')})"
        text += _constraints(getattr(c, "metadata", []) or [])
    return text


def _type_name(annotation: Any, nested: list, metadata: list | None = None) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    suffix = _constraints(metadata or [])
    if origin is Annotated:
        base, *meta = args
        return _type_name(base, nested) + _constraints(list(meta)) + suffix
    if origin is Literal:
        return " / ".join(f"`{a!r}`".replace("'", '"') for a in args) + suffix
    if origin is list:
        return f"list[{_type_name(args[0], nested)}]" + suffix
    if origin is dict:
        return f"map[{_type_name(args[0], nested)} -> {_type_name(args[1], nested)}]" + suffix
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a, nested) for a in args) + suffix
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        nested.append(annotation)
        return f"`{annotation.__name__}`" + suffix
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation)) + suffix


def _main() -> None:
    sys.stdout.write(markdown())


if __name__ == "__main__":
    _main()
