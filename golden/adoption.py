"""Names and journal of an adoption: a regenerated golden taking its release's name (``golden adopt``).

``golden record --regen`` writes ``goldens/NAME.regen-<time>`` beside ``goldens/NAME``; adopting it
swaps the two folders in one ``rename(2)`` (``RENAME_EXCHANGE``), so ``goldens/NAME`` is always a
whole golden, the old one or the new one, then renames the old one (now at the regen's name) to
``goldens/NAME.history-<its created time>``. A kill between the swap and that rename would leave
the *old* golden under the *regen's* name, where adopting it again would swap back: so a journal
(``goldens/.NAME.adopt.json``) is written before the swap and removed after the rename. While it
exists, the regen's name is refused by every loader (:func:`refuse_mid_adoption`) and the next
``golden adopt`` of NAME finishes it first. The orchestration (locks, checks, faults) is
:mod:`harness.pipeline.adopt`; this module holds only what a loader must know, so it stays in the
data layer.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from harness.base.errors import GoldenError
from harness.base.jsonio import read_json, seal_ok
from harness.data.schemas import AdoptionJournal, validate

_KEPT = re.compile(r"^(?P<name>.+)\.(?P<kind>regen|history)-(?P<stamp>[0-9T]+Z)(?:-[0-9a-f]{12})?$")


def adoptable(path: Path) -> tuple[str, str] | None:
    """``(NAME, kind)`` of a ``NAME.regen-<time>`` or ``NAME.history-<time>`` folder name; None otherwise."""
    m = _KEPT.match(Path(path).name)
    return (m["name"], m["kind"]) if m else None  # the pattern's named groups


def journal_path(target: Path) -> Path:
    """Where the adoption of a golden into ``target`` (``goldens/NAME``) journals itself."""
    target = Path(target)
    return target.with_name(f".{target.name}.adopt.json")


def history_name(target: Path, created: str, golden_id: str) -> Path:
    """``goldens/NAME.history-<created, compact UTC>``: where a replaced golden is kept (made unique by
    its id's digest when that name is taken: a golden adopted back from its history, then replaced)."""
    target = Path(target)
    try:
        stamp = dt.datetime.fromisoformat(created).astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    except (TypeError, ValueError):
        stamp = "00000000T000000Z"
    plain = target.with_name(f"{target.name}.history-{stamp}")
    return plain if not plain.exists() else plain.with_name(f"{plain.name}-{golden_id.rpartition('@')[2][:12]}")


def read_journal(target: Path) -> AdoptionJournal | None:
    """The journal of an unfinished adoption into ``target`` (None when there is none): valid and sealed, or
    one line refusing it (a journal edited by hand could move the regen, not the old golden, to a history
    name), naming what to check before removing it by hand."""
    path = journal_path(target)
    if not path.is_file():
        return None
    data = read_json(path, "golden adoption journal")
    fix = (
        f"nothing was moved; check {target} and the folders the journal names with `harness golden show`, "
        f"then remove {path} by hand"
    )
    if isinstance(data, dict) and "journal_sha256" not in data:
        raise GoldenError(
            f"{path}: a golden adoption journal without its seal (journal_sha256: written by an older "
            f"harness, or by hand): refusing to act on it; {fix}"
        )
    journal: AdoptionJournal = validate(AdoptionJournal, data, f"{path}: not a golden adoption journal", GoldenError)
    assert isinstance(data, dict)  # validate() refused anything else
    if not seal_ok(data, "journal_sha256"):
        raise GoldenError(
            f"{path}: edited after it was written (journal_sha256 does not match its content): "
            f"refusing to act on it; {fix}"
        )
    return journal


def refuse_mid_adoption(path: Path, golden_id: str) -> None:
    """Refuse a regen (or history) folder that an unfinished adoption into its NAME left holding the *old*
    golden (``golden_id`` is the one its manifest holds): a kill between the swap and the rename."""
    named = adoptable(path)
    if named is None:
        return
    target = Path(path).with_name(named[0])
    journal = read_journal(target)
    if journal is not None and journal.source == Path(path).name and journal.old_golden_id == golden_id:
        raise GoldenError(
            f"{path}: holds the previous golden {golden_id} of an unfinished adoption into {target} "
            f"(journal {journal_path(target)}): run `harness golden adopt {path}` again to finish it"
        )
