"""A noise floor's figures, each judge's own: how a floor is taken, merged and compared, said once.

The golden's noise floor of an OP (the exact lane against itself), the noise between two lanes of any
kind of evidence (repeats, slots, duplicates) and the merge of several floors (shards of a corpus,
repeats of a lane) are all the same figures, declared by the OP's judge (``floor_figures``): the file's
key, the judge's metric it is taken from, which way is worse, and how it reads in a line. Everything
that takes, merges, compares or prints a floor goes through these functions, on the file's model of one OP's
floor (``harness.data.schemas.files.Floor``); a new figure is one entry in its judge's tuple (and its field in
that model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from harness.data.schemas.files import Floor
from harness.data.schemas.verdict_figures import VerdictFigures

Worse = Literal["larger", "smaller", "count"]  # count: a number of events (summed over disjoint blocks)
# one OP's floor as a caller holds it: the model, or its JSON object as the golden's manifest holds it (a golden's
# ``floors()``, a test's literal), parsed into the model once by :func:`floor_of`
FloorSource: TypeAlias = Floor | Mapping[str, object]
FloorValue: TypeAlias = bool | int | float | None  # a value of a floor's JSON object (int stays int)


@dataclass(frozen=True)
class FloorFigure:
    """One figure of a noise floor (module doc). ``key``: its field of :class:`Floor` (the file's key); ``metric``:
    the verdict's figure it is taken from. ``words``: the figure in a line (None: not said), in the file's style or
    the report's (``report``: thousands separators, a typographic minus)."""

    key: str
    metric: str
    worse: Worse
    words: Callable[[Any, bool], str | None]

    def of(self, floor: Floor) -> Any:
        """This figure of a floor (None: the floor does not hold it, as an OP 0 floor holds no cosine)."""
        return getattr(floor, self.key)


def floor_of(source: FloorSource) -> Floor:
    """One OP's floor as its model (a model is returned as it is)."""
    return Floor.model_validate(source)


def take(figures: Sequence[FloorFigure], metrics: Mapping[str, Any]) -> Floor:
    """One OP's floor from one pair's metrics (a verdict's, keyed by the judge's names): bitwise, then every
    figure, each from its metric, so that a judge's figure is one entry in its tuple."""
    taken = {fig.key: metrics[fig.metric] for fig in figures}
    return Floor.model_validate({"bitwise": VerdictFigures.of(metrics).bitwise, **taken})


def merge(figures: Sequence[FloorFigure], floors: Sequence[FloorSource], counts: Callable[[list[int]], int]) -> Floor:
    """The worst of several floors of one OP: bitwise only if all are, the larger or the smaller figure, the
    counts combined by ``counts`` (``sum`` over disjoint blocks, ``max`` over the same blocks)."""
    parsed = [floor_of(f) for f in floors]
    worst: dict[str, FloorValue] = {"bitwise": all(f.bitwise for f in parsed)}
    for fig in figures:
        values = [fig.of(f) for f in parsed]
        worst[fig.key] = (
            max(values) if fig.worse == "larger" else min(values) if fig.worse == "smaller" else counts(values)
        )
    return Floor.model_validate(worst)


def within(figures: Sequence[FloorFigure], noise: FloorSource, floor: FloorSource | None) -> bool:
    """``noise`` as close as ``floor`` (a release to itself): bitwise where the noise is bitwise, else no figure
    beyond the floor's (a figure the floor lacks counts as none measured: 0, or a cosine of 1)."""
    measured = floor_of(noise)
    if measured.bitwise:
        return True
    recorded = None if floor is None else floor_of(floor)
    if recorded is None or recorded.bitwise:
        return False
    for fig in figures:
        value, limit = fig.of(measured), fig.of(recorded)
        if fig.worse == "smaller":
            if value is not None and value < (1.0 if limit is None else limit):
                return False
        elif (value or 0) > (limit or 0):
            return False
    return True


def words(figures: Sequence[FloorFigure], floor: FloorSource | None, report: bool = False) -> str:
    """A floor (or the noise between two sides) in words: 'bitwise', or its figures."""
    if floor is None:
        return "not recorded"
    recorded = floor_of(floor)
    if recorded.bitwise:
        return "bitwise"
    said = [fig.words(fig.of(recorded), report) for fig in figures]
    return ", ".join(s for s in said if s is not None)


def max_abs_words(value: Any, report: bool) -> str:
    return f"max_abs {value:.3g}"


def max_ulp_words(value: Any, report: bool) -> str:
    return f"max_ulp {value}"  # as tolerances.opN.max_ulp takes it back


def flips_words(value: Any, report: bool) -> str | None:
    return (f"{value:,} argmax flips" if report else f"{value} argmax flips") if value else None


def cosine_words(value: Any, report: bool) -> str | None:
    if value is None or value >= 1.0:
        return None
    return f"min cosine 1 {'−' if report else '-'} {1.0 - value:.2g}"


def unsaid(value: Any, report: bool) -> None:
    return None


MAX_ABS = FloorFigure("max_abs", "max_abs_finite", "larger", max_abs_words)
MAX_ULP = FloorFigure("max_ulp", "max_ulp_finite", "larger", max_ulp_words)
