"""What a command committed to the ledger, read back after the commit: where its last line and exit status come from.

A command that promotes (``nightly``, ``merge``, ``promote``, the demo's nightly) means to commit its score, but
what the engine obeys is what the ledger holds: the ledger can refuse what a score passed (the packing laws
judged for another packer than the fast lane's, a golden not reproduced), and a bug between the score and the
commit must not print ``PASS`` over a ledger that says ``fail``. So once the commit is done, the ledger is read
again (:func:`harness.ledger.ledger_store.read_consistent`, the reader every command uses), the events this
command wrote are found by their run and score digest (:func:`committed_by`; another command's commit after ours
moves nothing), and the command's last line and exit status are held to them (:func:`held_to_ledger`): a
shape the score passed but the ledger did not promote is a ``FAIL`` naming the ledger's own reason, exit 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import EXIT_FAIL
from harness.data.schemas.base import State
from harness.data.schemas.records import Ledger, LedgerEvent
from harness.data.schemas.results import Reproduction, reproduction_phrase
from harness.ledger.ledger_store import read_consistent
from harness.ledger.promotion import CANDIDATE, Transition

MAX_NAMED = 3  # refused shapes named in one last line; the others are counted


@dataclass(frozen=True)
class CommittedShape:
    """One shape's event of this command's commit, and the state the shape had before it."""

    shape: int
    packer: str
    before: State
    event: LedgerEvent

    @property
    def promoted(self) -> bool:
        return self.event.verdict == "pass"

    def transition(self) -> Transition:
        """The state change as :func:`harness.ledger.promotion.apply_score` reports one (for the same lines)."""
        e = self.event
        return Transition(self.shape, self.packer, self.before, e.state, e.run_id, self.promoted, list(e.reasons))


@dataclass(frozen=True)
class Committed:
    """The events one score's commit wrote to the ledger at ``ledger`` (``seq``: that commit's number; None when
    the ledger holds no event of it, as for a score of the release's own shapes only)."""

    ledger: str
    seq: int | None
    shapes: tuple[CommittedShape, ...]

    @property
    def promoted(self) -> list[int]:
        return [s.shape for s in self.shapes if s.promoted]

    @property
    def refused(self) -> list[CommittedShape]:
        return [s for s in self.shapes if not s.promoted]

    def where(self) -> str:
        return f"ledger {self.ledger}" + ("" if self.seq is None else f", commit {self.seq}")


def committed_by(ledger: Ledger, run_id: str, score_digest: str, shown: str) -> Committed:
    """The events of the score ``score_digest`` of run ``run_id`` in ``ledger`` (shown as ``shown``), by shape."""
    found: list[CommittedShape] = []
    for entry in ledger.entries.values():
        for i, event in enumerate(entry.history):
            if event.run_id == run_id and event.score_digest == score_digest:
                before = entry.history[i - 1].state if i else CANDIDATE
                found.append(CommittedShape(int(entry.shape), entry.packer_identity, before, event))
    found.sort(key=lambda s: (s.shape, s.packer))
    seqs = {s.event.seq for s in found}
    return Committed(shown, max(seqs) if seqs else None, tuple(found))


def read_committed(ledger_path: Path, manifest_path: Path | None, run_id: str, score_digest: str) -> Committed:
    """:func:`committed_by` over the ledger as it is on disk now (read, checked against its manifest)."""
    ledger, _ = read_consistent(ledger_path, manifest_path)
    return committed_by(ledger, run_id, score_digest, str(ledger_path))


def held_to_ledger(
    summary: str, code: int, committed: Committed, scored: Iterable[int], verification: Reproduction | None
) -> tuple[str, int]:
    """The last line and exit status of a command that committed a score, held to what the ledger holds.

    ``summary``/``code``: what the score alone says; ``scored``: the shapes the score judged that need a ledger
    event (the release's own shapes have none). Where the ledger agrees (every such shape has an event of this
    commit, promoted exactly when the score passed it), the score's own line stays: it names the evidence. A
    shape the score passed that the ledger did not promote (or holds no event of) turns the line into a
    ``FAIL`` naming the ledger's reason, and the status into 1. A status is never made better than the score's.
    """
    events = {s.shape: s for s in committed.shapes}
    wanted = sorted(set(int(k) for k in scored))
    missing = [k for k in wanted if k not in events]
    refused = [s for s in committed.refused if s.shape in wanted]
    if not missing and not refused:
        return summary, code
    code = EXIT_FAIL
    if not summary.startswith("PASS"):  # the score already failed them: its line names the evidence that decided
        return summary, code
    parts = [
        f"shape k={s.shape} not promoted by the {committed.where()}: "
        + (s.event.reasons[0] if s.event.reasons else "its event failed")
        for s in refused[:MAX_NAMED]
    ]
    parts += [
        f"shape k={k}: the {committed.where()} holds no event of this score" for k in missing[: MAX_NAMED - len(parts)]
    ]
    named = len(refused[:MAX_NAMED]) + len(missing[: max(MAX_NAMED - len(refused), 0)])
    if len(refused) + len(missing) > named:
        parts.append(f"... {len(refused) + len(missing) - named} more shape(s) not promoted")
    parts.append(
        f"{len(refused) + len(missing)} of {len(wanted)} shapes not promoted though the score passed them "
        f"({reproduction_phrase(verification)})"
    )
    return "FAIL: " + "; ".join(parts), code
