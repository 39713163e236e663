"""The release configuration (``harness.toml``): what the release is and how it is judged.

Declared once, as pydantic models in the data layer (:mod:`harness.data.schemas.config_file`: every section,
with :mod:`harness.data.tolerances`, :class:`harness.data.numeric_settings.NumericSettings` and
:class:`harness.data.masks.MaskPolicy`); this module reads the file and applies ``--set``. Every key is known;
an unknown key, a wrongly typed value or one out of range (an ``inf`` tolerance, a negative mask
fraction, a seed numpy cannot take) is refused with the key named, because a misspelt tolerance
silently falling back to a default is exactly the kind of error a sign-off must not contain.
See ``docs/configuration.md`` (and the annotated ``harness.toml.example``) for every key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.base.errors import ConfigError
from harness.base.keyhints import did_you_mean
from harness.data.schemas import describe_error
from harness.data.schemas.config_file import ConfigFile
from harness.data.tomlio import read_toml


@dataclass(frozen=True)
class Override:
    """One value given on the command line for one key of the file: ``--seed 3`` is
    ``Override("--seed", "model.seed", 3, "3")``. It is merged into the file's table and validated with
    it, by the one validator (:class:`ConfigFile`); a refusal names ``flag shown`` (the flag as typed)."""

    flag: str
    key: str  # dotted: "model.seed", "tolerances.op0.mode"
    value: Any
    shown: str


def load_config(path: str | Path | None, overrides: Sequence[Override] = ()) -> ConfigFile:
    """Read ``harness.toml`` (``None``: the embedded default), merge the command line's ``overrides``
    (later ones win) and validate the whole once."""
    data = {} if path is None else read_toml(Path(path))
    for item in overrides:
        merge_key(data, item.key, item.value)
    config = config_from_dict(data, "config" if path is None else str(path), overrides)
    return config if path is None else config.read_from(Path(path))


# the file's TOML tables as read, before the one validator: a raw nested JSON-like object, merged into by key path
def merge_key(data: dict[str, Any], key: str, value: Any) -> None:
    """``data[a][b] = value`` for ``key`` "a.b" (tables created; a non-table on the way is replaced)."""
    *tables, last = key.split(".")
    for name in tables:
        inner = data.get(name)
        if not isinstance(inner, dict):
            inner = data[name] = {}
        data = inner
    data[last] = value


def parse_set(text: str) -> Override:
    """``--set TABLE.KEY=VALUE``: VALUE is a TOML value (``4``, ``true``, ``"x"``, ``[2, 4]``); text that is
    no TOML value is taken as a string (``--set backend.url=http://h:8000``)."""
    key, eq, value = text.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not eq or len(parts) < 2 or not all(p.strip() and p == p.strip() for p in parts):
        raise ConfigError(
            f"--set {text!r}: expected TABLE.KEY=VALUE, e.g. backend.concurrency=4 (keys: docs/configuration.md)"
        )
    try:
        parsed: Any = tomllib.loads(f"v = {value.strip()}")["v"]  # TOML's answer: the one-key document parsed
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return Override("--set", key, parsed, repr(text))


def _refusal(exc: ValidationError, where: str, overrides: Sequence[Override]) -> ConfigError:
    """The one line for a refused configuration: the flag it came from when a flag gave the value,
    else the file (``where``) and the key."""
    line = describe_error(exc)
    close = did_you_mean(ConfigFile, exc)  # a misspelt key: every key has a default, so none is "missing"
    if close is not None and "did you mean" not in line:
        line = line.replace("unknown key", f"unknown key (did you mean {close!r}?)", 1)
    loc = line.split(": ", 1)[0]
    for item in reversed(overrides):  # the last one given for a key is the one validated
        if loc == item.key or loc.startswith(item.key + ".") or item.key.startswith(loc + "."):
            return ConfigError(f"{item.flag} {item.shown}: {line}")
    return ConfigError(f"{where}: {line}")


def config_from_dict(data: object, where: str = "config", overrides: Sequence[Override] = ()) -> ConfigFile:
    """The configuration of these tables (a file's, with the command line's merged in: the validator's raw input),
    validated once; a refusal is one line naming the flag or the file, and the key."""
    try:
        return ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise _refusal(exc, where, overrides) from None


def release_config(**settings: Any) -> ConfigFile:
    """A configuration built in code: the embedded default with these sections or settings
    (:meth:`ConfigFile.with_overrides`)."""
    return ConfigFile().with_overrides(**settings)
