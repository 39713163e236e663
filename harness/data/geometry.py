"""The numbers a model declares about its windows, shared by blocks, packer, corpus and scoring."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Geometry:
    """Geometry of one model. The reference model's full configuration is the default.

    ``frame_step`` is the hop, in samples, between output frames of the segmentation
    network; the engine needs it to know which frames of a short window hold audio.
    """

    sample_rate: int = 16_000
    window_samples: int = 160_000
    frames_per_window: int = 589
    frame_step: int = 270
    speakers: int = 3
    max_simultaneous: int = 2
    embedding_dim: int = 256
    windows_per_block: int = 8

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"geometry {name} must be a positive integer, got {value!r}")
        if self.max_simultaneous > self.speakers:
            raise ValueError("geometry max_simultaneous cannot exceed speakers")

    @cached_property
    def powerset(self) -> np.ndarray:
        """[classes, speakers] 0/1 matrix: which local speakers each powerset class holds.

        Ordered as pyannote orders it: the empty set, then singletons, then pairs, ...
        """
        rows = [np.zeros(self.speakers, dtype=np.float32)]
        for size in range(1, self.max_simultaneous + 1):
            for combo in itertools.combinations(range(self.speakers), size):
                row = np.zeros(self.speakers, dtype=np.float32)
                row[list(combo)] = 1.0
                rows.append(row)
        return np.stack(rows)

    @property
    def classes(self) -> int:
        return int(self.powerset.shape[0])

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> Geometry:
        """Every key required, no unknown key (a misspelt key must never fall back to a default)."""
        if not isinstance(data, dict):
            raise ValueError(
                f"geometry must be a mapping of its {len(cls.__dataclass_fields__)} keys, got {type(data).__name__}"
            )
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"geometry: unknown key {unknown[0]!r} (known: {', '.join(cls.__dataclass_fields__)})")
        missing = [k for k in cls.__dataclass_fields__ if k not in data]
        if missing:
            raise ValueError(f"geometry: missing key {missing[0]!r}")
        return cls(**data)


def geometry_of(model: object) -> Geometry:
    """A model's geometry as the harness reads it: a :class:`Geometry`, parsed from a dict where the model
    declares one. The model's attribute is never replaced: its own code may index the dict it declared.
    ``lanes.models.model_api.check_model`` has refused a dict that does not parse, so this cannot fail for a loaded
    model."""
    geometry = getattr(model, "geometry")  # noqa: B009 (any object a model plug-in gives)
    return geometry if isinstance(geometry, Geometry) else Geometry.from_dict(dict(geometry))
