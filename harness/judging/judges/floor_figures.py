"""A noise floor's figures, each judge's own: how a floor is taken, merged and compared, said once.

The golden's noise floor of an OP (the exact lane against itself), the noise between two lanes of any
kind of evidence (repeats, slots, duplicates) and the merge of several floors (shards of a corpus,
repeats of a lane) are all the same figures, declared by the OP's judge (``floor_figures``): the file's
key, the judge's metric it is taken from, which way is worse, and how it reads in a line. Everything
that takes, merges, compares or prints a floor goes through these functions; a new figure is one entry
in its judge's tuple (and its key in the file's model, ``harness.data.schemas.files.Floor``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Worse = Literal["larger", "smaller", "count"]  # count: a number of events (summed over disjoint blocks)


@dataclass(frozen=True)
class FloorFigure:
    """One figure of a noise floor (module doc). ``words``: the figure in a line (None: not said), in the
    file's style or the report's (``report``: thousands separators, a typographic minus)."""

    key: str
    metric: str
    worse: Worse
    words: Callable[[Any, bool], str | None]


def take(figures: Sequence[FloorFigure], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """One OP's floor from one pair's metrics: bitwise, then every figure. A floor is the manifest's JSON
    object (``Floor``), keyed by the file's names, as are a verdict's metrics: these functions read and write
    that form, so a judge's figure is one key in its tuple."""
    return {"bitwise": metrics["bitwise"], **{f.key: metrics[f.metric] for f in figures}}


def merge(
    figures: Sequence[FloorFigure], floors: Sequence[Mapping[str, Any]], counts: Callable[[list[int]], int]
) -> dict[str, Any]:
    """The worst of several floors of one OP: bitwise only if all are, the larger or the smaller figure, the
    counts combined by ``counts`` (``sum`` over disjoint blocks, ``max`` over the same blocks)."""
    out: dict[str, Any] = {"bitwise": all(f["bitwise"] for f in floors)}
    for fig in figures:
        values = [f[fig.key] for f in floors]
        out[fig.key] = (
            max(values) if fig.worse == "larger" else min(values) if fig.worse == "smaller" else counts(values)
        )
    return out


def within(figures: Sequence[FloorFigure], noise: Mapping[str, Any], floor: Mapping[str, Any] | None) -> bool:
    """``noise`` as close as ``floor`` (a release to itself): bitwise where the noise is bitwise, else no figure
    beyond the floor's (a figure the floor lacks counts as none measured: 0, or a cosine of 1)."""
    if noise["bitwise"]:
        return True
    if floor is None or floor["bitwise"]:
        return False
    for fig in figures:
        value, limit = noise.get(fig.key), floor.get(fig.key)
        if fig.worse == "smaller":
            if value is not None and value < (1.0 if limit is None else limit):
                return False
        elif (value or 0) > (limit or 0):
            return False
    return True


def words(figures: Sequence[FloorFigure], floor: Mapping[str, Any] | None, report: bool = False) -> str:
    """A floor (or the noise between two sides) in words: 'bitwise', or its figures."""
    if floor is None:
        return "not recorded"
    if floor["bitwise"]:
        return "bitwise"
    said = [fig.words(floor.get(fig.key), report) for fig in figures]
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
