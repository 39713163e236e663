"""The ledger read with its history: the committed ledger and the committed rows of its history parts.

Apart from :mod:`harness.ledger.history_store` (which writes and checks the parts, and which the ledger's
commit, :mod:`harness.ledger.ledger_store`, uses) because reading both needs the ledger as committed.
"""

from __future__ import annotations

from pathlib import Path

from harness.data.schemas.history import HistoryRow
from harness.data.schemas.records import Ledger
from harness.ledger.history_store import committed_rows, history_folder
from harness.ledger.ledger_store import load_ledger, read_consistent


def read_history(ledger_path: Path) -> list[HistoryRow]:
    """Every committed row of the ledger's history, validated, ordered by seq (then as written).

    The ledger is read as committed (:func:`harness.ledger.ledger_store.read_consistent`: an interrupted
    commit is finished first); parts past its seq are a killed commit's orphans and are ignored. No
    history folder: no rows (a ledger older than the history store)."""
    return ledger_and_history(ledger_path)[1]


def ledger_and_history(ledger_path: Path) -> tuple[Ledger, list[HistoryRow]]:
    """The committed ledger and its history's committed rows (:func:`read_history`), read together."""
    ledger, _ = read_consistent(Path(ledger_path))
    return ledger, committed_rows(history_folder(Path(ledger_path).resolve()), ledger, Path(ledger_path))


def check_history(ledger_path: Path) -> None:
    """Refuse, before any work, a ledger whose history cannot be read as this ledger's (a corrupt part, a part
    of another ledger): the nightly reads it after its commit for the margins, which may decide its exit
    status. A missing ledger has no history to check; the ledger is read as written (a pending journal is
    the commit's to finish)."""
    ledger_path = Path(ledger_path)
    if ledger_path.is_file():
        committed_rows(history_folder(ledger_path.resolve()), load_ledger(ledger_path), ledger_path)
