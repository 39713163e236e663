"""Reading a TOML file (``harness.toml``) as one table, or one line saying why it cannot be read."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from harness.base.errors import ConfigError


# tomllib's answer: the TOML document as free tables (the file at its boundary; its reader validates it)
def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document as tomllib reads it: the file at its boundary, typed by whoever validates it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: configuration file expected, found a directory") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); a configuration is a TOML text file") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
