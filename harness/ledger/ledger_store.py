"""Committing the ledger and the promoted-shapes manifest as one transaction, and reading them back
as a pair that tells the truth.

Two nightlies at once, a crash between two writes, a read-only folder, a forged file: none may
leave the engine a manifest that allows a shape the ledger did not promote. So every update

1. takes an exclusive lock on both files (a second writer waits: no event is lost);
2. finishes any earlier commit that was interrupted (its journal), before reading;
3. reads and validates the ledger, computes the new ledger and derives the manifest from it;
4. writes a **journal** (fsynced, sealed, schema :class:`harness.data.schemas.Journal`) holding both new
   files *and the absolute, resolved paths they are for*: the commit point;
5. writes the two files, the *more restrictive* one first: when the new manifest allows fewer
   shapes (a revocation), the manifest goes first, so a crash can only be conservative;
6. removes the journal.

A crash before 4 changes nothing; after 4, the next command that opens the ledger rolls the
journal forward into exactly the files it names, whatever paths that command was given, and only
when the journal is valid and its manifest is the one derived from its ledger (else it refuses,
naming the journal and its files). Every reader (:func:`read_consistent`) re-derives the manifest
from the ledger and refuses any difference, naming the shape; it takes a shared lock, or none on a
read-only file system, where a pending journal is reported, not ignored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from harness.base.destinations import Input, check_output_file, same_file
from harness.base.errors import LedgerError, OutputError, SchemaError, clean_up, committed, uncommitted
from harness.base.fsio import fault, locked, os_failure
from harness.base.jsonio import read_json, seal, seal_ok, write_json_atomic
from harness.data.schemas import Journal, Ledger, PromotedShapes, validate
from harness.data.schemas.records import as_written
from harness.ledger.file_head import FileHead
from harness.ledger.history_store import Figures, check_bound, history_folder, part_path, remove_orphan, write_part
from harness.ledger.promoted_manifest import derive_manifest, manifest_differences, removed_shapes
from harness.ledger.promotion import FORMAT, empty_ledger

T = TypeVar("T")
LEDGER, MANIFEST = "ledger.json", "promoted-shapes.json"  # their names beside the golden, where nightly writes them


def beside_golden(golden_path: Path, ledger: Path | None = None, manifest: Path | None = None) -> tuple[Path, Path]:
    """The ledger and manifest of a golden: those given, else the ones beside it (one rule for nightly, merge,
    the Ray jobs, ``shapes``/``ledger`` and ``golden adopt``, so the plain commands meet what nightly wrote)."""
    root = Path(golden_path).parent
    return Path(ledger or root / LEDGER), Path(manifest or root / MANIFEST)


_MIGRATE = (
    "a format-2 {what} names no packer identity, so none of its promotions can be trusted for any packer: "
    "move it aside (keep it as history) and let the next `harness nightly` / `harness promote` start a "
    f"format-{FORMAT} ledger, once per packer the engine uses"
)


def journal_path(ledger_path: Path) -> Path:
    ledger_path = Path(ledger_path)
    return ledger_path.with_name(f".{ledger_path.name}.journal")


def _real(path: Path) -> Path:
    return Path(path).resolve()


def load_ledger(path: Path, must_exist: bool = False) -> Ledger:
    """The validated, unedited ledger; a missing file is an empty ledger unless ``must_exist``."""
    path = Path(path)
    if not path.exists():
        if must_exist:
            raise LedgerError(f"{path}: no such ledger (check the path; `harness promote` creates one)")
        return empty_ledger()
    data = read_json(path, "ledger")
    head = FileHead.of(data)  # looked at before it is validated (to name what it is, or to refuse it)
    if head.kind != "harness.ledger":
        raise LedgerError(f"{path}: not a harness ledger ({head.named!r}); refusing to use or overwrite it")
    if head.format == 2:
        raise LedgerError(f"{path}: {_MIGRATE.format(what='ledger')}")
    ledger: Ledger = validate(Ledger, data, str(path), LedgerError)
    assert isinstance(data, dict)  # anything else has no kind: refused above
    if not seal_ok(data, "ledger_sha256"):
        raise LedgerError(
            f"{path}: edited after it was written (ledger_sha256 does not match its content); refusing "
            "to use or overwrite it"
        )
    return ledger


def load_manifest(path: Path) -> PromotedShapes:
    """The validated, unedited promoted-shapes manifest (not yet compared with its ledger)."""
    path = Path(path)
    data = read_json(path, "promoted-shapes manifest")
    head = FileHead.of(data)  # looked at before it is validated (to refuse it in one line)
    if head.kind != "harness.promoted-shapes":
        raise LedgerError(f"{path}: not a promoted-shapes manifest")
    if head.format == 2:
        raise LedgerError(f"{path}: {_MIGRATE.format(what='promoted-shapes manifest (and its ledger)')}")
    manifest: PromotedShapes = validate(PromotedShapes, data, str(path), LedgerError)
    assert isinstance(data, dict)  # anything else has no kind: refused above
    if not seal_ok(data, "manifest_sha256"):
        raise LedgerError(f"{path}: edited after it was written (manifest_sha256 does not match its content)")
    return manifest


def check_paths(ledger_path: Path, manifest_path: Path, inputs: Iterable[Input] = ()) -> None:
    """Refuse, before any work, a ledger and manifest that are one file or cannot be written (inside a golden
    or run, over one of the command's ``inputs``: :mod:`harness.base.destinations`), a history folder beside
    the ledger that is not a folder, and a ledger that cannot be read (a nightly must not run for minutes to
    find that out). The manifest is derived from the ledger and rewritten whole, so a broken one is no reason
    to stop."""
    if same_file(ledger_path, manifest_path):
        raise LedgerError(
            f"--ledger {ledger_path} and --manifest {manifest_path} are the same file: the manifest "
            "would overwrite the ledger"
        )
    inputs = list(inputs)
    check_output_file(ledger_path, "ledger", inputs=inputs)
    check_output_file(manifest_path, "promoted-shapes manifest", inputs=inputs)
    folder = history_folder(_real(ledger_path))  # where commit writes its parts
    if folder.exists() and not folder.is_dir():
        raise LedgerError(
            f"{folder}: cannot write the ledger's history folder: it is a file, not a folder; move it "
            f"aside (the next commit of {ledger_path} writes a new history folder there)"
        )
    load_ledger(ledger_path)


@contextlib.contextmanager
def _locked_all(paths: Iterable[Path], shared: bool = False) -> Iterator[None]:
    """Locks on every path, in one global order (two processes never wait on each other)."""
    with contextlib.ExitStack() as stack:
        for path in sorted({_real(p) for p in paths}, key=str):
            stack.enter_context(locked(path, shared=shared))
        yield


def _pending_manifest(ledger_path: Path) -> Path | None:
    """The manifest a pending journal names (read without a lock, to know what to lock), if any."""
    journal = journal_path(ledger_path)
    if not journal.exists():
        return None
    with contextlib.suppress(SchemaError, OSError):
        data = read_json(journal, "ledger journal")
        named = data.get("manifest_path") if isinstance(data, dict) else None  # not yet validated: looked at only
        if isinstance(named, str) and named.startswith("/"):
            return Path(named)
    return None


def _read_journal(ledger_path: Path) -> Journal:
    """The pending journal of ``ledger_path``, only if it may be applied: schema, seals, for this
    very ledger, and its manifest the one derived from its ledger. Otherwise one line naming it."""
    journal = journal_path(ledger_path)
    fix = (
        f"nothing was applied; if no promotion is running, check {ledger_path} and its manifest and remove "
        f"{journal} by hand"
    )
    try:
        data = read_json(journal, "ledger journal")
    except SchemaError as exc:
        raise LedgerError(f"{exc}: refusing to apply it; {fix}") from None
    head = FileHead.of(data)
    if head.kind is None and "journal_sha256" in head.keys:
        raise LedgerError(f"{journal}: a journal of an older harness (it names no files): refusing to apply it; {fix}")
    pending: Journal = validate(Journal, data, f"{journal} (refusing to apply it; {fix})", LedgerError)
    assert isinstance(data, dict)  # validate() refused anything else
    problems = []
    if not seal_ok(data, "journal_sha256"):
        problems.append("journal_sha256 does not match its content (edited after it was written)")
    if not seal_ok(as_written(pending.ledger), "ledger_sha256") or not seal_ok(
        as_written(pending.manifest), "manifest_sha256"
    ):
        problems.append("the ledger or manifest it holds was edited after it was sealed")
    if pending.manifest.ledger_sha256 != pending.ledger.ledger_sha256:
        problems.append("its manifest was derived from another ledger than the one it holds")
    problems += [f"its manifest {d}" for d in manifest_differences(pending.manifest, derive_manifest(pending.ledger))]
    if problems:
        raise LedgerError(
            f"{journal}: {problems[0]}"
            + (f" [+{len(problems) - 1} more]" if len(problems) > 1 else "")
            + f"; refusing to apply it to {pending.ledger_path} and {pending.manifest_path}; {fix}"
        )
    if Path(pending.ledger_path) != _real(ledger_path):
        raise LedgerError(
            f"{journal}: is the interrupted commit of ledger {pending.ledger_path} and manifest "
            f"{pending.manifest_path}, not of {_real(ledger_path)} (moved or copied with its journal?): "
            f"refusing to apply it here; finish it where those files are, or {fix}"
        )
    return pending


def _recover_held(ledger_path: Path, held: set[Path]) -> bool:
    """Roll a pending journal forward into the files it names (the caller holds the locks in ``held``)."""
    if not journal_path(ledger_path).exists():
        return False
    pending = _read_journal(ledger_path)
    target = Path(pending.manifest_path)
    if target not in held:  # written between our look and our lock: rare; the next command finishes it
        raise LedgerError(
            f"{journal_path(ledger_path)}: an interrupted commit for manifest {target} appeared while "
            "waiting for the lock; run the command again"
        )
    _write_both(Path(pending.ledger_path), target, pending.ledger, pending.manifest, pending.manifest_first)
    journal_path(ledger_path).unlink()
    return True


def recover(ledger_path: Path) -> bool:
    """Finish a commit that was interrupted after its journal was written, into exactly the files the
    journal names (takes their locks). Returns whether there was one."""
    ledger_path = _real(ledger_path)
    pending = _pending_manifest(ledger_path)
    held = {ledger_path} | ({_real(pending)} if pending else set())
    with _locked_all(held):
        return _recover_held(ledger_path, held)


def commit(
    ledger_path: Path,
    manifest_path: Path,
    release_shapes: dict[str, list[int]],
    update: Callable[[Ledger], tuple[Ledger, T]],
    history: Callable[[int], Figures] | None = None,
) -> T:
    """Apply ``update(ledger) -> (new ledger, result)`` as one locked, journaled transaction.

    The new ledger is checked whole again from the JSON it will be written as (a model built with
    ``model_copy(update=...)`` skips validation): a ledger its own schema refuses is never written.

    ``history(seq)``: the figures of the score this commit carries, written as the history part of
    the new seq (:mod:`harness.ledger.history_store`) under the same lock, after the new ledger is checked
    and before the journal: a kill before the journal leaves an orphan part readers ignore (its seq
    is past the ledger's) and this seq's next commit replaces; without ``history`` such an orphan is
    removed, so a part of seq N is always the one commit N carried. The figures must be those of the
    new ledger's events of that seq, as every reader checks (a bug otherwise: nothing is written)."""
    check_paths(ledger_path, manifest_path)
    shown = Path(ledger_path)
    ledger_path, manifest_path = _real(ledger_path), _real(manifest_path)
    pending = _pending_manifest(ledger_path)
    held = {ledger_path, manifest_path} | ({_real(pending)} if pending else set())
    with _locked_all(held):
        _recover_held(ledger_path, held)
        old = load_ledger(ledger_path)
        try:
            new, result = update(old)
        except LedgerError as exc:  # a refused update (a replayed score, ...): name the ledger it was refused by
            raise LedgerError(f"{shown}: {exc}") from None
        written = as_written(new)
        new = validate(Ledger, written, f"{shown} (new)", LedgerError)
        if not seal_ok(written, "ledger_sha256"):  # a bug (exit 3): an update built by model_copy, not resealed
            raise RuntimeError(
                f"{shown} (new): ledger_sha256 does not match its content: the update did not reseal "
                "the ledger it built (harness.ledger.promotion.sealed_ledger); nothing was written"
            )
        manifest = derive_manifest(new, release_shapes)
        before = derive_manifest(old, release_shapes)
        if manifest_path.exists():
            with contextlib.suppress(LedgerError, SchemaError):
                before = load_manifest(manifest_path)
        manifest_first = removed_shapes(before, manifest)
        folder = history_folder(ledger_path)
        journal = seal(
            {
                "kind": "harness.ledger-journal",
                "format": 1,
                "ledger_path": str(ledger_path),
                "manifest_path": str(manifest_path),
                "manifest_first": manifest_first,
                "ledger": written,
                "manifest": as_written(manifest),
            },
            "journal_sha256",
        )
        _history_and_journal(ledger_path, folder, new, old.seq, history, shown, journal)
        committed(
            journal_path(ledger_path),
            "the journal of the ledger commit (the new ledger and manifest)",
            "the next command that opens the ledger finishes the journaled commit",
        )
        try:
            fault("promote:journal-written")
            _write_both(ledger_path, manifest_path, new, manifest, manifest_first)
            fault("promote:both-written")
            journal_path(ledger_path).unlink()
        except OSError as exc:  # the environment's (a full disk, a file system gone read-only): exit 2, in words
            raise OutputError(
                f"{os_failure(ledger_path, exc)}; the commit is journaled in {journal_path(ledger_path)}: the next "
                "command that opens the ledger finishes it once the file system takes it"
            ) from None
        uncommitted(journal_path(ledger_path))
        committed(ledger_path, f"the ledger and the promoted-shapes manifest {manifest_path}")
    return result


def _history_and_journal(
    ledger_path: Path,
    folder: Path,
    new: Ledger,
    old_seq: int,
    history: Callable[[int], Figures] | None,
    shown: Path,
    journal: dict[str, object],
) -> None:
    """The commit's history part, then its journal (the commit point). A failure before the journal is written
    (a full disk, an fsync the file system refuses) leaves the ledger's files as they were: the part this
    commit wrote is removed, and an OS error is one line naming the file, exit 2 (the environment's, not a
    bug)."""
    part: Path | None = None
    at: Path = folder
    new_folder = not folder.exists()
    try:
        if history is not None:
            figures = history(new.seq)
            try:
                check_bound(Path(f"history part {new.seq}"), new.seq, figures.rows, figures.score_digest, new, shown)
            except LedgerError as exc:  # a bug (exit 3): figures the reader would refuse are never written
                raise RuntimeError(f"{exc}; nothing was written") from None
            at = part_path(folder, new.seq)  # (written under a temporary name, then renamed)
            part = None if at.exists() else at  # an orphan of this seq is replaced, and stays an orphan
            write_part(folder, new.seq, figures.rows, figures.score_digest)
        elif new.seq != old_seq:  # (a commit that changes nothing keeps its seq and that seq's part)
            remove_orphan(folder, new.seq)
        at = journal_path(ledger_path)
        fault("promote:before-journal")
        write_json_atomic(journal_path(ledger_path), journal)
    except BaseException as exc:
        if part is not None:  # nothing of this commit stays: the ledger's files are as they were
            with clean_up(), contextlib.suppress(OSError):
                part.unlink()
                if new_folder:
                    folder.rmdir()
        if isinstance(exc, OSError):
            raise OutputError(
                f"{os_failure(at, exc)}; nothing was committed: the ledger and its history are as they were"
            ) from None
        raise


def _write_both(
    ledger_path: Path, manifest_path: Path, ledger: Ledger, manifest: PromotedShapes, manifest_first: bool
) -> None:
    writes = [(manifest_path, as_written(manifest)), (ledger_path, as_written(ledger))]
    if not manifest_first:
        writes.reverse()
    for i, (path, data) in enumerate(writes):
        write_json_atomic(path, data)
        if i == 0:
            fault("promote:first-written")


def read_consistent(ledger_path: Path, manifest_path: Path | None = None) -> tuple[Ledger, PromotedShapes | None]:
    """Ledger and manifest as committed, checked to agree: the manifest must be exactly the one
    derived from this ledger (a re-sealed manifest listing a shape the ledger never promoted is
    refused, naming the shape). Every reader calls this (``shapes``, ``report``, the nightly's report).

    An interrupted commit is finished first (under the writers' exclusive locks, into the files its
    journal names); where that cannot be done (a read-only file system) it is reported. The read
    itself takes shared locks, or none where the folder is read-only."""
    shown = Path(ledger_path)
    ledger_path = _real(ledger_path)
    if journal_path(ledger_path).exists():
        pending = _pending_manifest(ledger_path)
        try:
            recover(ledger_path)
        except OutputError as exc:
            raise LedgerError(
                f"{journal_path(ledger_path)}: an interrupted promotion of {ledger_path} and "
                f"{pending or 'its manifest'} is pending and cannot be finished here ({exc}); neither "
                "file can be trusted until it is: run `harness shapes --ledger ...` where the files "
                "are writable"
            ) from None
    with _locked_all([ledger_path] + ([Path(manifest_path)] if manifest_path is not None else []), shared=True):
        if journal_path(ledger_path).exists():
            raise LedgerError(
                f"{journal_path(ledger_path)}: an interrupted promotion is pending (a writer was killed "
                "a moment ago); run the command again to finish it"
            )
        ledger = load_ledger(shown, must_exist=True)
        manifest = None
        if manifest_path is not None and Path(manifest_path).exists():
            manifest = load_manifest(Path(manifest_path))
            if manifest.ledger_sha256 != ledger.ledger_sha256:
                raise LedgerError(
                    f"{manifest_path}: was derived from another ledger state (commit "
                    f"{manifest.ledger_seq}) than {shown} (commit {ledger.seq}); run "
                    "`harness promote` again or check that the two paths belong together"
                )
            diffs = manifest_differences(manifest, derive_manifest(ledger))
            if diffs:
                more = f" [+{len(diffs) - 1} more]" if len(diffs) > 1 else ""
                raise LedgerError(
                    f"{manifest_path}: is not the manifest derived from {shown} (commit "
                    f"{ledger.seq}): it {diffs[0]}{more}; the engine must not read it: the next "
                    "`harness promote` rewrites it from the ledger; find out who edited it"
                )
    return ledger, manifest
