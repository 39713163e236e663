"""The sign-off report's line on the file the engine reads (``promoted-shapes.json``) and what it allows.

The decision box says which shapes passed; what the engine actually obeys is the promoted-shapes manifest
(derived from the ledger). A report names that file, and for a night that did not promote (``--no-promote``)
says that it is unchanged and what it still allows, so "may NOT use k = 2" of tonight's verdicts is never
read as the engine's rule.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.data.engine_allows import ENGINE_FILE, EngineManifest
from harness.data.schemas.results import Score

__all__ = ["ENGINE_FILE", "EngineManifest", "allows_text", "engine_line"]


def _ks(ks: list[int]) -> str:
    return ", ".join(str(k) for k in ks)


def allows_text(allows: Mapping[str, list[int]]) -> str:
    """'k = 1, 2, 4' when every OP allows the same; else per OP."""
    distinct = {tuple(ks) for ks in allows.values()}
    if len(distinct) == 1:
        return f"k = {_ks(list(next(iter(distinct))))}"
    return "; ".join(f"OP {op}: k = {_ks(ks)}" for op, ks in sorted(allows.items()))


def engine_line(score: Score, engine: EngineManifest | None, promoted: bool) -> str:
    """One sentence: which file the engine reads, and (when known) what it allows here; for a night that did not
    promote, that the file was not changed."""
    if engine is None:
        return (
            f"The engine reads {ENGINE_FILE}, which `harness promote` and `harness nightly` write from the "
            "ledger (`harness shapes` prints what it allows)."
        )
    key = (
        f"model {score.fingerprint[:16]}..., device {score.device_kind}, numerics profile "
        # score.packer is the packer's describe() JSON (free-form, the Packer protocol's): its identity by key
        f"{score.numerics_profile}, packer {score.packer.get('identity', '?')}"
    )
    reads = f"The engine reads {engine.path}" + ("" if promoted else ", not changed by this night")
    if engine.unreadable is not None:
        return f"{reads}; it could not be read here: {engine.unreadable}."
    if not engine.exists:
        return f"{reads}; it does not exist yet: no packed shape is allowed anywhere until a night promotes one."
    if engine.allows is None:
        return f"{reads}; it holds nothing for this {key}: no shape is known to be safe here."
    return f"{reads}; it allows {allows_text(engine.allows)} for this {key}."
