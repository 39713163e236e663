"""What the sign-off pages tell a person to do next, in plain words.

- ``op_next``: per failing OP, the same "next:" lines as the JUnit file (``reports.junit.next_steps``),
  except where localisation already ran: then its finding is the next step, said as what it found
  (the layer, and what a first layer of the input or the answer means), and the hint asking to
  localise is dropped;
- ``slow_note``: a usable packed shape measured slower than k = 1 says so, since promoting it
  gains the engine nothing on this device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.data.schemas.results import CheckModel
from harness.promotion import PROMOTED
from reports.junit import next_steps
from reports.numbers import fmt, percent_text

INPUT_MARK = "<input"  # harness.localise.INPUT / OUTPUT, after the network's name (reports do not import it)
OUTPUT_MARK = "<output"


def op_next(checks: Sequence[CheckModel], localisation: Mapping[str, Any] | None) -> list[str]:
    """The next-step lines of one failing OP (its score's checks), given its localisation result (None: none
    ran; a free-form dict of :mod:`harness.localise`, which has no model)."""
    if localisation and localisation.get("available"):
        steps = next_steps(checks, localised=True)
        if INPUT_MARK in (localisation.get("first_diverging_layer") or ""):  # a packing bug: no golden to re-record
            steps = [s for s in steps if "record a new golden" not in s]
        return [f"next: {localisation_finding(localisation)}", *steps]
    steps = next_steps(checks)
    if localisation:  # tried, and could not run: the hint stands, with why it was not done here
        steps.append(f"(localisation was tried and could not run: {localisation.get('reason') or 'unavailable'})")
    return steps


def localisation_finding(loc: Mapping[str, Any]) -> str:
    """What localisation found for one OP, and what it means, in one sentence."""
    layer = loc.get("first_diverging_layer")
    detail = (loc.get("per_block") or [{}])[0]
    block = f"block {detail['block']!r}" if detail.get("block") else "the failing block"
    if layer is None:
        return (f"localisation found no difference: {block} alone and packed agree at every layer and in the answer "
                "when replayed here; the failure is not this block's packing (look at the other blocks of the pack, "
                "the device, or the sample-size gate)")
    if INPUT_MARK in layer:
        return (f"localisation found {block} already different at the network's input ({layer}): the windows "
                "differ before any layer runs, a packing or window-cutting bug, not numerics; fix the packer or the "
                "model's window cutting (harness laws --packer-cmd CMD judges a packer), not the tolerances")
    size = ""
    if detail.get("max_abs") is not None:
        share = detail.get("fraction_differing")
        size = f" (max_abs {fmt(detail['max_abs'])}" + (f", {percent_text(share)} of values differ)"
                                                         if share is not None else ")")
    if OUTPUT_MARK in layer:
        return (f"localisation found every layer of {block} equal alone and packed, but the model's answer differs"
                f"{size}: the model's code outside its layers depends on the call (its size or its other blocks)")
    return (f"localisation found the first diverging layer {layer!r} for {block}{size}: look at that layer's "
            "kernels at this batch shape")


def slow_note(shape: Mapping[str, Any]) -> str | None:
    """'promoted: matches the golden, but 0.94× the speed of k=1 ...' for a usable shape slower than k = 1
    (``shape``: the report's own facts of that shape, ``reports.shape_facts.shape_facts``)."""
    speedup = shape.get("speedup")
    if not shape.get("usable") or speedup is None or speedup >= 1.0:
        return None
    how = "promoted" if shape.get("ledger_state") == PROMOTED else "passed"
    noise = " (within noise)" if shape.get("within_noise") else ""
    return (f"{how}: matches the golden, but {fmt(speedup, 'speedup')} the speed of k=1 on this device{noise}: "
            "the engine gains nothing from it here")
