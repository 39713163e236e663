"""The two gates every packed shape passes on top of its OPs' verdicts: enough full k-block requests, and a
packer that held the packing laws.

They sit with the evidence because scoring, promotion's re-derivation (:mod:`harness.ledger.score_check`) and a
refusal's cause (:mod:`harness.evidence.refusal`) all apply them to a shape's stored evidence; judging a lane
against the golden (:mod:`harness.judging.lane_scoring`) asks them too, from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.data.schemas.files import LawsVerdict
from harness.data.schemas.results import RequestEvidence
from harness.data.shape import Shape
from harness.evidence.request_evidence import refusal


def shape_gates(
    shape: Shape, ops_passed: bool, requests: RequestEvidence | None, laws: Mapping[str, Any] | LawsVerdict | None
) -> tuple[bool, list[str]]:
    """A shape passes only if every OP does, its evidence holds enough full k-block requests
    (:mod:`harness.evidence.request_evidence`), and the packer the run used held the packing laws. The
    reasons of the gates that refuse it, first. ``None``: that gate is not applied (a lane judged
    for reproduction, not for promotion)."""
    reasons: list[str] = []
    if requests is not None:
        line = refusal(int(shape), requests)
        if line:
            reasons.append(line)
    if laws is not None:
        line = laws_refusal(laws)
        if line:
            reasons.append(line)
    return ops_passed and not reasons, reasons


@dataclass(frozen=True)
class _Laws:
    """What the laws gate reads of the packing-laws verdict."""

    verdict: str
    packer_identity: str
    broken: list[str]

    @classmethod
    def of(cls, laws: Mapping[str, Any] | LawsVerdict) -> _Laws:
        if isinstance(laws, LawsVerdict):
            return cls(laws.verdict, laws.packer_identity, list(laws.broken))
        # the run manifest's laws as its JSON object (a score's scoring takes it so): read by key
        return cls(str(laws["verdict"]), str(laws["packer_identity"]), list(laws["broken"]))


def laws_refusal(laws: Mapping[str, Any] | LawsVerdict) -> str | None:
    """The reason line when the run's packer did not hold the packing laws (None: it held them); ``laws``
    as the run manifest holds it (its JSON object), or the score's model of it."""
    read = _Laws.of(laws)
    if read.verdict == "hold":
        return None
    who = read.packer_identity
    if read.verdict == "not-judged":
        return (
            f"the packing laws were not judged for packer {who} (packer.laws_examples = 0): no shape may be "
            "promoted with a packer nobody judged; run again with --set packer.laws_examples=N (default 100)"
        )
    names = ", ".join(read.broken) or "?"
    return (
        f"packer {who} broke the packing laws ({names}): no shape may be promoted with it; see "
        "`harness laws` for the minimal counterexamples"
    )
