"""The questions a user asks of a ledger: ``shapes``, ``ledger`` and ``history`` (:mod:`harness.cli.inspect_cmds`),
one function each, answering with an :class:`~harness.pipeline.answer.Answer`; the answers in lines for people
are :mod:`harness.pipeline.inspect`'s. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.errors import HarnessError
from harness.pipeline.answer import Answer

if TYPE_CHECKING:
    from harness.pipeline.inspect import LedgerFiles


@dataclass(frozen=True)
class Where:
    """Where the ledger is: given, beside a golden, or found (harness.pipeline.inspect.locate_ledger)."""

    ledger: Path | None = None
    manifest: Path | None = None
    golden: Path | None = None


@dataclass(frozen=True)
class MayQuestion:
    """``shapes --may``: may this packer use shape k for this OP on this device (and model, profile)?"""

    packer: str | None = None
    k: int | None = None
    op: int | None = None
    device: str | None = None
    fingerprint: str | None = None
    profile: str | None = None


def shapes(where: Where, may: MayQuestion | None, as_json: bool) -> Answer:
    """The promoted shapes, or the answer to one ``--may`` question (fails when the answer is no)."""
    from harness.ledger.ledger_store import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        load_manifest,
        read_consistent,
    )
    from harness.ledger.promoted_manifest import (  # deferred: imports numpy, pydantic (start-up)
        derive_manifest,
        may_use,
    )
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        describe_shapes,
        locate_ledger,
        shapes_document,
    )

    if may is not None:
        given = (("packer", may.packer), ("k", may.k), ("op", may.op), ("device", may.device))
        missing = [f"--{n}" for n, v in given if v is None]
        if missing:
            raise HarnessError(
                f"shapes --may: needs {', '.join(missing)} (the answer comes from the ledger, for "
                "one packer, shape, OP and device)"
            )
    files = locate_ledger(where.ledger, where.manifest, where.golden, "shapes")
    if files.ledger is not None:
        book, checked = read_consistent(files.ledger, files.manifest)  # refuses a manifest not the ledger's own
        if files.manifest is not None and checked is None:
            raise HarnessError(
                f"{files.manifest}: promoted-shapes manifest not found (the ledger {files.ledger} "
                "exists: `harness promote` writes it)"
            )
        shown = checked if checked is not None else derive_manifest(book)
    elif may is not None:
        raise HarnessError(
            "shapes --may: needs a ledger (--ledger, or --golden for the one beside it), not a manifest alone"
        )
    else:
        assert files.manifest is not None  # no ledger: the manifest given alone (locate_ledger)
        shown = load_manifest(files.manifest)
    answer: MayUse | None = None
    if may is not None:
        assert may.packer is not None and may.k is not None and may.op is not None and may.device is not None
        yes, why = may_use(shown, may.packer, may.k, str(may.op), may.device, may.fingerprint, may.profile)
        answer = MayUse(may.packer, may.k, str(may.op), may.device, may.fingerprint, may.profile, yes, why)
    checked_by_ledger = files.ledger is not None
    if as_json:
        may_json = asdict(answer) if answer is not None else None  # the answer's fields, in MayAnswer's order
        lines = [shapes_document(shown, files, checked=checked_by_ledger, may=may_json)]
    elif answer is not None:
        lines = [answer.why]
    else:
        lines = describe_shapes(shown, checked=checked_by_ledger)
    return Answer.of(lines, held=answer is None or answer.allowed)


@dataclass(frozen=True)
class MayUse:
    """``shapes --may``'s question for one packer, shape, OP and device, and the ledger's answer (what
    ``harness.data.schemas.answers.MayAnswer`` publishes)."""

    packer: str
    k: int
    op: str
    device: str
    fingerprint: str | None
    profile: str | None
    allowed: bool
    why: str


@dataclass(frozen=True)
class LedgerFilter:
    """Which of the ledger's entries to show (None: every one)."""

    shape: int | None = None
    model: str | None = None
    device: str | None = None
    packer: str | None = None


def _ledger_alone(where: Where, command: str) -> tuple[Path, LedgerFiles]:
    """The ledger ``command`` reads (given, beside a golden, or found), and where it was found, without its
    manifest: a history is the ledger's alone."""
    from harness.pipeline.inspect import locate_ledger  # deferred: imports numpy, pyarrow, pydantic (start-up)

    files = locate_ledger(where.ledger, None, where.golden, command)
    assert files.ledger is not None  # no --manifest asked for: a ledger, or locate_ledger refused
    return files.ledger, replace(files, manifest=None)


def ledger(where: Where, only: LedgerFilter, as_json: bool) -> Answer:
    """A shape's history per packer: every run that judged it, its verdict, and the state it left."""
    from harness.ledger.ledger_store import read_consistent  # deferred: imports numpy, pyarrow, pydantic (start-up)
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        describe_history,
        history_document,
    )

    path, files = _ledger_alone(where, "ledger")
    book, _ = read_consistent(path)  # an interrupted promotion finished first (or reported, read-only)
    if as_json:
        return Answer.of([history_document(book, files, only.shape, only.model, only.device, only.packer)])
    return Answer.of(describe_history(book, only.shape, only.model, only.device, only.packer))


@dataclass(frozen=True)
class SeriesFilter:
    """Which figures of the ledger's history: one shape and OP, and optionally one metric, device kind,
    numerics profile and packer."""

    shape: int
    op: int = 0
    metric: str | None = None
    device: str | None = None
    profile: str | None = None
    packer: str | None = None


def history(where: Where, only: SeriesFilter, as_json: bool) -> Answer:
    """The figures behind a shape's verdicts, night after night."""
    from harness.ledger.history_store import series  # deferred: imports numpy, pyarrow, pydantic (start-up)
    from harness.ledger.ledger_history import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        ledger_and_history,
    )
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        describe_series,
        series_document,
    )

    path, files = _ledger_alone(where, "history")
    book, rows = ledger_and_history(path)  # an interrupted promotion finished first
    picked = series(
        rows,
        shape=only.shape,
        op=only.op,
        metric=only.metric,
        device_kind=only.device,
        numerics_profile=only.profile,
        packer_identity=only.packer,
    )
    if as_json:
        return Answer.of([series_document(picked, book.seq, files, asdict(only))])  # the filters, as given
    return Answer.of(describe_series(picked, book.seq, only.shape, only.op))
