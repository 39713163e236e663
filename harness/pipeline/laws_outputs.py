"""What ``harness laws --json PATH --junit PATH`` writes for the engine's CI: checked before the packer starts,
written together after the laws were judged.

Each file is written atomically, and neither is renamed into place before both were written
(:func:`harness.base.fsio.atomic_write_many`): a failure while writing leaves the previous files as they were.
The line saying what was written, and the exit status, are re-derived from the JSON as it lies on disk.
"""

from __future__ import annotations

import datetime as dt
import shlex
import shutil
from pathlib import Path

from harness.base.destinations import Input, check_output_file, same_file
from harness.base.errors import HarnessError, committed
from harness.base.fsio import atomic_write_many
from harness.base.jsonio import dumps, read_json
from harness.data.schemas.base import validate
from harness.data.schemas.laws_file import LawsReportFile
from harness.laws.laws_document import report_document
from harness.laws.laws_report import LawsReport
from reports.laws_junit import laws_junit


def check_laws_outputs(json_out: Path | None, junit: Path | None, packer_cmd: str | None) -> None:
    """--json and --junit refused before any work: a folder, an unwritable place, inside a golden or run, one
    of the files of the packer's command (its program, its script), or both the same file."""
    given = [(flag, path) for flag, path in (("--json", json_out), ("--junit", junit)) if path is not None]
    inputs = packer_files(packer_cmd)
    for flag, path in given:
        check_output_file(path, f"{flag} file", inputs=inputs)
    if len(given) == 2 and same_file(given[0][1], given[1][1]):
        raise HarnessError(f"{given[0][1]}: --json and --junit name the same file; give each its own path")


def packer_files(packer_cmd: str | None) -> list[Input]:
    """The files a --packer-cmd names (its program as found on PATH, the arguments that are files): inputs that
    no output may be written over."""
    if packer_cmd is None:
        return []
    try:
        words = shlex.split(packer_cmd)
    except ValueError:
        return []  # the packer's own start names the unreadable command
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():  # NAME=value: variables
        words = words[1:]
    if words:
        words[0] = shutil.which(words[0]) or words[0]
    return [("--packer-cmd", w) for w in words if Path(w).is_file()]


def write_laws_outputs(report: LawsReport, json_out: Path | None, junit: Path | None) -> tuple[str, bool]:
    """The report's JSON and JUnit files, renamed into place together; the line saying so, and whether every law
    held, re-derived from the JSON as written (the report's own, without --json)."""
    doc = report_document(report, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    files: dict[Path, bytes | str] = {}
    if json_out is not None:
        files[json_out] = dumps(doc.model_dump(mode="json")) + "\n"
    if junit is not None:
        files[junit] = laws_junit(doc)
    written = atomic_write_many(files)
    for path in written:
        committed(path, "the packing laws' JSON report" if path == json_out else "the packing laws' JUnit file")
    if json_out is not None:  # what a CI will read, read back
        doc = validate(LawsReportFile, read_json(json_out, "laws report"), str(json_out))
    names = " and ".join(str(p) for p in written)
    return f"wrote {names}: verdict {doc.verdict}, {doc.summary}", doc.verdict == "hold"
