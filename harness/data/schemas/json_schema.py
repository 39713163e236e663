"""The JSON Schema (Draft 2020-12) of every file kind, generated from the pydantic models
(``python -m harness.data.schemas --json DIR``; committed under docs/schemas/).

Tools outside the harness (the engine reading ``promoted-shapes.json`` first of all) validate
with these, in any language, without the harness; the harness itself validates with the models,
which check more than JSON Schema can say (a model validator, an ISO 8601 time, a seal digest):
each schema's description says so, and names what. The schemas are derived, never edited:
tests/test_json_schemas.py keeps the committed files equal to what this module writes.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, PlainValidator, WrapValidator

from harness.base.destinations import check_output_dir
from harness.base.fsio import atomic_write_many
from harness.data.schemas import FILE_KINDS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "urn:diar-lane-harness:schema:"
REGENERATE = "python -m harness.data.schemas --json docs/schemas"

# The file name (without .schema.json) of each kind, by model, in the order the files are listed:
# the manifest the engine reads first, then what a reviewer or a tool reads most.
STEMS = (
    ("PromotedShapes", "promoted-shapes"),
    ("Ledger", "ledger"),
    ("Score", "score"),
    ("AuditFile", "audit"),
    ("SignoffReport", "report"),
    ("GoldenManifest", "golden-manifest"),
    ("RunManifest", "run-manifest"),
    ("LocalisationFile", "localisation"),
    ("VectorIndex", "packing-vectors-index"),
    ("Vector", "packing-vector"),
    ("SessionVectors", "packing-sessions"),
    ("LawsReportFile", "laws-report"),
    ("AdoptionJournal", "adoption-journal"),
    ("Journal", "ledger-journal"),
    ("ShapesAnswer", "shapes-answer"),
    ("HistoryAnswer", "ledger-answer"),
    ("CorpusMeta", "corpus-metadata"),
    ("Provenance", "corpus-provenance"),
    ("OutputsMeta", "outputs-metadata"),
)
# What each value validator of harness/data/schemas/ checks, in words (a new one shows by its name).
VALUE_CHECKS = {
    "timestamp": "times in ISO 8601 (Python's datetime.fromisoformat)",
    "relative": "file names plain relative paths inside the directory (no '..', no '/' first)",
    "ops_list": "OP lists with OP 0 first, each OP once, ascending",
    "as_shape": "shapes as whole numbers of blocks per call (harness.data.shape)",
    "<lambda>": "other value checks (harness/data/schemas/base.py)",
}
# The key holding a sealed file's own digest (harness.base.jsonio.seal), which every reader re-derives.
SEALS = {
    "PromotedShapes": "manifest_sha256",
    "Ledger": "ledger_sha256",
    "Score": "digest",
    "GoldenManifest": "manifest_sha256",
    "RunManifest": "manifest_sha256",
    "Journal": "journal_sha256",
}


def kinds() -> list[tuple[str, str, type[BaseModel]]]:
    """(file stem, kind title, model) of every file kind in ``FILE_KINDS``, in ``STEMS`` order; a kind
    added to ``FILE_KINDS`` without a stem here still gets a schema (named after its model), last."""
    # (every kind is a model; the filter tells mypy so without retyping FILE_KINDS)
    by_model = {m.__name__: (t, m) for t, m in FILE_KINDS.items() if issubclass(m, BaseModel)}
    named = dict(STEMS)
    order = [n for n, _ in STEMS if n in by_model] + [n for n in by_model if n not in named]
    return [(named.get(n, _slug(n)), *by_model[n]) for n in order]


def _slug(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


# a JSON Schema document (pydantic's JsonSchemaValue), built byte-exactly for docs/schemas/<stem>.json
def json_schema(stem: str, title: str, model: type[BaseModel]) -> dict[str, Any]:
    """The Draft 2020-12 schema of one file kind: pydantic's, with ``$schema``, ``$id`` and a title and
    description that name the file kind and what the harness checks beyond the schema."""
    body = model.model_json_schema()
    doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
    extra = beyond_schema(model)
    description = doc
    if extra:
        description += ("\n\n" if description else "") + (
            f"The harness validates this file with the pydantic model harness.data.schemas.{model.__name__}, "
            f"which checks more than this schema can say: {extra}."
        )
    return {
        "$schema": DRAFT,
        "$id": f"{ID_BASE}{stem}",
        "title": f"{title}: {model.__name__}",
        **({"description": description} if description else {}),
        **{k: v for k, v in body.items() if k not in ("title", "description")},
    }


def beyond_schema(model: type[BaseModel]) -> str:
    """What the model checks that its JSON Schema does not say: its validators (model and value) and,
    for a sealed file, the seal digest the readers re-derive; '' when nothing."""
    models: list[type[BaseModel]] = []
    _collect(model, models)
    checks: list[str] = []
    whole = [m.__name__ for m in models if m.__pydantic_decorators__.model_validators]
    if whole:
        checks.append("the consistency of " + ", ".join(whole) + " (model validators)")
    values = sorted(
        {
            VALUE_CHECKS.get(_name(f), _name(f))
            for m in models
            for field in m.model_fields.values()
            for f in _funcs(field.metadata) + _annotation_funcs(field.annotation)
        }
        | {_name(d.func) for m in models for d in m.__pydantic_decorators__.field_validators.values()}
    )
    if values:
        checks.append(", ".join(values))
    seal = SEALS.get(model.__name__)
    if seal in model.model_fields:
        checks.append(
            f"the seal {seal} (the sha256 of the file's canonical JSON without it: sorted keys, no "
            "whitespace, non-ASCII as \\u escapes), re-derived by every reader"
        )
    return "; ".join(checks)


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", func)).strip("_")


def _annotation_funcs(annotation: Any) -> list[Any]:
    """The validator functions inside a field's type (``dict[RelPath, ...]``, ``list[Timestamp]``)."""
    out: list[Any] = []
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        out += _funcs(list(args[1:]))
        args = args[:1]
    for a in args:
        out += _annotation_funcs(a)
    return out


def _funcs(metadata: list[Any]) -> list[Any]:
    """The functions of AfterValidator-like constraints, however deeply annotated."""
    out = []
    for c in metadata:
        if isinstance(c, (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)):
            out.append(c.func)
        out += _funcs(list(getattr(c, "metadata", []) or []))
    return out


def _collect(model: type[BaseModel], seen: list[type[BaseModel]]) -> None:
    if model in seen:
        return
    seen.append(model)
    for field in model.model_fields.values():
        for sub in _models_in(field.annotation):
            _collect(sub, seen)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        args = args[:1]
    for a in args:
        out += _models_in(a)
    return out


def schema_texts() -> dict[str, str]:
    """``<stem>.schema.json`` -> its text (2-space JSON in the model's key order, one final newline)."""
    return {
        f"{stem}.schema.json": json.dumps(json_schema(stem, title, model), indent=2, ensure_ascii=False) + "\n"
        for stem, title, model in kinds()
    }


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema into ``directory``, all renamed into place together (or none); a folder that
    cannot receive files is refused first, naming it."""
    check_output_dir(Path(directory), "JSON Schema folder")
    return atomic_write_many({Path(directory) / name: text for name, text in schema_texts().items()})
