"""What both judges' checks share: the sample-size gate of a failure rate (:func:`rate_check`), the hint of
a changed output, a place in words, and how many worst offenders a verdict lists.

Kept apart from either judge so that neither judge's modules reach into the other's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.judging.binomial import needed_at_zero, upper_bound
from harness.judging.judges.judge_base import CheckDetails, gate

if TYPE_CHECKING:
    from harness.judging.judges.judge_base import Check

HINT_CHANGE = (
    "localise the first diverging layer (score/nightly --localise); if the change is intended, record a "
    "new golden (golden record --regen)"
)
MAX_FAILING = 20


def _at(adjective: str, where: str | None) -> str | None:
    return f"{adjective} {where}" if where else None


def rate_check(op: int, metric: str, failures: int, n: int, allowed: float, unit: str, limit: str) -> Check:
    """The sample-size gate: the 95 % upper bound of a failure rate within the allowed rate."""
    bound = upper_bound(failures, n)
    if failures == 0:
        needed = needed_at_zero(allowed)
        note = (
            f"3/n with no failure: the corpus bounds the rate only this far (needs >= {needed:,} {unit})"
            if needed
            else ""
        )
        hint = "use a larger corpus (corpus synth --blocks N, or more audio)" if bound > allowed else ""
    else:
        note, hint = f"exact binomial bound of {failures:,} in {n:,} {unit}", ""
    return gate(
        op,
        metric,
        bound,
        "<=",
        allowed,
        CheckDetails(limit=limit, unit=unit, offending=failures, total=n, note=note, hint=hint),
    )
