"""The sign-off report's rows about the golden and the ledger: the golden's reproduction checks, its own
reproducibility and the ledger's entries, as typed rows (report.json's ``golden_checks``, ``reproducibility``
and ``ledger``, made plain JSON by ``reports.row_view.json_of``). A module of their own so that
``reports.signoff`` stays the report's assembly and writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.data.schemas.base import OpKey
from harness.data.schemas.files import Floor, Reproducibility
from harness.data.schemas.records import LedgerEntry
from harness.data.schemas.results import Reproduction, Score
from harness.data.schemas.verdicts import CheckModel
from harness.judging.judges.judge_base import shown_figure


@dataclass(frozen=True)
class GoldenCheckOp:
    """One OP of a golden check as the pages show it: its figures (a non-finite one in words, never a
    finite-only figure that looks fine) and its failed checks."""

    bitwise: bool | None
    max_abs: float | str | None
    max_ulp: float | str | None
    min_cosine: float | str | None
    failed: list[CheckModel]


@dataclass(frozen=True)
class GoldenCheck:
    """One check that the golden is reproduced here: where it comes from (this run's exact lane, or a separate
    verification), its outcome, and per OP the figures shown."""

    source: str
    status: str
    passed: bool
    summary: str
    golden_id: str
    environment_differences: list[str]
    fingerprint_matches: bool | None
    ops: dict[OpKey, GoldenCheckOp]


def golden_checks_of(score: Score, verification: Reproduction | None) -> list[GoldenCheck]:
    """Golden reproduction from the score's own exact lane, and a separate verification if given."""
    out = []
    for source, v in (
        ("golden reproduction (this run's interleaved exact lane)", score.verification),
        ("golden verification (separate exact-lane re-run)", verification),
    ):
        if v is None:
            continue
        ops = {
            op: GoldenCheckOp(
                bitwise=o.figures.bitwise,
                max_abs=shown_figure(o.metrics, "max_abs"),
                max_ulp=shown_figure(o.metrics, "max_ulp"),
                min_cosine=shown_figure(o.metrics, "min_cosine"),
                failed=[c for c in o.checks if c.ok is False],
            )
            for op, o in sorted(v.ops.items())
        }
        out.append(
            GoldenCheck(
                source=source,
                status=v.status,
                passed=v.passed,
                summary=v.summary,
                golden_id=v.golden_id,
                environment_differences=list(v.environment_differences),
                fingerprint_matches=v.fingerprint_matches,
                ops=ops,
            )
        )
    return out


@dataclass(frozen=True)
class ReproducibilityRow:
    """The golden's own reproducibility: bitwise over its repeats, and each OP's noise floor."""

    bitwise: bool
    repeats: int
    ops: dict[OpKey, Floor]


def reproducibility_row(repro: Reproducibility) -> ReproducibilityRow:
    """The golden's own reproducibility as the pages show it."""
    return ReproducibilityRow(bitwise=repro.bitwise, repeats=repro.repeats, ops=dict(repro.ops))


@dataclass(frozen=True)
class LedgerRow:
    """One shape's ledger entry as the pages show it: its state, its last pass and its last run."""

    shape: int
    state: str
    revoked_by: str | None
    promoted_by: str | None
    promoted_at: str | None
    last_run: str
    last_at: str
    last_verdict: str
    runs: int
    last_reasons: list[str]


def ledger_rows(states: Mapping[int, LedgerEntry]) -> list[LedgerRow]:
    """The ledger's entries of this model and device, a row per shape in k order."""
    rows = []
    for k in sorted(states):
        e = states[k]
        passes = [h for h in e.history if h.verdict == "pass"]
        last = e.history[-1]  # an entry has at least one event (its schema)
        rows.append(
            LedgerRow(
                shape=k,
                state=e.state,
                revoked_by=e.revoked_by,
                promoted_by=passes[-1].run_id if passes else None,
                promoted_at=passes[-1].at if passes else None,
                last_run=last.run_id,
                last_at=last.at,
                last_verdict=last.verdict,
                runs=len(e.history),
                last_reasons=list(last.reasons),
            )
        )
    return rows
