"""A score with its load sweep: each swept shape judged under load, the verdict re-derived, sealed again.

Apart from :mod:`harness.evidence.load_evidence` (the sweep's figures and refusals, a kind of evidence
like the others) because a refused shape's cause is decided among every kind's evidence
(:mod:`harness.evidence.refusal`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.base.jsonio import seal
from harness.data.schemas.load import LoadEvidence, ShapeLoad
from harness.data.schemas.results import Score, ShapeScore
from harness.evidence.load_evidence import budget_pick, load_refusals
from harness.evidence.refusal import ScoreFacts, with_cause


def with_load(
    score: Score,
    url: str,
    model_name: str,
    blocks: int,
    concurrency: Sequence[int],
    shapes: Mapping[str, ShapeLoad],
    budget_ms: float | None,
) -> Score:
    """``score`` with its ``load`` key: each swept shape refused when a point is not accurate (its reason
    first), the overall verdict re-derived, the budget pick made among the shapes that pass, and the
    score sealed again (its digest covers the sweep)."""
    probe = LoadEvidence(
        url=url,
        model_name=model_name,
        blocks=blocks,
        concurrency=list(concurrency),
        shapes=dict(shapes),
        p99_budget_ms=budget_ms,
        meets_budget=[],
        budget=None,
    )
    facts = ScoreFacts.of(score.model_copy(update={"load": probe}))  # every kind's refusals, the sweep's with them
    judged: dict[str, ShapeScore] = {}
    for key, shape in score.shapes.items():
        refusals = load_refusals(probe, key)
        if refusals:  # first, with the gates' reasons, before the OPs' own
            refused = shape.model_copy(update={"verdict": "fail", "reasons": [*refusals, *shape.reasons]})
            shape = with_cause(int(key), refused, facts)
        judged[key] = shape
    passed = [key for key, shape in judged.items() if shape.verdict == "pass"]
    meets, best = budget_pick(shapes, budget_ms, passed)
    all_pass = score.verification.passed and all(shape.verdict == "pass" for shape in judged.values())
    swept = score.model_copy(
        update={
            "shapes": judged,
            "load": probe.model_copy(update={"meets_budget": meets, "budget": best}),
            "verdict": "pass" if all_pass else "fail",
        }
    )
    body = swept.model_dump(mode="json")  # the digest is taken over the file's JSON (sorted keys)
    body.pop("digest")
    return Score.model_validate(seal(body, "digest"))
