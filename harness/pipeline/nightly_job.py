"""A nightly's job and where it writes, settled before any work: the job as one frozen value from the command line
to the run (:class:`NightlyJob`), what it ends with (:class:`NightlyOutcome`), where its verdict goes
(:class:`NightOutputs`), its own output set, and the checks of every output location that must refuse a night
before the model is built or a block runs. The night itself (run, score, promote, localise, report) is
:mod:`harness.pipeline.nightly`'s; the commands and Ray's driver build and check these before they run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.destinations import Input, check_output_dir
from harness.base.errors import HarnessError
from harness.base.jsonio import read_json
from harness.base.outputset import current_link
from harness.corpus.shards import Shard
from harness.data.schemas.config_file import ConfigFile
from harness.ledger.ledger_history import check_history
from harness.ledger.ledger_store import beside_golden, check_paths
from harness.ledger.promotion import overrides_line
from harness.pipeline.answer import Answer
from harness.pipeline.backends import BackendChoice

if TYPE_CHECKING:
    from harness.data.schemas.results import Score
    from harness.ledger.promotion import Transition
    from harness.pipeline.distributed import RayOptions

SET = "nightly"  # the nightly's own outputs: one set (harness.base.outputset), published in one step
MEMBERS = ("score.json", "localisation.json", "report", "junit.xml", "summary.txt")


@dataclass
class NightlyOutcome:
    exit_code: int
    summary: str
    paths: dict[str, Path] = field(default_factory=dict)
    score: Score | None = None
    transitions: list[Transition] | None = None


def outcome_answer(outcome: NightlyOutcome) -> Answer:
    """What a nightly (or a merge, or the demo's nightly) answers: where its files are, the options it was
    judged under when they are not the defaults (said here, not only in the report), its one-line summary last,
    and its exit status."""
    lines = [
        f"{name}: {outcome.paths[name]}" for name in ("html", "junit", "score", "promoted") if name in outcome.paths
    ]
    if outcome.score and (line := overrides_line(outcome.score)):
        lines.append(line)
    lines.append(outcome.summary)
    return Answer(lines, outcome.exit_code)


@dataclass(frozen=True)
class NightlyJob:
    """One ``harness nightly``, as one value from the command line to the run: the validated
    configuration (which holds the backend, packer, shard, ledger and manifest paths as its keys:
    ``[backend]``, ``[packer]``, ``[nightly]``), the paths, the Ray options built from its ``[ray]``
    (None: no Ray) and the switches that are no configuration. Frozen: every hop reads the same job."""

    config: ConfigFile
    golden: Path
    out: Path
    ray: RayOptions | None = None
    localise: bool = True
    progress: bool = True
    no_promote: bool = False
    force: bool = False

    @property
    def shard(self) -> str | None:
        return self.config.nightly.shard

    @property
    def part(self) -> Shard | None:
        """The shard as parsed (None: the whole corpus)."""
        return Shard.parse(self.shard) if self.shard else None

    @property
    def ledger(self) -> Path | None:
        return None if self.config.nightly.ledger is None else Path(self.config.nightly.ledger)

    @property
    def manifest(self) -> Path | None:
        return None if self.config.nightly.manifest is None else Path(self.config.nightly.manifest)

    @property
    def backend(self) -> BackendChoice:
        return BackendChoice.of(self.config)


@dataclass(frozen=True)
class NightOutputs:
    """Where one night's verdict goes (:func:`finalize`): its own output set in ``out``, and the ledger and
    promoted-shapes manifest (resolved: beside the golden by default), which ``no_promote`` leaves untouched."""

    out: Path
    ledger: Path
    manifest: Path
    no_promote: bool = False


def refuse_previous_output(out: Path, force: bool) -> None:
    """Refuse (before any work) an ``--out`` that already holds a nightly's, a shard's or a merge's output,
    unless ``force``: replacing last night's score, report and JUnit must be asked for, not a side effect of
    reusing a folder name. With ``force`` the set is replaced as one unit (:mod:`harness.base.outputset`); an empty
    folder, or one holding only runs, is no previous output."""
    out = Path(out)
    score = out / "score.json"
    if force or not (score.is_symlink() or score.exists() or current_link(out, SET).is_symlink()):
        return
    try:
        data = read_json(score, "score file")
        # whatever the folder holds, named in the message: read as plain JSON, not refused as a score
        created = data.get("created", "unknown time") if isinstance(data, dict) else "unknown time"
    except HarnessError:
        created = "an unreadable score"
    raise HarnessError(
        f"--out {out}: already holds a nightly's output (score.json of {created}); pass --force to "
        "replace it, or choose another folder"
    )


def check_outputs(
    config: ConfigFile,
    golden_path: Path,
    out: Path,
    ledger_path: Path | None = None,
    manifest_path: Path | None = None,
    promotes: bool = True,
    inputs: Sequence[Input] = (),
    what: str = "nightly output folder",
) -> tuple[Path, Path]:
    """Every output of a nightly (a merge, a Ray nightly), checked before any work
    (:mod:`harness.base.destinations`): ``out`` (not inside a golden or run, not an input: the golden, the
    configuration, ``inputs``), and when it ``promotes`` (no shard, no ``--no-promote``) the ledger and manifest
    (writable, readable, their history folder a folder) and the ledger's history, read as this ledger's (the
    margins read it after the commit and may decide the exit status). Returns the ledger and manifest paths."""

    ledger_path, manifest_path = beside_golden(Path(golden_path), ledger_path, manifest_path)
    all_inputs = [("--golden", golden_path), ("--config", config.source), *inputs]
    check_output_dir(out, what, all_inputs)
    if promotes:
        check_paths(ledger_path, manifest_path, all_inputs)
        check_history(ledger_path)
    return ledger_path, manifest_path
