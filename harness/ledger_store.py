"""Committing the ledger and the promoted-shapes manifest as one transaction.

Two nightlies at once, a crash between two writes, a read-only folder: none may leave a manifest
that allows a shape the ledger revoked. So every update

1. takes an exclusive lock on both files (a second writer waits: no event is lost);
2. finishes any earlier commit that was interrupted (its journal), before reading;
3. reads and validates the ledger, computes the new ledger and derives the manifest from it;
4. writes a **journal** holding both new files (fsynced, sealed): the commit point;
5. writes the two files, the *more restrictive* one first: when the new manifest allows fewer
   shapes (a revocation), the manifest goes first, so a crash can only be conservative;
6. removes the journal.

A crash before 4 changes nothing; after 4, the next command that opens the ledger (or ``harness
shapes``) rolls the journal forward. The output folders are checked writable before step 1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from harness.errors import LedgerError, SchemaError
from harness.fsio import check_output_file, fault, locked, same_file
from harness.jsonio import dumps, read_json, seal, seal_ok, write_json_atomic
from harness.promotion import derive_manifest, empty_ledger, removed_shapes
from harness.schemas import Ledger, PromotedShapes, validate

T = TypeVar("T")


def journal_path(ledger_path: Path) -> Path:
    ledger_path = Path(ledger_path)
    return ledger_path.with_name(f".{ledger_path.name}.journal")


def load_ledger(path: Path, must_exist: bool = False) -> dict:
    """The validated, unedited ledger; a missing file is an empty ledger unless ``must_exist``."""
    path = Path(path)
    if not path.exists():
        if must_exist:
            raise LedgerError(f"{path}: no such ledger (check the path; `harness promote` creates one)")
        return empty_ledger()
    data = read_json(path, "ledger")
    if not isinstance(data, dict) or data.get("kind") != "harness.ledger":
        kind = data.get("kind") if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise LedgerError(f"{path}: not a harness ledger ({kind!r}); refusing to use or overwrite it")
    validate(Ledger, data, str(path), LedgerError)
    if not seal_ok(data, "ledger_sha256"):
        raise LedgerError(f"{path}: edited after it was written (ledger_sha256 does not match its content); refusing "
                          "to use or overwrite it")
    return data


def load_manifest(path: Path) -> dict:
    """The validated, unedited promoted-shapes manifest."""
    path = Path(path)
    data = read_json(path, "promoted-shapes manifest")
    if not isinstance(data, dict) or data.get("kind") != "harness.promoted-shapes":
        raise LedgerError(f"{path}: not a promoted-shapes manifest")
    validate(PromotedShapes, data, str(path), LedgerError)
    if not seal_ok(data, "manifest_sha256"):
        raise LedgerError(f"{path}: edited after it was written (manifest_sha256 does not match its content)")
    return data


def check_paths(ledger_path: Path, manifest_path: Path) -> None:
    """Refuse, before any work, a ledger and manifest that are one file or cannot be written, and a
    ledger that cannot be read (a nightly must not run for minutes to find that out). The manifest
    is derived from the ledger and rewritten whole, so a broken one is no reason to stop."""
    if same_file(ledger_path, manifest_path):
        raise LedgerError(f"--ledger {ledger_path} and --manifest {manifest_path} are the same file: the manifest "
                          "would overwrite the ledger")
    check_output_file(ledger_path, "ledger")
    check_output_file(manifest_path, "promoted-shapes manifest")
    load_ledger(ledger_path)


@contextlib.contextmanager
def _both_locked(a: Path, b: Path):
    first, second = sorted([Path(a).absolute(), Path(b).absolute()], key=str)
    with locked(first), locked(second):
        yield


def recover(ledger_path: Path, manifest_path: Path) -> bool:
    """Finish a commit that was interrupted after its journal was written (call with the lock held).
    Returns whether there was one."""
    journal = journal_path(ledger_path)
    if not journal.exists():
        return False
    try:
        data = read_json(journal, "ledger journal")
        complete = isinstance(data, dict) and seal_ok(data, "journal_sha256")
    except SchemaError:
        complete = False
    if complete:
        _write_both(ledger_path, manifest_path, data["ledger"], data["manifest"], data["manifest_first"])
    journal.unlink()
    return complete


def commit(ledger_path: Path, manifest_path: Path, release_shapes: dict[str, list[int]],
           update: Callable[[dict], tuple[dict, T]]) -> T:
    """Apply ``update(ledger) -> (new ledger, result)`` as one locked, journaled transaction."""
    ledger_path, manifest_path = Path(ledger_path), Path(manifest_path)
    check_paths(ledger_path, manifest_path)
    with _both_locked(ledger_path, manifest_path):
        recover(ledger_path, manifest_path)
        old = load_ledger(ledger_path)
        try:
            new, result = update(old)
        except LedgerError as exc:  # a refused update (a replayed score, ...): name the ledger it was refused by
            raise LedgerError(f"{ledger_path}: {exc}") from None
        validate(Ledger, new, f"{ledger_path} (new)", LedgerError)
        manifest = derive_manifest(new, release_shapes)
        before = derive_manifest(old, release_shapes)
        if manifest_path.exists():
            with contextlib.suppress(LedgerError, SchemaError):
                before = load_manifest(manifest_path)
        manifest_first = removed_shapes(before, manifest)
        journal = seal({"ledger": new, "manifest": manifest, "manifest_first": manifest_first}, "journal_sha256")
        fault("promote:before-journal")
        write_json_atomic(journal_path(ledger_path), journal)
        fault("promote:journal-written")
        _write_both(ledger_path, manifest_path, new, manifest, manifest_first)
        fault("promote:both-written")
        journal_path(ledger_path).unlink()
    return result


def _write_both(ledger_path: Path, manifest_path: Path, ledger: dict, manifest: dict, manifest_first: bool) -> None:
    writes = [(manifest_path, manifest), (ledger_path, ledger)]
    if not manifest_first:
        writes.reverse()
    for i, (path, data) in enumerate(writes):
        write_json_atomic(path, data)
        if i == 0:
            fault("promote:first-written")


def read_consistent(ledger_path: Path, manifest_path: Path | None = None) -> tuple[dict, dict | None]:
    """Ledger and manifest as committed (an interrupted commit finished first), and checked to
    agree: the manifest must be the one derived from this ledger."""
    ledger_path = Path(ledger_path)
    targets = (ledger_path, Path(manifest_path) if manifest_path else ledger_path.with_name(".none"))
    with _both_locked(*targets):
        if manifest_path is not None:
            recover(ledger_path, Path(manifest_path))
        ledger = load_ledger(ledger_path, must_exist=True)
        manifest = None
        if manifest_path is not None and Path(manifest_path).exists():
            manifest = load_manifest(Path(manifest_path))
            if manifest["ledger_sha256"] != ledger["ledger_sha256"]:
                raise LedgerError(f"{manifest_path}: was derived from another ledger state (commit "
                                  f"{manifest['ledger_seq']}) than {ledger_path} (commit {ledger['seq']}); run "
                                  "`harness promote` again or check that the two paths belong together")
    return ledger, manifest


def dumps_manifest(manifest: dict) -> str:
    return dumps(manifest)
