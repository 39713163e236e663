"""JSON the harness writes and reads: one encoder, canonical digests, atomic writes, one-line reads."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from harness.base.errors import SchemaError
from harness.base.fsio import atomic_write

V = TypeVar("V")  # a sealed object's values, kept as the caller typed them


def json_default(value: object) -> object:
    """numpy scalars and arrays, and paths, as plain JSON values."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(data: object, indent: int | None = 1) -> str:
    """NaN and Inf are refused: a harness file states a non-finite value as null, never as a number."""
    return json.dumps(data, indent=indent, sort_keys=True, default=json_default, allow_nan=False)


_EXACT = (str, int, float, bool)  # already plain: returned as they are (immutable)


def plain(data: object) -> object:
    """A deep JSON-plain copy: numpy scalars become Python numbers, tuples lists, keys strings, enums and
    other subclasses their base values; NaN and Inf are kept (the file's writer refuses them).

    The same value as ``json.loads(json.dumps(data, default=json_default))`` (tests/test_jsonio_plain.py),
    built directly: that round trip was 0.15 s of a 1,024-block nightly's finish, after the device's last call.
    What it refuses, this refuses: an unknown type, or a key that JSON cannot name."""
    if data is None or type(data) in _EXACT:
        return data
    if isinstance(data, dict):
        return {_key(k): plain(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [plain(v) for v in data]
    if isinstance(data, str):
        return str.__str__(data)
    if isinstance(data, int):  # an IntEnum (bool, final, was returned above)
        return int(data)
    if isinstance(data, float):
        return float(data)
    return plain(json_default(data))  # numpy values and paths, or the TypeError json.dumps would raise


def _key(key: object) -> str:
    """A dict key as ``json.dumps`` writes it (str, int, float, bool or None; anything else is refused)."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def canonical(data: object) -> bytes:
    """The one byte form a digest is taken over: sorted keys, no whitespace, no NaN."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=json_default, allow_nan=False).encode(
        "utf-8"
    )


def digest(data: object) -> str:
    return hashlib.sha256(canonical(data)).hexdigest()


def seal(data: dict[str, V], field: str) -> dict[str, V | str]:
    """``data`` with ``field`` set to the sha256 of its canonical form without that field."""
    body = {k: v for k, v in data.items() if k != field}
    return {**body, field: digest(body)}


def seal_ok(data: dict[str, object], field: str) -> bool:
    """Whether ``data`` holds, under ``field``, the sha256 of its canonical form without that field."""
    return isinstance(data.get(field), str) and digest({k: v for k, v in data.items() if k != field}) == data[field]


def write_json_atomic(path: Path, data: object, indent: int | None = 1) -> Path:
    """Write to a temporary file beside ``path`` and rename: a reader never sees half a file."""
    return atomic_write(Path(path), dumps(data, indent) + "\n")


def read_json(path: Path, what: str) -> object:
    """Parse a JSON file or raise one SchemaError line saying why it is not ``what``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise SchemaError(f"{path}: {what} expected, found a directory") from None
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    if not raw.strip():
        raise SchemaError(f"{path}: {what} is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise SchemaError(
            f"{path}: {what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise SchemaError(f"{path}: {what}: {exc}") from None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a harness file may hold")


# JSON being built for a file: a deep JSON-plain copy, its keys whatever the copied object's were
def plain_dict(data: object) -> dict[str, Any]:
    """``plain(data)`` (a deep JSON-plain copy) of a dict, which is a dict again: said once for the type checker."""
    out = plain(data)
    assert isinstance(out, dict)  # a JSON round trip keeps a dict a dict
    return out
