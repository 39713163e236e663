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
from dataclasses import dataclass, field
from typing import Any

from harness.data.schemas.results import CheckModel
from harness.ledger.promotion import PROMOTED
from reports.junit import next_steps
from reports.numbers import fmt, percent_text
from reports.row_view import row_view

PRECISE_RATIO = 1.5  # a speedup interval whose ends differ by more than this factor measures no speed
# harness.localisation.first_divergence.INPUT / OUTPUT, after the network's name (reports do not import it)
INPUT_MARK = "<input"
OUTPUT_MARK = "<output"


@dataclass(frozen=True)
class LocalisationRow:
    """One failing OP's localisation as the pages show it (report.json's ``localisation`` of a shape, per OP):
    whether it ran (else why not), the first diverging layer, the failing pack, and per failing block the
    difference at that layer (``per_block``: the block and the localisation's own figures, free-form)."""

    available: bool = False
    reason: str | None = None
    first_diverging_layer: str | None = None
    blocks: list[str] = field(default_factory=list)
    k: int | None = None
    # each the block with the localisation's free-form figures of its first diverging layer, as written
    per_block: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class BlockFinding:
    """What the advice reads of a block's difference at the first diverging layer."""

    block: str | None = None
    max_abs: float | None = None
    fraction_differing: float | None = None


@dataclass(frozen=True)
class ShapeSpeed:
    """What the slow note reads of a shape's row: whether it may be used, and its speed-up over k = 1 with the
    sample and interval behind it."""

    shape: int | str = "k"
    usable: bool | None = None
    ledger_state: str | None = None
    speedup: float | None = None
    speedup_interval: Sequence[float] | None = None
    within_noise: bool | None = None
    repetitions: float | None = None


def _localisation(loc: LocalisationRow | Mapping[str, Any] | None) -> LocalisationRow | None:
    """The row typed (a mapping: the row as report.json holds it); None, and an empty row, for none."""
    if not loc:
        return None
    return loc if isinstance(loc, LocalisationRow) else row_view(LocalisationRow, loc)


def _speed(shape: ShapeSpeed | Mapping[str, Any]) -> ShapeSpeed:
    return shape if isinstance(shape, ShapeSpeed) else row_view(ShapeSpeed, shape)


def op_next(checks: Sequence[CheckModel], localisation: LocalisationRow | Mapping[str, Any] | None) -> list[str]:
    """The next-step lines of one failing OP (its score's checks), given its localisation result (None: none
    ran; the report's localisation row of that OP, or that row as report.json holds it)."""
    loc = _localisation(localisation)
    if loc is not None and loc.available:
        steps = next_steps(checks, localised=True)
        if INPUT_MARK in (loc.first_diverging_layer or ""):  # a packing bug: no golden to re-record
            steps = [s for s in steps if "record a new golden" not in s]
        return [f"next: {localisation_finding(loc)}", *steps]
    steps = next_steps(checks)
    if loc is not None:  # tried, and could not run: the hint stands, with why it was not done here
        steps.append(f"(localisation was tried and could not run: {loc.reason or 'unavailable'})")
    return steps


def localisation_finding(localisation: LocalisationRow | Mapping[str, Any]) -> str:
    """What localisation found for one OP, and what it means, in one sentence (``localisation``: the report's
    localisation row of that OP, or that row as report.json holds it)."""
    loc = localisation if isinstance(localisation, LocalisationRow) else row_view(LocalisationRow, localisation)
    layer = loc.first_diverging_layer
    detail = row_view(BlockFinding, loc.per_block[0]) if loc.per_block else BlockFinding()
    block = f"block {detail.block!r}" if detail.block else "the failing block"
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
    if detail.max_abs is not None:
        share = detail.fraction_differing
        size = f" (max_abs {fmt(detail.max_abs)}" + (
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


def speed_measured(shape: ShapeSpeed | Mapping[str, Any]) -> bool:
    """Does the shape's speedup measure a speed: an interval (enough requests), not including 1, its ends within
    ``PRECISE_RATIO`` of each other? (``shape``: its speed, or the report's row as report.json holds it)"""
    s = _speed(shape)
    interval = s.speedup_interval
    if not interval or s.within_noise:
        return False
    lo, hi = interval
    return lo > 0 and hi / lo <= PRECISE_RATIO


def slow_note(shape: ShapeSpeed | Mapping[str, Any]) -> str | None:
    """'promoted: matches the golden, but 0.94× the speed of k=1 (95 % interval ..., 40 requests) ...' for a usable
    shape slower than k = 1 (``shape``: its speed, ``reports.shape_facts.shape_facts``, or the report's row as
    report.json holds it): the figure with its sample and interval, and a conclusion only where they support one."""
    s = _speed(shape)
    speedup = s.speedup
    if not s.usable or speedup is None or speedup >= 1.0:
        return None
    how = "promoted" if s.ledger_state == PROMOTED else "passed"
    n = int(s.repetitions or 0)
    sample = f"{n} full {s.shape}-block request{'s' if n != 1 else ''}"
    interval = s.speedup_interval
    figure = f"{fmt(speedup, 'speedup')} the speed of k=1 on this device"
    if not interval:
        return (
            f"{how}: matches the golden; measured at {figure} over {sample}, too few for an interval: not "
            "measured precisely, so it says nothing yet of what the engine gains"
        )
    bounds = f"95 % interval {fmt(interval[0], 'speedup')}–{fmt(interval[1], 'speedup')}, {sample}"
    if not speed_measured(s):
        why = "includes 1" if s.within_noise else "is that wide"
        return (
            f"{how}: matches the golden; measured at {figure} ({bounds}): not measured precisely (the interval "
            f"{why}), so it says nothing yet of what the engine gains"
        )
    return f"{how}: matches the golden, but {figure} ({bounds}): the engine gains nothing from it here"
