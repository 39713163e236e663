"""``harness golden adopt``: a regenerated golden becomes its release's golden; the one it replaces is kept.

Why a command: ``golden record --regen`` writes ``goldens/NAME.regen-<time>`` beside ``goldens/NAME``
and nothing else reads it; the nightly keeps judging against ``goldens/NAME``. Moving folders by
hand leaves, for a moment or after a kill, no golden at NAME (a nightly then exits 2) or a half.

The steps, each kill-safe (``HARNESS_FAULT=kill:adopt:<step>`` in the tests):

1. under ``goldens/.NAME.lock`` (taken without waiting: a second adopter is refused, not queued),
   finish an earlier adoption of NAME that a kill interrupted (its journal);
2. check the regen whole (schema, seal, every file's sha256) and against the golden it replaces
   (release, geometry, OPs: a regeneration is of the same release; another model fingerprint is the model
   changed, ``golden record --regen`` after an edit of its code or weights, and is adopted);
3. write the journal ``goldens/.NAME.adopt.json`` (``journal``), then swap the two folders in one
   ``renameat2(RENAME_EXCHANGE)`` (``swapped``): NAME is the old golden before, the new one after;
4. rename the old one, now at the regen's name, to ``NAME.history-<its created time>`` (``kept``)
   and remove the journal. A kill between 3 and 4 leaves the old golden at the regen's name: every
   loader refuses it while the journal exists, and running the same adopt again finishes step 4.

The ledger is not touched: promotions earned on the old golden stay in force and in its history
until the next nightly judges every shape against the new golden (docs/nightly.md). Promotions are keyed by
the model's fingerprint, so when the regen is of another model the old model's promotions stay with it (the
engine running the old model may still use them) and the new model starts with none: its first nightly
judges it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from golden.adoption import adoptable, history_name, journal_path, read_journal
from golden.manifest import MANIFEST, check_files
from golden.store import Golden, load_golden
from harness.base.destinations import check_output_dir
from harness.base.errors import GoldenError, HarnessError, check_interrupted, committed
from harness.base.fsio import atomic_write, fault, file_mode, fsync_path, lock_path, os_failure
from harness.base.jsonio import dumps, read_json, seal
from harness.base.outputset import swap_paths as exchange
from harness.data.geometry import Geometry
from harness.data.ops import ALL_OPS
from harness.data.schemas.files import GoldenManifest
from harness.ledger.ledger_store import beside_golden

# what a regeneration shares with the golden it replaces (the model's fingerprint may change: the model changed)


@contextlib.contextmanager
def held(target: Path) -> Iterator[None]:
    """The golden store's lock on ``target`` (``.NAME.lock`` beside it), taken without waiting."""
    lock = lock_path(target)
    try:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, file_mode())
    except OSError as exc:
        raise os_failure(lock, exc, "cannot take the lock") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GoldenError(
                f"{target}: held by another writer (its lock {lock} is taken: another `harness golden "
                "adopt` of it is running); nothing moved: run this again once it has ended"
            ) from None
        yield
    finally:
        os.close(fd)


def adopt_golden(source: Path) -> list[str]:
    """Adopt ``source`` (``goldens/NAME.regen-<time>``, or a ``NAME.history-<time>`` to roll back) as
    ``goldens/NAME``; returns the lines saying what moved where."""
    source = Path(source)
    named = adoptable(source)
    if named is None:
        raise GoldenError(
            f"{source}: not a regenerated golden: adopt takes a NAME.regen-<time> folder (as `harness "
            "golden record --regen` writes it beside goldens/NAME) or a NAME.history-<time> one (to "
            "roll back)"
        )
    target = source.with_name(named[0])
    check_output_dir(source.parent, "golden folder")
    with held(target):
        lines = finish_adoption(target)
        if lines and not source.exists():  # this very adoption, interrupted after its swap: now finished
            return lines
        new = load_golden(source)
        check_files(new.path, new.manifest.files, hashed=list(new.manifest.files))  # whole, before it is the golden
        old = replaced(target, new)
        return lines + (swap(source, target, new, old) if old is not None else first(source, target, new))


def check_regeneration(target: Path, geometry: Geometry) -> None:
    """Before ``golden record --regen`` records anything: refuse at once (one line, nothing written) a recording
    that ``golden adopt`` would then refuse, with the command that works. Another model fingerprint is no reason:
    a changed model is adopted (:func:`said`)."""
    if not (target / MANIFEST).is_file():
        return  # nothing to regenerate: the recording is the release's first golden
    old = load_golden(target)
    differs = [
        (what, mine, theirs)
        for what, mine, theirs in (
            ("geometry", geometry.to_dict(), old.geometry.to_dict()),
            ("OPs", [int(op) for op in ALL_OPS], [int(op) for op in old.ops]),
        )
        if mine != theirs
    ]
    if differs:
        what, mine, theirs = differs[0]
        raise GoldenError(
            f"{target}: --regen records a golden that replaces this one, but this model's {what} differs "
            f"({_show(mine)} vs {_show(theirs)} in {target}), so `harness golden adopt` would refuse it; nothing was "
            "written: record it as another release (harness golden record --release NAME, with this command's "
            "other options)"
        )


def replaced(target: Path, new: Golden) -> Golden | None:
    """The golden at ``target`` (None: there is none), refused when ``new`` is not a regeneration of it."""
    if new.release != target.name:
        raise GoldenError(
            f"{new.path}: records release {new.release!r}, not {target.name!r}: it is no regeneration of {target}"
        )
    if not (target.exists() or target.is_symlink()):
        return None
    try:
        old = load_golden(target)
    except HarnessError as exc:
        raise GoldenError(
            f"{target}: the golden {new.path} would replace does not load, so it cannot be compared "
            f"({exc}); nothing moved"
        ) from None
    for (what, a), (_, b) in zip(_same(old.manifest), _same(new.manifest), strict=True):
        if a != b:
            raise GoldenError(
                f"{new.path}: not a regeneration of {target}: its {what} differs ({_show(b)} vs "
                f"{_show(a)} in {target}); nothing moved: a golden of another geometry is another release "
                "(harness golden record --release NAME)"
            )
    return old


def swap(source: Path, target: Path, new: Golden, old: Golden) -> list[str]:
    """Steps 3 and 4: journal, one-step swap, old golden renamed to its history name, journal removed."""
    history = history_name(target, old.manifest.created, old.golden_id)
    journal = journal_path(target)
    atomic_write(
        journal,
        dumps(
            seal(
                {
                    "source": source.name,
                    "history": history.name,
                    "old_golden_id": old.golden_id,
                    "new_golden_id": new.golden_id,
                },
                "journal_sha256",
            )
        )
        + "\n",
    )
    fault("adopt:journal")
    try:
        check_interrupted()  # a signal before the swap: nothing moves
        if not exchange(source, target):
            raise GoldenError(
                f"{target}: this file system cannot swap two folders in one step (renameat2 "
                "RENAME_EXCHANGE), so adopting could leave no golden at its name; nothing moved"
            )
    except BaseException:
        journal.unlink(missing_ok=True)
        raise
    fsync_path(target.parent)
    committed(
        target,
        f"the adopted golden {new.golden_id}",
        f"the next `harness golden adopt {source}` keeps the previous golden as {history}",
    )
    fault("adopt:swapped")
    os.rename(source, history)
    fsync_path(target.parent)
    fault("adopt:kept")
    journal.unlink()
    fsync_path(target.parent)
    committed(target, f"the adopted golden {new.golden_id} (the previous one kept as {history})")
    return said(source, target, new, f"kept the golden it replaces, {old.golden_id}, as {history}", old, history)


def first(source: Path, target: Path, new: Golden) -> list[str]:
    """No golden at ``target``: one rename makes the regen the golden."""
    check_interrupted()
    os.rename(source, target)
    fsync_path(target.parent)
    committed(target, f"the adopted golden {new.golden_id}")
    return said(source, target, new, f"there was no golden at {target}: nothing to keep", None, None)


def said(source: Path, target: Path, new: Golden, kept: str, old: Golden | None, history: Path | None) -> list[str]:
    ledger, _ = beside_golden(target)
    lines = [f"adopted {source} as {target}: golden {new.golden_id} (recorded {new.manifest.created})", kept]
    after = f"the next nightly with --golden {target} judges every shape against {new.golden_id}"
    if old is not None and history is not None and old.fingerprint != new.fingerprint:
        lines.append(
            f"the model changed: fingerprint {old.fingerprint[:16]}... ({old.manifest.model.name}) -> "
            f"{new.fingerprint[:16]}... ({new.manifest.model.name})"
        )
        after += (
            ": the new model starts unpromoted (shapes are promoted per model fingerprint), and the old model's "
            "promotions stay with it in the ledger (an engine still running it may keep using them)"
        )
    elif old is not None and history is not None:
        after += (
            f"; promotions earned on {old.golden_id} stay in force and in the ledger's history until then "
            f"(a score of the old golden promotes only with --golden {history})"
        )
    lines.append((f"{ledger}: unchanged; " if ledger.is_file() else "") + after)
    return lines


def finish_adoption(target: Path) -> list[str]:
    """Finish (or drop) an adoption into ``target`` that a kill interrupted; the lines say what it did."""
    for stale in target.parent.glob(f".{journal_path(target).name}.tmp-*"):  # a killed adopter's (we hold the lock)
        stale.unlink(missing_ok=True)
    journal = read_journal(target)
    if journal is None:
        return []
    source, history = target.with_name(journal.source), target.with_name(journal.history)
    at_target, at_source = _golden_id(target), _golden_id(source)
    if at_target == journal.old_golden_id and at_source == journal.new_golden_id:
        journal_path(target).unlink()  # killed before the swap: nothing had moved
        return []
    if at_target != journal.new_golden_id:
        raise GoldenError(
            f"{journal_path(target)}: an interrupted adoption of {source} into {target}, but {target} "
            f"holds {at_target or 'no golden'} (journal: {journal.old_golden_id} -> "
            f"{journal.new_golden_id}); resolve it by hand (`harness golden show`), then remove the "
            "journal"
        )
    if at_source == journal.old_golden_id and not history.exists():
        os.rename(source, history)
        fsync_path(target.parent)
    journal_path(target).unlink()
    fsync_path(target.parent)
    return [
        f"finished the interrupted adoption of {source}: {target} is golden {journal.new_golden_id}; the "
        f"previous golden {journal.old_golden_id} is kept as {history}"
    ]


def _golden_id(directory: Path) -> str | None:
    """The golden id a directory's manifest names (None: no manifest); the loader checks the rest."""
    if not (directory / MANIFEST).is_file():
        return None
    data = read_json(directory / MANIFEST, "golden manifest")
    # the raw JSON, looked at only (the loader validates it): its golden id, by its key
    named = data.get("golden_id") if isinstance(data, dict) else None
    return named if isinstance(named, str) else None


def _same(manifest: GoldenManifest) -> tuple[tuple[str, object], ...]:
    """What a regeneration must keep, each as the manifest's JSON holds it (a refusal shows it)."""
    return (
        ("release", manifest.release),
        ("geometry", manifest.geometry.model_dump(mode="json")),
        ("OPs", list(manifest.ops)),
    )


def _show(value: object) -> str:
    text = dumps(value, indent=None) if not isinstance(value, str) else value
    return text if len(text) <= 120 else text[:117] + "..."
