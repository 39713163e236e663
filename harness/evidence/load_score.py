"""A score with its load sweep: each swept shape judged under load, the verdict re-derived, sealed again.

Apart from :mod:`harness.evidence.load_evidence` (the sweep's figures and refusals, a kind of evidence
like the others) because a refused shape's cause is decided among every kind's evidence
(:mod:`harness.evidence.refusal`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from harness.base.jsonio import plain, seal
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
    body: dict[str, Any] = score.model_dump(mode="json")
    body.pop("digest")
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
    for key, entry in body["shapes"].items():
        refusals = load_refusals(probe, key)
        if refusals:  # first, with the gates' reasons, before the OPs' own
            entry["verdict"] = "fail"
            entry["reasons"] = [*refusals, *entry["reasons"]]
            shape = with_cause(int(key), ShapeScore.model_validate(entry), facts)
            body["shapes"][key] = shape.model_dump(mode="json")
    passed = [key for key, entry in body["shapes"].items() if entry["verdict"] == "pass"]
    meets, best = budget_pick(shapes, budget_ms, passed)
    body["load"] = probe.model_copy(update={"meets_budget": meets, "budget": best}).model_dump(mode="json")
    all_pass = score.verification.passed and all(e["verdict"] == "pass" for e in body["shapes"].values())
    body["verdict"] = "pass" if all_pass else "fail"
    return Score.model_validate(seal(cast(dict[str, Any], plain(body)), "digest"))
