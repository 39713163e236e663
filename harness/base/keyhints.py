""" "Did you mean ...?" for a misspelt configuration key, as for a misspelt flag.

Every key of ``harness.toml`` has a default, so a misspelt one (``max_abss``) is never *missing*
and the schema layer's hint (close to a missing key) says nothing. Here the accepted keys are
read off the pydantic models at the error's location and the closest one is named.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class Problem:
    """One problem of a pydantic validation error, read by attribute: what went wrong (``type``, ``msg``),
    where (``loc``, keys and list indices, pydantic's union branch names among them) and the value found."""

    type: str
    loc: tuple[int | str, ...]
    msg: str
    input: object

    @staticmethod
    def all_of(exc: ValidationError) -> list[Problem]:
        """Every problem of ``exc``, in pydantic's order."""
        # pydantic's answer: each problem an ErrorDetails (a TypedDict), read by its keys here only
        return [Problem(e["type"], tuple(e["loc"]), e["msg"], e["input"]) for e in exc.errors(include_url=False)]


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Annotated, unions, lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if typing.get_origin(annotation) is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def accepted_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys accepted in the table at ``loc`` (the path to it, union branch names included)."""
    models = [model]
    for part in loc:
        if not isinstance(part, str):
            continue  # a list index: the same models
        named = [m for m in models if m.__name__ == part]
        if named:  # a union branch pydantic names in the location
            models = named
            continue
        models = [
            inner for m in models if part in m.model_fields for inner in _models_in(m.model_fields[part].annotation)
        ]
    return sorted({name for m in models for name in m.model_fields})


def did_you_mean(model: type[BaseModel], exc: ValidationError) -> str | None:
    """The closest accepted key to the unknown one the error line names (the deepest, as
    ``harness.data.schemas.describe_error`` picks it), or None."""
    unknown = [p for p in Problem.all_of(exc) if p.type == "extra_forbidden" and p.loc]
    if not unknown:
        return None
    deepest = max(len(p.loc) for p in unknown)
    *where, key = next(p.loc for p in unknown if len(p.loc) == deepest)
    close = difflib.get_close_matches(str(key), accepted_keys(model, tuple(where)), n=1, cutoff=0.6)
    return close[0] if close else None
