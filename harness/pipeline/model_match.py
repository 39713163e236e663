"""The first question of ``golden verify``, ``run`` and ``nightly``: is this the model the golden was recorded with?

A golden is reproduced (and shapes are judged against it) by the model that recorded it. Using one
with another model used to run the whole exact lane (minutes on the full model) and then fail inside
the model adapter (``WEIGHTS='width 56': must be frames per window (589)``), or to build the full
model first. What can be compared is compared as soon as it is known: a reference model's geometry
from its spec, before the model is built (:func:`check_before_building`); the fingerprint (what
produced the golden's numbers) once it is built, before the packing laws, the warm-up and any block.
A mismatch is one line, exit 2, naming both sides and what to do. (``verify_golden`` itself still
judges a same-geometry model of other weights, and names the fingerprint first: the library's drift
report, used by the reports.)
"""

from __future__ import annotations

from golden.store import Golden
from harness.base.errors import GoldenError
from harness.data.geometry import Geometry
from lanes.models.diar_nn_g.config import CONFIGS

TO_DO = (
    "give the command the model it was recorded with (--model and --set model.seed=N, or the config's [model]; "
    "`harness golden show` names it), or record a golden of this model"
)


def check_geometry(golden: Golden, geometry: Geometry, model: str) -> None:
    """The golden's tensors are cut for ``geometry``: every key equal, or one line naming those that differ."""
    recorded, here = golden.geometry.to_dict(), geometry.to_dict()
    differ = [k for k in recorded if recorded[k] != here.get(k)]
    if differ:
        shown = ", ".join(f"{k} {recorded[k]} vs {here.get(k)}" for k in differ)
        raise GoldenError(
            f"{golden.path}: golden of another model geometry: {len(differ)} of {len(recorded)} "
            f"geometry keys differ (golden vs {model}): {shown}; {TO_DO}"
        )


def check_fingerprint(golden: Golden, fingerprint: str, model: str) -> None:
    if golden.fingerprint != fingerprint:
        name = golden.manifest.model.name
        raise GoldenError(
            f"{golden.path}: golden of another model: recorded with fingerprint {golden.fingerprint} "
            f"({name}), {model} has fingerprint {fingerprint}; {TO_DO}"
        )


def check_before_building(golden: Golden, spec: str, in_process: bool) -> None:
    """Before the model is built: the geometry of a reference model (``full``, ``small``), which its spec
    names without building it (minutes of CPU for the full model on a loaded machine). A plug-in's or a
    server's geometry is known only from the model itself: checked once it is there."""

    if in_process and spec in CONFIGS:
        check_geometry(golden, CONFIGS[spec].geometry(), f"model {spec!r}")
