"""Tolerances per OP: what "gives the release's answers" means for each network.

Three modes:

- ``bitwise``: every output bit equal (NaN never equal);
- ``tolerance``: the absolute limits below (defaults from what a batching change does to a
  healthy model: pyannote-audio #2050 measured 2.3e-6 max difference, cosine 0.9999998);
- ``noise-floor``: limits equal to how much the exact lane differs *from itself* (stored
  with the golden), times ``noise_floor_factor``; a golden that reproduced bitwise makes
  this bitwise. A shape no worse than the release's own noise is as good as the release.

Flip rates are judged by the 95 % upper confidence bound (exact binomial; 3/n when nothing
flipped), so a small corpus cannot promote a shape by luck.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from harness.errors import ConfigError
from harness.ops import Op

MODES = ("bitwise", "tolerance", "noise-floor")


@dataclass(frozen=True)
class SegmentationTolerance:
    """OP 0: log-probabilities per (window, frame, class) and the decisions drawn from them."""

    mode: str = "tolerance"
    max_abs: float = 1e-4
    max_ulp: int | None = None  # None: not gated (reported)
    max_confident_flips: int = 0
    near_tie_margin: float = 0.1  # nats between the golden's top two classes
    max_flip_rate: float = 1e-3  # near-tie argmax/mask flips per frame, upper 95 % bound
    noise_floor_factor: float = 1.0

    def __post_init__(self) -> None:
        _check(self, "op0")


@dataclass(frozen=True)
class VoiceprintTolerance:
    """OP 1/2: one embedding per (block, window, speaker) row."""

    mode: str = "tolerance"
    min_cosine: float = 0.99999
    max_abs: float = 1e-4
    max_rel_l2: float = 1e-3
    max_ulp: int | None = None
    max_failed_row_rate: float = 0.05  # upper 95 % bound on rows out of tolerance
    noise_floor_factor: float = 1.0

    def __post_init__(self) -> None:
        _check(self, "op1/op2")


@dataclass(frozen=True)
class Tolerances:
    op0: SegmentationTolerance = field(default_factory=SegmentationTolerance)
    op1: VoiceprintTolerance = field(default_factory=VoiceprintTolerance)
    op2: VoiceprintTolerance = field(default_factory=VoiceprintTolerance)

    def for_op(self, op: Op) -> SegmentationTolerance | VoiceprintTolerance:
        return (self.op0, self.op1, self.op2)[int(op)]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "tolerances") -> Tolerances:
        unknown = sorted(set(data) - {"op0", "op1", "op2"})
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key (expected op0, op1, op2)")
        kinds = {"op0": SegmentationTolerance, "op1": VoiceprintTolerance, "op2": VoiceprintTolerance}
        built = {}
        for key, kind in kinds.items():
            section = data.get(key, {})
            if not isinstance(section, dict):
                raise ConfigError(f"{where}.{key}: expected a table")
            built[key] = build_dataclass(kind, section, f"{where}.{key}")
        return cls(**built)


def build_dataclass(kind: type, data: dict, where: str):
    """Build ``kind`` from a TOML table, refusing unknown keys and wrongly typed values by name."""
    known = {f.name: f for f in fields(kind)}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(known)})")
        _check_type(f"{where}.{key}", value, known[key].type)
    try:
        return kind(**data)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_type(key: str, value: object, annotation: object) -> None:
    text = str(annotation)
    ok = True
    if text in ("float",):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif text in ("int",):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif text.startswith("int | None"):
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
    elif text == "bool":
        ok = isinstance(value, bool)
    elif text == "str":
        ok = isinstance(value, str)
    if not ok:
        raise ConfigError(f"{key}: bad value {value!r} (expected {text})")


def _check(tol: object, where: str) -> None:
    if tol.mode not in MODES:
        raise ConfigError(f"{where}.mode: bad value {tol.mode!r} (expected one of {MODES})")
    for f in fields(tol):
        value = getattr(tol, f.name)
        if f.name == "mode" or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}.{f.name}: bad value {value!r} (expected a number)")
        if (value < 0 and f.name != "min_cosine") or value != value:
            raise ConfigError(f"{where}.{f.name}: bad value {value!r} (must be >= 0)")
    if hasattr(tol, "min_cosine") and not -1.0 <= tol.min_cosine <= 1.0:
        raise ConfigError(f"{where}.min_cosine: bad value {tol.min_cosine!r} (must be in [-1, 1])")
    for rate in ("max_flip_rate", "max_failed_row_rate"):
        if hasattr(tol, rate) and not getattr(tol, rate) <= 1.0:
            raise ConfigError(f"{where}.{rate}: bad value {getattr(tol, rate)!r} (a rate is <= 1)")
