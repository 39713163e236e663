"""The promoted-shapes manifest the engine reads to know which packed shapes it may use, derived from the
ledger (:mod:`harness.ledger.promotion`), never edited; and the engine's questions asked of it. It lives apart
from the ledger's own rules because it only reads a sealed ledger: deriving, comparing and answering from the
manifest never change a shape's state. The locked, crash-safe commit of both files is
:mod:`harness.ledger.ledger_store`'s::

    {"kind": "harness.promoted-shapes", "format": 3, "ledger_seq": N, "ledger_sha256": "...",
     "models": {"<fingerprint>": {"devices": {"<device kind>": {"profiles": {"<numerics profile>": {
         "numerics": {...}, "release_ops": {"0": [1], "1": [1], "2": [1]},
         "packers": {"<packer identity>": {
             "ops": {"0": [1, 2, 4], "1": [1, 2, 4], "2": [1, 2, 4]},
             "evidence": {"<k>": {"run_id", "golden_id", "release", "promoted_at", "corpus_blocks",
                                  "tolerance_mode", "laws": {"verdict", "examples", "seed", ...}}}}}}}}}}},
     "manifest_sha256": "..."}

Every packer's shapes per OP include the release's own shapes (they need no promotion); a packer
the manifest does not name may use only ``release_ops``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.base.errors import LedgerError
from harness.base.jsonio import seal
from harness.data.schemas import validate
from harness.data.schemas.engine_manifest import (
    DeviceShapes,
    Evidence,
    LawsEvidence,
    ModelShapes,
    PackerShapes,
    ProfileShapes,
    PromotedShapes,
)
from harness.data.schemas.machine import InForce
from harness.data.schemas.records import Ledger
from harness.ledger.promotion import FORMAT, PROMOTED, now

# what in a manifest is derived from the ledger: all of it but the time it was written and its seal
_NOT_DERIVED = {"generated", "manifest_sha256"}
Shapes = set[tuple[str, str, str, str, str, int]]


@dataclass
class _Packer:
    promoted: set[int] = field(default_factory=set)
    evidence: dict[str, Evidence] = field(default_factory=dict)


@dataclass
class _Profile:
    seq: int = -1  # the commit of the entry its numerics and release shapes come from
    numerics: InForce = field(default_factory=InForce)
    release_ops: dict[str, list[int]] = field(default_factory=dict)
    packers: dict[str, _Packer] = field(default_factory=dict)


def derive_manifest(ledger: Ledger, release_shapes: dict[str, list[int]] | None = None) -> PromotedShapes:
    """The promoted-shapes manifest of ``ledger`` (sealed, bound to the ledger's commit).

    A profile's release shapes are those its entries were last judged under (each entry records
    them), so every reader can re-derive the manifest from the ledger alone; ``release_shapes`` is
    only a fallback for entries without them."""
    found: dict[tuple[str, str, str], _Profile] = {}
    for entry in sorted(
        ledger.entries.values(),
        key=lambda e: (e.fingerprint, e.device_kind, e.numerics_profile, e.packer_identity, e.shape),
    ):
        profile = found.setdefault((entry.fingerprint, entry.device_kind, entry.numerics_profile), _Profile())
        last = entry.history[-1]
        if last.seq >= profile.seq:  # the most recent entry's numerics and release
            profile.seq, profile.numerics = last.seq, entry.numerics
            profile.release_ops = {op: sorted(ks) for op, ks in (entry.release_ops or release_shapes or {}).items()}
        packer = profile.packers.setdefault(entry.packer_identity, _Packer())
        if entry.state == PROMOTED:
            laws = last.evidence.laws  # the ledger's schema: a promoted entry's evidence has them
            assert laws is not None
            packer.promoted.add(entry.shape)
            # built unchecked: the whole manifest is validated once, below, from the very JSON it is sealed over
            packer.evidence[str(entry.shape)] = Evidence.model_construct(
                run_id=last.run_id,
                golden_id=last.golden_id,
                release=last.release,
                promoted_at=last.at,
                corpus_blocks=last.evidence.corpus_blocks,
                tolerance_mode=last.evidence.tolerance_mode,
                laws=LawsEvidence.model_construct(
                    verdict=laws.verdict, examples=laws.examples, seed=laws.seed, harness_version=laws.harness_version
                ),
            )
    tree: dict[str, dict[str, dict[str, ProfileShapes]]] = {}  # fingerprint -> device -> profile
    for (fp, device, name), p in found.items():
        tree.setdefault(fp, {}).setdefault(device, {})[name] = ProfileShapes.model_construct(
            numerics=p.numerics,
            release_ops=p.release_ops,
            packers={
                identity: PackerShapes.model_construct(
                    ops={op: sorted(set(ks) | pk.promoted) for op, ks in p.release_ops.items()}, evidence=pk.evidence
                )
                for identity, pk in p.packers.items()
            },
        )
    models = {
        fp: ModelShapes.model_construct(
            devices={dev: DeviceShapes.model_construct(profiles=profiles) for dev, profiles in devices.items()}
        )
        for fp, devices in tree.items()
    }
    body = {
        "kind": "harness.promoted-shapes",
        "format": FORMAT,
        "generated": now(),
        "ledger_seq": ledger.seq,
        "ledger_sha256": ledger.ledger_sha256,
        "models": {fp: m.model_dump(mode="json") for fp, m in models.items()},
    }
    manifest: PromotedShapes = validate(
        PromotedShapes,
        seal(body, "manifest_sha256"),
        f"the manifest derived from ledger commit {ledger.seq}",
        LedgerError,
    )
    return manifest


def allowed_shapes(manifest: PromotedShapes) -> Shapes:
    """Every (fingerprint, device, profile, packer, OP, k) the manifest allows."""
    return {
        (fp, dev, prof, packer, op, k)
        for fp, m in manifest.models.items()
        for dev, d in m.devices.items()
        for prof, p in d.profiles.items()
        for packer, pk in p.packers.items()
        for op, ks in pk.ops.items()
        for k in ks
    }


def _derived_part(manifest: PromotedShapes) -> object:
    """The manifest as it is written (:func:`~harness.data.schemas.records.as_written`) less what is not derived
    from its ledger: only compared, as a whole."""
    return manifest.model_dump(mode="json", exclude_unset=True, exclude=_NOT_DERIVED)


def manifest_differences(manifest: PromotedShapes, derived: PromotedShapes) -> list[str]:
    """How ``manifest`` differs from the one derived from its ledger, shape by shape (empty: equal)."""
    if _derived_part(manifest) == _derived_part(derived):
        return []
    out = []

    def name(t: tuple[str, str, str, str, str, int]) -> str:
        return f"k={t[5]} for OP {t[4]}, packer {t[3]}, model {t[0][:16]}..., device {t[1]}, profile {t[2]}"

    have, want = allowed_shapes(manifest), allowed_shapes(derived)
    out += [f"lists {name(t)}, which the ledger never promoted" for t in sorted(have - want)]
    out += [f"lacks {name(t)}, which the ledger promoted" for t in sorted(want - have)]
    if not out:
        out.append("its evidence, numerics or ledger commit differ from the ones derived from the ledger")
    return out


def removed_shapes(old: PromotedShapes | None, new: PromotedShapes) -> bool:
    """Does ``new`` allow fewer shapes anywhere than ``old``? (then it must be written first)"""
    if old is None:
        return False
    return bool(allowed_shapes(old) - allowed_shapes(new))


def allowed_for(
    manifest: PromotedShapes, fingerprint: str, device: str, profile: str, packer: str, ops: Iterable[str]
) -> dict[str, list[int]] | None:
    """The k ``packer`` may use per OP for one model, device and numerics profile, as :func:`may_use` answers the
    engine: the release's own shapes and those promoted with this packer's evidence; None where the manifest holds
    nothing for that model, device and profile (no shape is known to be safe there)."""
    model = manifest.models.get(fingerprint)
    device_shapes = model.devices.get(device) if model is not None else None
    p = device_shapes.profiles.get(profile) if device_shapes is not None else None
    if p is None:
        return None
    mine = p.packers.get(packer)
    return {
        op: sorted(
            {
                *p.release_ops.get(op, []),  # type: ignore[call-overload]  # op: the score's OP keys
                *(mine.ops.get(op, []) if mine is not None else []),  # type: ignore[call-overload]
            }
        )
        for op in ops
    }


def may_use(
    manifest: PromotedShapes,
    packer: str,
    k: int,
    op: str,
    device: str,
    fingerprint: str | None = None,
    profile: str | None = None,
) -> tuple[bool, str]:
    """The engine's question: may ``packer`` send k blocks per call for ``op`` on ``device``?

    Yes only for the release's own shapes or a shape promoted with this very packer's evidence.
    ``fingerprint`` (a prefix is enough) and ``profile`` may be left out when the manifest holds
    only one model / profile on that device; an ambiguous question is refused (LedgerError)."""
    matches = [
        (fp, prof, p)
        for fp, m in sorted(manifest.models.items())
        if fingerprint is None or fp.startswith(fingerprint)
        for dev, d in m.devices.items()
        if dev == device
        for prof, p in sorted(d.profiles.items())
        if profile is None or prof == profile
    ]
    asked = f"model {fingerprint or '(any)'}, device {device}" + (f", numerics profile {profile}" if profile else "")
    if not matches:
        return False, (
            f"no: the manifest (ledger commit {manifest.ledger_seq}) has nothing for {asked}: no shape "
            "is known to be safe there"
        )
    if len(matches) > 1:
        which = "; ".join(f"--fingerprint {fp[:16]} --profile {prof}" for fp, prof, _ in matches)
        raise LedgerError(f"{asked}: {len(matches)} models or numerics profiles match ({which}): say which one")
    fp, prof, p = matches[0]
    where = f"OP {op} on {device} (model {fp[:16]}..., numerics {prof})"
    if k in p.release_ops.get(op, []):  # type: ignore[call-overload]  # op: any string the engine asks about
        return True, f"yes: k={k} is one of the release's own shapes for {where}: every packer may use it"
    mine = p.packers.get(packer)
    if mine is not None and k in mine.ops.get(op, []):  # type: ignore[call-overload]
        ev = mine.evidence[str(k)]
        return True, (
            f"yes: packer {packer} may use k={k} for {where}: promoted {ev.promoted_at} by run "
            f"{ev.run_id} against {ev.golden_id} ({ev.corpus_blocks} blocks, "
            f"{ev.tolerance_mode}, laws {ev.laws.verdict})"
        )
    others = sorted(q for q, pk in p.packers.items() if q != packer and k in pk.ops.get(op, []))  # type: ignore[call-overload]
    also = (
        f" (it is promoted only for packer(s) {', '.join(others)}: their evidence is not this packer's)"
        if others
        else ""
    )
    known = "has no evidence" if mine is None else f"may use only k = {', '.join(map(str, mine.ops.get(op, [])))}"  # type: ignore[call-overload]
    return False, f"no: packer {packer} {known} for {where}; k={k} is not promoted for it{also}"
