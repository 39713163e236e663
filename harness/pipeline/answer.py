"""What a command answers: every command the CLI offers enters the pipeline the same way, one function of
its group's command module (:mod:`harness.pipeline.commands`: ``golden``, ``corpus``, ``model``, ``lane``,
``job``, ``inspect``, ``init``, ``audit``, each named after its CLI module) given its typed inputs, and
answers with an :class:`Answer`, which the CLI prints and exits with.

Bad input and internal errors are not answers: they are raised (one line, exit 2 or 3, ``harness.cli``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

HOLDS, FAILED = 0, 1  # the exit statuses an answer carries: everything held; a verdict failed


@dataclass(frozen=True)
class Answer:
    """The lines printed (stdout, in order), the notes said first (stderr: what the lines cannot say, such
    as content left unchecked under ``--json``) and the exit status."""

    lines: Sequence[str]
    status: int = HOLDS
    notes: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.status not in (HOLDS, FAILED):
            raise ValueError(f"an answer's status is {HOLDS} or {FAILED}, not {self.status}")

    @classmethod
    def of(cls, lines: Sequence[str], held: bool = True, notes: Sequence[str] = ()) -> Answer:
        return cls(list(lines), HOLDS if held else FAILED, list(notes))
