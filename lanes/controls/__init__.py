"""Controls: models that break the contract on purpose (defects), and honest ones that move by ULPs."""

# the defects answer to the spec they have always had, ``lanes.controls:NAME`` (``--model lanes.controls:leaky``)
from lanes.controls.defects import (
    count_dependent,
    cross_window_norm,
    cut_late_when_packed,
    duplicate_dependent,
    duplicate_shifted,
    invariant,
    leaky,
    nan_window,
    reads_past_end,
    slot_dependent,
    slow,
    wrong_shape,
)

__all__ = [
    "count_dependent",
    "cross_window_norm",
    "cut_late_when_packed",
    "duplicate_dependent",
    "duplicate_shifted",
    "invariant",
    "leaky",
    "nan_window",
    "reads_past_end",
    "slot_dependent",
    "slow",
    "wrong_shape",
]
