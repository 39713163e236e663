"""The schema metadata of a packer wire message (:mod:`harness.packers.wire`), typed: the string map every
message carries (its verb, version, the geometry and the verb's own keys) is parsed once where a message is
read, into :class:`WireMeta`, and read by attribute after; the geometry a request carries, as integers, is
:class:`WireGeometry`. Kept apart from the message codec so each module stays small.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from harness.data.geometry import Geometry
from harness.packers.columns import WireError

# The geometry every request (hello, pack, unpack) carries in its schema metadata, as decimal integers:
# what a packer needs to pad (windows per block, F of WEIGHTS even for OP 0) without being told by a flag.
GEOMETRY_KEYS = (
    "window_samples",
    "frames_per_window",
    "windows_per_block",
    "weights_frames",
    "sample_rate",
    "embedding_dim",
)


def geometry_meta(geometry: Geometry) -> dict[str, int]:
    """The geometry keys of a request's metadata (``weights_frames`` is F, the width of a WEIGHTS row)."""
    return {
        "window_samples": geometry.window_samples,
        "frames_per_window": geometry.frames_per_window,
        "windows_per_block": geometry.windows_per_block,
        "weights_frames": geometry.frames_per_window,
        "sample_rate": geometry.sample_rate,
        "embedding_dim": geometry.embedding_dim,
    }


@dataclass(frozen=True)
class WireMeta:
    """The protocol's keys of a message's schema metadata, parsed once where the message is read; each is the
    string sent, None where the message lacks the key (what a missing key means is the reader's to say)."""

    verb: str | None = None
    version: str | None = None
    harness_version: str | None = None
    packer_name: str | None = None
    packer_version: str | None = None
    pad_to: str | None = None
    output: str | None = None
    message: str | None = None
    window_samples: str | None = None
    frames_per_window: str | None = None
    windows_per_block: str | None = None
    weights_frames: str | None = None
    sample_rate: str | None = None
    embedding_dim: str | None = None

    @classmethod
    def of(cls, meta: Mapping[str, str]) -> WireMeta:
        """The protocol's keys of ``meta`` (a message's string map); keys not in the protocol mean nothing."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in meta.items() if key in known})

    @property
    def geometry(self) -> tuple[str | None, ...]:
        """The geometry's values, in the order of :data:`GEOMETRY_KEYS`."""
        return (
            self.window_samples,
            self.frames_per_window,
            self.windows_per_block,
            self.weights_frames,
            self.sample_rate,
            self.embedding_dim,
        )


class WireGeometry(NamedTuple):
    """The geometry a request carries, as integers (the fields are :data:`GEOMETRY_KEYS`)."""

    window_samples: int
    frames_per_window: int
    windows_per_block: int
    weights_frames: int
    sample_rate: int
    embedding_dim: int


def meta_geometry(head: WireMeta) -> WireGeometry:
    """The geometry a request's metadata carries (for packers written in Python); WireError if one is missing."""
    out = []
    for key, value in zip(GEOMETRY_KEYS, head.geometry, strict=True):
        try:
            out.append(int(value if value is not None else ""))
        except ValueError:
            raise WireError(f"request metadata {key!r} is {value!r}, expected a decimal integer") from None
    return WireGeometry(*out)
