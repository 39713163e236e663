"""Counting how the same requests answered the second time they were sent: the control repeats' figures.

The neighbour lane's control repeats (``lanes.running.neighbour_controls``) and a canary's
(``harness.pipeline.canaries``)
send a request once more exactly as before and compare the answers with the first ones, block by block,
bit for bit; :class:`ControlTally` counts what they find as :class:`harness.data.schemas.neighbours.ControlFigures`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.compute.metrics import row_diff
from harness.data.schemas.neighbours import ControlFigures


@dataclass
class ControlTally:
    """Requests sent twice, compared bit for bit per block: the figures of :class:`ControlFigures`."""

    plain_sent: int = 0
    plain_reproduced: int = 0
    neighbour_sent: int = 0
    neighbour_reproduced: int = 0
    units: int = 0
    units_differing: int = 0
    max_abs: float | None = 0.0
    max_ulp: int = 0

    def compare(self, first: np.ndarray, again: np.ndarray) -> bool:
        """One block's two answers (units on the first axis); True when bitwise equal."""
        if first.shape != again.shape:  # a server answering another shape the second time: every unit differs
            self.units += int(first.shape[0]) if first.ndim else 1
            self.units_differing += int(first.shape[0]) if first.ndim else 1
            self.max_abs = None
            return False
        if first.size == 0:
            return True
        d = row_diff(first.reshape(first.shape[0], -1), again.reshape(again.shape[0], -1))
        self.units += int(d.differs.shape[0])
        self.units_differing += int(d.differs.sum())
        if (d.non_finite > 0).any():
            self.max_abs = None
        elif self.max_abs is not None:
            self.max_abs = max(self.max_abs, float(d.max_abs.max(initial=0.0)))
        self.max_ulp = max(self.max_ulp, int(d.max_ulp.max(initial=0)))
        return not bool(d.differs.any())

    def figures(self) -> ControlFigures:
        return ControlFigures(
            plain_sent=self.plain_sent,
            plain_reproduced=self.plain_reproduced,
            neighbour_sent=self.neighbour_sent,
            neighbour_reproduced=self.neighbour_reproduced,
            units=self.units,
            units_differing=self.units_differing,
            max_abs=None if self.max_abs is None else float(self.max_abs),
            max_ulp=self.max_ulp,
        )
