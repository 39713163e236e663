"""The schema of every file the harness reads, declared once (pydantic v2), checked whole before use.

Each file kind is one model: golden and run manifests, the score, the ledger, the
promoted-shapes manifest, localisation results, the corpus's Parquet metadata and provenance, and
the output files' metadata (the configuration's models live in :mod:`harness.config`, the
tolerance models with their judges). Unknown keys, unknown format versions, unknown states and
values of the wrong type or range are refused with one line naming the file, the key and the
value: nothing is guessed. ``python -m harness.data.schemas`` prints the tables of docs/schemas.md.
"""

from harness.data.schemas.answers import HistoryAnswer, ShapesAnswer
from harness.data.schemas.audit import AuditFile
from harness.data.schemas.base import describe_error, validate
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
    RunManifest,
)
from harness.data.schemas.golden_diff import GoldenDiff
from harness.data.schemas.history import HistoryRow, SeriesAnswer
from harness.data.schemas.records import (
    AdoptionJournal,
    Journal,
    Ledger,
    LedgerEntry,
    LedgerEvent,
    PromotedShapes,
    entry_key,
)
from harness.data.schemas.report import SignoffReport
from harness.data.schemas.results import CheckModel, LocalisationFile, OpVerdictModel, Reproduction, Score, ShapeScore
from harness.data.schemas.vectors import Vector, VectorIndex

FILE_KINDS = {
    "golden manifest": GoldenManifest,
    "run manifest": RunManifest,
    "score": Score,
    "localisation": LocalisationFile,
    "ledger": Ledger,
    "promoted-shapes manifest": PromotedShapes,
    "ledger journal": Journal,
    "golden adoption journal": AdoptionJournal,
    "corpus metadata": CorpusMeta,
    "corpus provenance (each row)": Provenance,
    "output file metadata": OutputsMeta,
    "packing test vectors index (index.json)": VectorIndex,
    "packing test vector": Vector,
    "`harness shapes --json` (stdout)": ShapesAnswer,
    "`harness ledger --json` (stdout)": HistoryAnswer,
    "ledger history part (each row; `<ledger>.history/<seq>.parquet`)": HistoryRow,
    "`harness history --json` (stdout)": SeriesAnswer,
    "audit": AuditFile,
    "sign-off report facts (report.json)": SignoffReport,
    "`harness golden diff --json` (stdout, or --out FILE)": GoldenDiff,
}

__all__ = ["FILE_KINDS", "AuditFile", "SignoffReport", "AdoptionJournal", "HistoryAnswer", "ShapesAnswer",
           "CheckModel", "CorpusMeta", "CorpusSummary", "FileEntry", "Floor", "GeometryModel",
           "GoldenManifest", "Journal", "Ledger", "LedgerEntry", "LedgerEvent", "LocalisationFile", "ModelInfo",
           "OpVerdictModel", "OutputsMeta", "PromotedShapes", "Provenance", "Reproducibility", "Reproduction",
           "RunManifest", "Score", "ShapeScore", "describe_error", "entry_key", "validate"]
