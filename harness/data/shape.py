"""A packed shape k (blocks per call) as one type, and the one function that names lanes.

A shape appears in three spellings: the number ``4`` (``--shapes 2,4``, ``[shapes] candidates``, a
run manifest's ``shapes``), the lane name ``"k4"`` (a run's folder, the runner's sinks) and the key
``"4"`` (score.json's and the ledger's ``shapes``/``evidence`` dicts). Before this module each
spelling was made where it was used, and k's range was checked in three places (the command
line, the lane plan, the TOML schema) in three ways that could drift apart. :class:`Shape` is the
one place: a validated ``int`` (so every function that takes a shape as a number keeps working)
that converts to and from the other two spellings.

It lives in the data layer so that ``golden/`` (run folders) and ``lanes/`` (the runner's sinks)
both use the same :func:`lane_name`.
"""

from __future__ import annotations

import operator
import re
from typing import Final

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from harness.base.errors import HarnessError, clip, clip_list

MIN_K: Final = 1
# The largest k: far above any batch the engine could send, small enough that a typo
# (--shapes 20000000) is refused at once instead of after minutes of corpus reading.
MAX_K: Final = 100_000
EXACT: Final = "exact"  # the exact lane: the release's own shape, never a k

_SPELLING = re.compile(r"(k?)(0|[1-9][0-9]*)")  # one form per spelling: no "04", "+4", " 4", "K4", "4.0"
_RANGE = f"a whole number of blocks per call from {MIN_K} to {MAX_K}"


class ShapeError(HarnessError, ValueError):
    """A shape that is not a whole number of blocks per call in MIN_K..MAX_K (exit 2, one line). A
    ValueError too, so that inside a pydantic validator it is the schema's one-line refusal."""


def _refusal(value: object, lane_names: bool = True) -> str | None:
    """Why ``value`` is not a shape (None: it is one). ``lane_names``: ``"k4"`` is accepted too."""
    if isinstance(value, bool):
        return f"expected {_RANGE}, not a boolean"
    if isinstance(value, str):
        found = _SPELLING.fullmatch(value)
        if found is None or (found.group(1) and not lane_names):
            return f"expected a shape such as 4 or k4 ({_RANGE})" if lane_names else f"expected {_RANGE}"
        digits = found.group(2)
        if len(digits) > len(str(MAX_K)):  # never int() a thousand digits, never echo them
            return f"a number of {len(digits)} digits is over the largest shape, {MAX_K}"
        value = int(digits)
    try:
        k = operator.index(value)  # type: ignore[arg-type]  # int, numpy integers; never a float
    except TypeError:
        return f"expected {_RANGE}, got {type(value).__name__}"
    if k < MIN_K:
        return f"{k} blocks per call is under the smallest shape, {MIN_K}"
    if k > MAX_K:
        return f"{k} blocks per call is over the largest shape, {MAX_K}"
    return None


class Shape(int):
    """A packed shape: k blocks per call, ``MIN_K <= k <= MAX_K``.

    An ``int`` subclass on purpose: arithmetic, ``math.lcm``, numpy and JSON (``json.dumps(Shape(4))``
    is ``4``) see the number, so converting a caller to Shape never changes a byte it writes."""

    def __new__(cls, value: object, where: str = "shape") -> Shape:
        """``4``, ``"4"`` (a score key) or ``"k4"`` (a lane name) -> ``Shape(4)``; anything else is
        refused in one line, ``<where> <value>: <why>``."""
        if isinstance(value, Shape):
            return value
        why = _refusal(value)
        if why is not None:
            raise ShapeError(f"{where} {value!r}: {why}")
        k = int(value.removeprefix("k")) if isinstance(value, str) else operator.index(value)  # type: ignore[arg-type]
        return super().__new__(cls, k)

    @classmethod
    def parse(cls, value: object, where: str = "shape") -> Shape:
        """Any of the three spellings (4, "4", "k4") -> Shape; ``where`` names the input in a refusal
        (``--shapes``, a file's key)."""
        return cls(value, where)

    @property
    def k(self) -> int:
        """The plain number (for code that must not carry the subclass)."""
        return int(self)

    @property
    def lane_name(self) -> str:
        """The lane's name in runs and sinks, and its folder in a run: ``k4``."""
        return f"k{int(self)}"

    @property
    def key(self) -> str:
        """The shape's key in score.json's and the ledger's dicts: ``"4"``."""
        return str(int(self))

    def __repr__(self) -> str:  # the number, in a list too: a line listing shapes reads [2, 4]
        return str(int(self))

    def __str__(self) -> str:  # str() and f-strings print the number, as for an int
        return str(int(self))

    def __reduce__(self) -> tuple[type[Shape], tuple[int]]:  # pickles (Ray workers) as Shape(k)
        return Shape, (int(self),)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: GetCoreSchemaHandler) -> CoreSchema:
        """In a file's model: a whole number in MIN_K..MAX_K (the JSON Schema's integer and range), made a Shape;
        written as the number."""
        return core_schema.no_info_after_validator_function(
            cls,
            core_schema.int_schema(ge=MIN_K, le=MAX_K),
            serialization=core_schema.plain_serializer_function_ser_schema(int, return_schema=core_schema.int_schema()),
        )


# k as pydantic validates it in a file (``[shapes]`` in harness.toml, a run manifest's ``shapes``, a ledger entry's
# ``shape``): Shape itself, so a shape is one type from parsing to the ledger
ShapeInt = Shape


def parse_shapes(text: str, where: str = "--shapes") -> tuple[Shape, ...]:
    """``"2,4,8"`` -> distinct shapes, in the order given; refused in one line naming ``where`` and the
    whole text (``--shapes '2,x': ...``)."""
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts):
        raise ShapeError(
            f"{where} {clip(text)}: expected comma-separated blocks per call, e.g. 2,4,8 "
            "(an empty entry is not a shape)"
        )
    try:
        numbers = [int(p) for p in parts]  # int()'s spellings, as the flag always took them ("04", "+4")
    except ValueError:
        raise ShapeError(f"{where} {clip(text)}: expected comma-separated blocks per call, e.g. 2,4,8") from None
    for n in numbers:
        if (why := _refusal(n)) is not None:
            raise ShapeError(f"{where} {clip(text)}: {why} (expected distinct whole numbers from {MIN_K} to {MAX_K})")
    shapes = tuple(Shape(n) for n in numbers)
    if len(set(shapes)) != len(shapes):
        twice = sorted({int(k) for k in shapes if shapes.count(k) > 1})
        raise ShapeError(
            f"{where} {clip(text)}: {clip_list(twice).strip('[]')} listed twice; expected distinct "
            f"whole numbers from {MIN_K} to {MAX_K}"
        )
    return shapes


def lane_name(shape: int | str, replica: int = 0) -> str:
    """Lane names in runs and sinks: ``exact`` (``exact#2`` for a second repeat), ``k2``, ``k4``, ...

    The one lane-name function: golden/ (run folders) and lanes/ (the runner's sinks) both call it."""
    if shape == EXACT:
        return EXACT if replica == 0 else f"{EXACT}#{replica + 1}"
    return Shape(shape).lane_name


__all__ = ["EXACT", "MAX_K", "MIN_K", "Shape", "ShapeError", "ShapeInt", "lane_name", "parse_shapes"]
