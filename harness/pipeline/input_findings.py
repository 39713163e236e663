"""A failing shape whose difference is already at the network's input: no numerics, and its cause says so.

Localisation replays a failing block packed and alone with forward hooks; when the first module that differs
is the network's input (the windows as the network receives them), the block's windows were cut otherwise
packed than alone: a packing or window-cutting bug, not a kernel's rounding. The nightly localises before it
promotes, and records those findings in the score (``shapes[k].input_differs``: per OP, the layer and block),
so the shape's cause is re-derived from them (:func:`harness.evidence.refusal.refusal_cause`: ``depends on slot
/ neighbours / duplicates`` instead of ``numerics at this batch shape beyond the tolerances``) and the summary
line, the report's localisation and the ledger agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.base.jsonio import plain_dict, seal
from harness.data.schemas.localisation import LocalisedOp
from harness.data.schemas.results import Score, ShapeScore
from harness.evidence.refusal import ScoreFacts, with_cause

INPUT_MARK = "<input"  # harness.localisation.first_divergence.INPUT, after the network's name (no torch here)


def input_findings(localised: Mapping[str, Any]) -> dict[str, str]:
    """Per OP of one shape's localisation, the finding where the first diverging module is the network's input.

    ``localised`` is the localisation's JSON as :mod:`harness.localisation` writes it, each OP's entry read as the
    localisation file's ``LocalisedOp`` (its typed keys, and the free-form ones beside them, e.g. ``per_block``)."""
    out = {}
    for op, found in localised.items():
        entry = LocalisedOp.model_validate(found)
        layer = str(entry.first_diverging_layer or "")
        if entry.available and INPUT_MARK in layer:
            # a free-form key of the entry (LocalisedOp keeps those as they were written): read by key
            block = ((entry.model_extra or {}).get("per_block") or [{}])[0].get("block")
            out[str(op)] = f"{layer}" + (f" for block {block!r}" if block else "")
    return out


def with_input_findings(score: Score, localisation: Mapping[str, Any]) -> Score:
    """``score`` with every failing shape's input findings and its cause re-derived from them (sealed again);
    the score itself where there are none."""
    found = {k: f for k, loc in localisation.items() if (f := input_findings(loc))}
    if not found:
        return score
    facts = ScoreFacts.of(score)
    shapes = {}
    for k, shape in score.shapes.items():
        if k in found:
            given = {n: getattr(shape, n) for n in shape.model_fields_set if n != "cause"}
            shape = with_cause(int(k), ShapeScore(**{**given, "input_differs": found[k]}), facts)
        shapes[k] = shape
    body = score.model_dump(mode="json")
    body.pop("digest", None)
    body["shapes"] = {k: s.model_dump(mode="json") for k, s in shapes.items()}  # the JSON the seal is over
    return Score.model_validate(seal(plain_dict(body), "digest"))
