"""A model check's answer: one line per check, and the verdict they make together."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"  # the check held
    FAIL = "FAIL"  # the check failed: a golden record or a nightly would refuse, or judge wrong, because of it
    NOTE = "note"  # what the harness will do about the model (serialise its calls), or a figure: never a failure
    SKIP = "skip"  # not judged, because a check it needs failed (so the check as a whole fails anyway)


# Every check, in the order the lines are printed; the pytest plugin makes one test of each.
DESCRIBE = "describe()"
GEOMETRY = "geometry"
ANSWER = "OP {op} answer"
ROWS = "voiceprint rows"
FINITE = "finite"
TWICE = "same answer twice"
STAGED = "stage() as infer()"
THREADS = "two threads at once"
ISOLATION = "isolation at k=2"
TIME = "time per block"
CHECKS = (
    DESCRIBE,
    GEOMETRY,
    ANSWER.format(op=0),
    ANSWER.format(op=1),
    ANSWER.format(op=2),
    ROWS,
    FINITE,
    TWICE,
    STAGED,
    THREADS,
    ISOLATION,
    TIME,
)


@dataclass(frozen=True)
class CheckLine:
    check: str  # one of CHECKS
    status: Status
    text: str

    def render(self) -> str:
        return f"{self.status.value:<4}  {self.check}: {self.text}"


@dataclass
class ModelCheckReport:
    """The lines of one ``harness model check``, in :data:`CHECKS` order."""

    spec: str
    heading: str
    lines: list[CheckLine] = field(default_factory=list)

    def add(self, check: str, status: Status, text: str) -> None:
        self.lines.append(CheckLine(check, status, text))

    @property
    def failed(self) -> list[CheckLine]:
        return [line for line in self.lines if line.status in (Status.FAIL, Status.SKIP)]

    @property
    def passed(self) -> bool:
        return not self.failed

    def line(self, check: str) -> CheckLine | None:
        return next((line for line in self.lines if line.check == check), None)

    def verdict(self) -> str:
        """The last line: what the lines make together (the time per block is a figure, not a check)."""
        checks = [line for line in self.lines if line.check != TIME]
        if self.passed:
            notes = [line.check for line in checks if line.status is Status.NOTE]
            said = f", {len(notes)} with a note ({', '.join(notes)})" if notes else ""
            held = sum(line.status is Status.OK for line in checks)
            return f"PASS: model {self.spec!r} meets the contract: {len(checks)} checks, {held} held{said}"
        failed = [line.check for line in checks if line.status is Status.FAIL]
        unjudged = [line.check for line in checks if line.status is Status.SKIP]
        return (
            f"FAIL: model {self.spec!r}: {len(failed)} of {len(checks)} checks failed ({', '.join(failed)})"
            + (f", {len(unjudged)} not judged because of them" if unjudged else "")
            + "; docs/models.md says what each part of the contract asks"
        )

    def render(self) -> list[str]:
        return [self.heading, *(line.render() for line in self.lines), self.verdict()]
