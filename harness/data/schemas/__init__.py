"""The schema of every file the harness reads, declared once (pydantic v2), checked whole before use.

Each file kind is one model: golden and run manifests, the score, the ledger, the
promoted-shapes manifest, localisation results, the corpus's Parquet metadata and provenance, and
the output files' metadata (the configuration's models live in :mod:`harness.data.schemas.config_file`,
the tolerance models in :mod:`harness.data.tolerances`). Unknown keys, unknown format versions, unknown states and
values of the wrong type or range are refused with one line naming the file, the key and the
value: nothing is guessed. ``python -m harness.data.schemas`` prints the tables of docs/schemas.md.

A name is imported from its module when first asked for (PEP 562): ``harness.release_config`` needs
``describe_error`` alone, and importing every model took 0.28 s of each command's start-up, before
its first network call (the audit's and the score's models alone 0.32 s of CPU).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for the type checker; at run time __getattr__ imports them
    from pydantic import BaseModel

    from harness.data.schemas.answers import HistoryAnswer, ShapesAnswer
    from harness.data.schemas.audit import AuditFile
    from harness.data.schemas.base import describe_error, validate
    from harness.data.schemas.engine_manifest import PromotedShapes
    from harness.data.schemas.files import (
        CorpusMeta,
        CorpusSummary,
        FileEntry,
        Floor,
        GeometryModel,
        GoldenManifest,
        ModelInfo,
        OutputsMeta,
        Provenance,
        Reproducibility,
        RunEvidence,
        RunLayout,
        RunManifest,
    )
    from harness.data.schemas.golden_diff import GoldenDiff
    from harness.data.schemas.history import HistoryRow, SeriesAnswer
    from harness.data.schemas.laws_file import LawsReportFile
    from harness.data.schemas.records import AdoptionJournal, Journal, Ledger, LedgerEntry, LedgerEvent, entry_key
    from harness.data.schemas.report import SignoffReport
    from harness.data.schemas.results import (
        CheckModel,
        LocalisationFile,
        OpVerdictModel,
        Reproduction,
        Score,
        ShapeScore,
    )
    from harness.data.schemas.vectors import SessionVectors, Vector, VectorIndex

_MODULE_OF = {
    "HistoryAnswer": "answers",
    "ShapesAnswer": "answers",
    "AuditFile": "audit",
    "describe_error": "base",
    "validate": "base",
    **dict.fromkeys(
        (
            "CorpusMeta",
            "CorpusSummary",
            "FileEntry",
            "Floor",
            "GeometryModel",
            "GoldenManifest",
            "ModelInfo",
            "OutputsMeta",
            "Provenance",
            "Reproducibility",
            "RunEvidence",
            "RunLayout",
            "RunManifest",
        ),
        "files",
    ),
    "GoldenDiff": "golden_diff",
    "HistoryRow": "history",
    "LawsReportFile": "laws_file",
    "SeriesAnswer": "history",
    **dict.fromkeys(("AdoptionJournal", "Journal", "Ledger", "LedgerEntry", "LedgerEvent", "entry_key"), "records"),
    "PromotedShapes": "engine_manifest",
    "SignoffReport": "report",
    **dict.fromkeys(
        ("CheckModel", "LocalisationFile", "OpVerdictModel", "Reproduction", "Score", "ShapeScore"), "results"
    ),
    "Vector": "vectors",
    "VectorIndex": "vectors",
    "SessionVectors": "vectors",
}

# every file kind the harness reads or prints, by its title in docs/schemas.md: its model's name
_FILE_KINDS = {
    "golden manifest": "GoldenManifest",
    "run manifest": "RunManifest",
    "score": "Score",
    "localisation": "LocalisationFile",
    "ledger": "Ledger",
    "promoted-shapes manifest": "PromotedShapes",
    "ledger journal": "Journal",
    "golden adoption journal": "AdoptionJournal",
    "corpus metadata": "CorpusMeta",
    "corpus provenance (each row)": "Provenance",
    "output file metadata": "OutputsMeta",
    "packing test vectors index (index.json)": "VectorIndex",
    "packing test vector": "Vector",
    "packing session vectors (sessions.json)": "SessionVectors",
    "packing laws report (`harness laws --json PATH`)": "LawsReportFile",
    "`harness shapes --json` (stdout)": "ShapesAnswer",
    "`harness ledger --json` (stdout)": "HistoryAnswer",
    "ledger history part (each row; `<ledger>.history/<seq>.parquet`)": "HistoryRow",
    "`harness history --json` (stdout)": "SeriesAnswer",
    "audit": "AuditFile",
    "sign-off report facts (report.json)": "SignoffReport",
    "`harness golden diff --json` (stdout, or --out FILE)": "GoldenDiff",
}


def __getattr__(name: str) -> Any:
    if name == "FILE_KINDS":
        kinds = {title: __getattr__(model) for title, model in _FILE_KINDS.items()}
        globals()[name] = kinds  # asked once, as every other name here
        return kinds
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF, "FILE_KINDS"])


FILE_KINDS: dict[str, type[BaseModel]]

__all__ = [
    "FILE_KINDS",
    "AuditFile",
    "SignoffReport",
    "AdoptionJournal",
    "HistoryAnswer",
    "ShapesAnswer",
    "CheckModel",
    "CorpusMeta",
    "CorpusSummary",
    "FileEntry",
    "Floor",
    "GeometryModel",
    "GoldenManifest",
    "Journal",
    "Ledger",
    "LedgerEntry",
    "LedgerEvent",
    "LocalisationFile",
    "ModelInfo",
    "OpVerdictModel",
    "OutputsMeta",
    "PromotedShapes",
    "Provenance",
    "Reproducibility",
    "Reproduction",
    "RunEvidence",
    "RunLayout",
    "RunManifest",
    "Score",
    "ShapeScore",
    "describe_error",
    "entry_key",
    "validate",
    "GoldenDiff",
    "HistoryRow",
    "LawsReportFile",
    "SeriesAnswer",
    "SessionVectors",
    "Vector",
    "VectorIndex",
]
