"""The report's rows as typed objects, and back to the plain JSON report.json holds.

The report is built from frozen dataclasses (a shape's row, a lane's, a section's); report.json and the
pages' Jinja context are their plain JSON, made once by :func:`json_of`. The pages' filters and the advice
are handed rows back as that plain JSON (by the templates, and by a caller that holds report.json): they read
them through a frozen dataclass naming the fields they use (:func:`row_view`), never key by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


def row_view(cls: type[T], row: Mapping[str, Any]) -> T:
    """``row`` (a row of report.json, plain JSON) as the dataclass ``cls``: each of its fields the row's value
    of that name (null stays None), or the field's default where the row has no such key; other keys ignored."""
    assert is_dataclass(cls)
    values = {f.name: row[f.name] for f in fields(cls) if f.name in row}
    return cls(**values)


# a field's metadata: its JSON object is spliced into its row's (a check's own JSON beside what the row adds)
MERGED: Mapping[str, bool] = {"merged": True}


# the JSON object report.json holds for a row: names and values as the dataclass declares them
def json_of(row: object) -> dict[str, Any]:
    """A dataclass row as plain JSON: its fields by name in declaration order (a ``MERGED`` field's own JSON
    object spliced in at its place), nested rows likewise, and a document model it carries (a check, a cause,
    a floor) as that model's own JSON."""
    assert is_dataclass(row) and not isinstance(row, type)
    out = {}
    for f in fields(row):
        value = _json_value(getattr(row, f.name))
        if f.metadata == MERGED and isinstance(value, dict):
            out.update(value)
        else:
            out[f.name] = value
    return out


def _json_value(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return json_of(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value
