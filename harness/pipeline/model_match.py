"""``golden verify``'s first question: is this the model the golden was recorded with?

A golden is reproduced by the model that recorded it. Verifying one with another model used to
run the whole exact lane (minutes on the full model) and then fail inside the model adapter
(``WEIGHTS='width 56': must be frames per window (589)``). The geometry (what the golden's
tensors are cut for) and the fingerprint (what produced its numbers) are known before any block
runs: both are checked first, as ``run`` and ``nightly`` do, and a mismatch is one line, exit 2,
naming both sides and what to do. (``verify_golden`` itself still judges a same-geometry model of
other weights, and names the fingerprint first: the library's drift report, used by the reports.)
"""

from __future__ import annotations

from golden.store import Golden
from harness.data.errors import GoldenError
from harness.data.geometry import Geometry

TO_DO = ("give `golden verify` the model it was recorded with (--model/--seed or the config's [model]; "
         "`harness golden show` names it), or record a golden of this model")


def check_geometry(golden: Golden, geometry: Geometry, model: str) -> None:
    """The golden's tensors are cut for ``geometry``: every key equal, or one line naming those that differ."""
    recorded, here = golden.geometry.to_dict(), geometry.to_dict()
    differ = [k for k in recorded if recorded[k] != here.get(k)]
    if differ:
        shown = ", ".join(f"{k} {recorded[k]} vs {here.get(k)}" for k in differ)
        raise GoldenError(f"{golden.path}: golden of another model geometry: {len(differ)} of {len(recorded)} "
                          f"geometry keys differ (golden vs {model}): {shown}; {TO_DO}")


def check_fingerprint(golden: Golden, fingerprint: str, model: str) -> None:
    if golden.fingerprint != fingerprint:
        name = golden.manifest["model"].get("name", "?")
        raise GoldenError(f"{golden.path}: golden of another model: recorded with fingerprint {golden.fingerprint} "
                          f"({name}), {model} has fingerprint {fingerprint}; {TO_DO}")
