"""What the sign-off pages tell a person to do next, in plain words.

- ``op_next``: per failing OP, the same "next:" lines as the JUnit file (``reports.junit.next_steps``),
  except where localisation already ran: then its finding is the next step, said as what it found
  (the layer, and what a first layer of the input or the answer means), and the hint asking to
  localise is dropped;
- ``slow_note``: a usable packed shape measured slower than k = 1 says so, with the sample and the
  interval the figure rests on; it says the engine gains nothing only where the interval is tight and
  below 1, and "not measured precisely" where there are too few requests for an interval, the interval
  includes 1 or its ends differ by more than ``PRECISE_RATIO``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.data.schemas.results import CheckModel
from harness.ledger.promotion import PROMOTED
from reports.junit import next_steps
from reports.numbers import fmt, percent_text

PRECISE_RATIO = 1.5  # a speedup interval whose ends differ by more than this factor measures no speed
# harness.localisation.first_divergence.INPUT / OUTPUT, after the network's name (reports do not import it)
INPUT_MARK = "<input"
OUTPUT_MARK = "<output"


def op_next(checks: Sequence[CheckModel], localisation: Mapping[str, Any] | None) -> list[str]:
    """The next-step lines of one failing OP (its score's checks), given its localisation result (None: none
    ran; the report's localisation row of that OP, plain JSON as report.json holds it: read by key)."""
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
    """What localisation found for one OP, and what it means, in one sentence (``loc``: the report's
    localisation row of that OP, plain JSON as report.json holds it: read by key)."""
    layer = loc.get("first_diverging_layer")
    detail = (loc.get("per_block") or [{}])[0]
    block = f"block {detail['block']!r}" if detail.get("block") else "the failing block"
    if layer is None:
        return (
            f"localisation found no difference: {block} alone and packed agree at every layer and in the answer "
            "when replayed here; the failure is not this block's packing (look at the other blocks of the pack, "
            "the device, or the sample-size gate)"
        )
    if INPUT_MARK in layer:
        return (
            f"localisation found {block} already different at the network's input ({layer}): the windows "
            "differ before any layer runs, a packing or window-cutting bug, not numerics; fix the packer or the "
            "model's window cutting (harness laws --packer-cmd CMD judges a packer), not the tolerances"
        )
    size = ""
    if detail.get("max_abs") is not None:
        share = detail.get("fraction_differing")
        size = f" (max_abs {fmt(detail['max_abs'])}" + (
            f", {percent_text(share)} of values differ)" if share is not None else ")"
        )
    if OUTPUT_MARK in layer:
        return (
            f"localisation found every layer of {block} equal alone and packed, but the model's answer differs"
            f"{size}: the model's code outside its layers depends on the call (its size or its other blocks)"
        )
    return (
        f"localisation found the first diverging layer {layer!r} for {block}{size}: look at that layer's "
        "kernels at this batch shape"
    )


def speed_measured(shape: Mapping[str, Any]) -> bool:
    """Does the shape's speedup measure a speed: an interval (enough requests), not including 1, its ends within
    ``PRECISE_RATIO`` of each other? (``shape``: the report's row, plain JSON as report.json holds it: by key)"""
    interval = shape.get("speedup_interval")
    if not interval or shape.get("within_noise"):
        return False
    lo, hi = interval
    return lo > 0 and hi / lo <= PRECISE_RATIO


def slow_note(shape: Mapping[str, Any]) -> str | None:
    """'promoted: matches the golden, but 0.94× the speed of k=1 (95 % interval ..., 40 requests) ...' for a usable
    shape slower than k = 1 (``shape``: the report's own facts of that shape, ``reports.shape_facts.shape_facts``):
    the figure with its sample and interval, and a conclusion only where they support one."""
    speedup = shape.get("speedup")
    if not shape.get("usable") or speedup is None or speedup >= 1.0:
        return None
    how = "promoted" if shape.get("ledger_state") == PROMOTED else "passed"
    n = int(shape.get("repetitions") or 0)
    sample = f"{n} full {shape.get('shape', 'k')}-block request{'s' if n != 1 else ''}"
    interval = shape.get("speedup_interval")
    figure = f"{fmt(speedup, 'speedup')} the speed of k=1 on this device"
    if not interval:
        return (
            f"{how}: matches the golden; measured at {figure} over {sample}, too few for an interval: not "
            "measured precisely, so it says nothing yet of what the engine gains"
        )
    bounds = f"95 % interval {fmt(interval[0], 'speedup')}–{fmt(interval[1], 'speedup')}, {sample}"
    if not speed_measured(shape):
        why = "includes 1" if shape.get("within_noise") else "is that wide"
        return (
            f"{how}: matches the golden; measured at {figure} ({bounds}): not measured precisely (the interval "
            f"{why}), so it says nothing yet of what the engine gains"
        )
    return f"{how}: matches the golden, but {figure} ({bounds}): the engine gains nothing from it here"
