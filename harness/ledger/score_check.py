"""Before a score may change the ledger: does it agree with itself, and with what it judged?

A score file is evidence, and evidence can be edited, replayed or misfiled. Promotion trusts a
score only when

- it passes its schema and still has the digest it was written with;
- every shape's evidence holds enough requests of exactly k blocks (``harness.evidence.request_evidence``,
  the blocks needed re-derived from its rate checks) and the run's packer held the packing laws;
- every gated check's ``ok`` follows from its ``observed``, ``relation`` and ``allowed``; every
  ``allowed`` is the limit its judge derives from the score's tolerances (and the golden's noise
  floor); every OP's ``passed``, every shape's verdict and the overall verdict follow from them;
- it was judged with the release configuration's tolerances;
- the run and golden it names are the ones on disk (their manifest digests), the run ran against
  that golden, and the model, device and numerics recorded in the score are the run's.
"""

from __future__ import annotations

from pathlib import Path

from harness.base.errors import LedgerError
from harness.base.figures import holds
from harness.base.jsonio import read_json, seal_ok
from harness.data.judge_limits import LimitSet
from harness.data.ops import Op
from harness.data.schemas import Score, validate
from harness.data.schemas.files import GoldenManifest, RunManifest
from harness.data.schemas.results import OpVerdictModel
from harness.data.shape import Shape
from harness.data.tolerances import Tolerances
from harness.evidence.canary_verdicts import canaries_hold
from harness.evidence.kind import Recheck
from harness.evidence.kind_registry import kinds, loaded, warning_keys
from harness.evidence.refusal import ScoreFacts, check_cause
from harness.evidence.shape_gates import shape_gates
from harness.host.environment import device_kind
from harness.judging.lane_scoring import op_limits
from harness.ledger.file_head import FileHead


def read_score(path: Path) -> Score:
    """A score file: schema and digest checked; the frozen model."""
    path = Path(path)
    data = read_json(path, "score file")
    head = FileHead.of(data)  # looked at before it is validated (to name what it is)
    if head.kind != "harness.score":
        raise LedgerError(f"{path}: not a score file (kind {head.named!r})")
    score: Score = validate(Score, data, str(path), LedgerError)
    assert isinstance(data, dict)  # anything else has no kind: refused above
    if not seal_ok(data, "digest"):
        raise LedgerError(
            f"{path}: edited after it was written (its digest does not match its content); score the run again"
        )
    return score


def check_self_consistent(score: Score, where: str) -> None:
    """Every verdict in the score re-derived from its checks and limits (see module doc), with the kinds of
    evidence it names loaded: a kind that cannot be loaded here cannot re-derive what it stored."""
    with loaded(score.evidence_kinds or (), f"{where}: evidence_kinds", LedgerError):
        _check_self_consistent(score, where)


def _check_self_consistent(score: Score, where: str) -> None:
    floors = {int(k): v.model_dump() for k, v in score.reproducibility.ops.items()}
    facts = ScoreFacts.of(score)
    blocks = int(score.corpus.blocks)
    for k, shape in score.shapes.items():
        ops = [Op(int(o)) for o in shape.ops]
        limits = op_limits(score.tolerances, ops, floors)
        for op_key, verdict in shape.ops.items():
            _check_op(verdict, limits[Op(int(op_key))], f"{where}: shape k={k} OP {op_key}")
        ops_passed = all(v.passed for v in shape.ops.values())
        unchecked = sorted(set(shape.more_evidence) - {kind.name for kind in kinds()})
        if unchecked:  # a result nothing here re-derives would be promoted on its own word
            raise LedgerError(
                f"{where}: shape k={k}: more_evidence {unchecked[0]!r} is re-derived by no evidence kind loaded "
                f"here (the score names {list(score.evidence_kinds or ()) or 'none'}): it cannot be promoted unchecked"
            )
        recheck = Recheck(score.tolerances, floors, _check_op, f"{where}: shape k={k}", blocks, score.shapes)
        held = [kind.holds(shape, recheck) for kind in kinds()]  # every kind re-derived (harness.evidence.kind)
        passed, reasons = shape_gates(Shape(k), ops_passed and all(held), shape.requests, score.laws)
        refused = [line for _, line in facts.refusals.get(k, ())]  # the score-level ones: the load sweep's
        passed, reasons = passed and not refused, reasons + refused
        want = "pass" if passed else "fail"
        if shape.verdict != want:
            why = f"; {reasons[0]}" if reasons else ""
            raise LedgerError(
                f"{where}: shape k={k}: verdict {shape.verdict!r} disagrees with its OPs, its "
                f"full k-block requests, its evidence and its packer's packing laws ({want}{why})"
            )
        check_cause(Shape(k), shape, facts, where)
        warned = {(w.kind, w.op) for w in shape.warnings}
        if warned != warning_keys(shape, floors):
            raise LedgerError(
                f"{where}: shape k={k}: its warnings {sorted(warned)} are not the ones its own evidence "
                f"gives {sorted(warning_keys(shape, floors))}: the score disagrees with itself"
            )
    canaries_hold(score, where)  # each canary's cause re-derived from its own figures
    verification = score.verification
    for op_key, verdict in verification.ops.items():
        _check_op(verdict, None, f"{where}: golden reproduction OP {op_key}")
    if verification.passed != all(v.passed for v in verification.ops.values()):
        raise LedgerError(f"{where}: golden reproduction 'passed' disagrees with its checks")
    want = "pass" if verification.passed and all(s.verdict == "pass" for s in score.shapes.values()) else "fail"
    if score.verdict != want:
        raise LedgerError(f"{where}: overall verdict {score.verdict!r} disagrees with its shapes ({want})")


def _check_op(verdict: OpVerdictModel, derived: LimitSet | None, where: str) -> None:
    limits = None if derived is None else derived.document()  # as the verdict stores them
    if limits is not None and verdict.limits != limits:
        diff = sorted(k for k in set(limits) | set(verdict.limits) if limits.get(k) != verdict.limits.get(k))
        raise LedgerError(
            f"{where}: limit {diff[0]} is {verdict.limits.get(diff[0])!r}, but the score's own "
            f"tolerances give {limits.get(diff[0])!r}"
        )
    for c in verdict.checks:
        if c.relation == "report":
            continue
        source = verdict.limits if limits is None else limits
        expected = source.get(c.limit) if c.limit else 0
        if c.allowed != expected:
            raise LedgerError(
                f"{where}: check {c.metric} allows {c.allowed!r}, its limit {c.limit or '0'} is {expected!r}"
            )
        if c.ok != holds(c.observed, c.relation, c.allowed):
            raise LedgerError(
                f"{where}: check {c.metric} says ok={c.ok} but {c.observed!r} {c.relation} "
                f"{c.allowed!r} is {not c.ok}: the score disagrees with itself"
            )
    passed = not any(c.ok is False for c in verdict.checks)
    if verdict.passed != passed:
        raise LedgerError(f"{where}: 'passed' is {verdict.passed} but its checks say {passed}")


def check_binding(
    score: Score, golden_manifest: GoldenManifest, run_manifest: RunManifest, tolerances: Tolerances, where: str
) -> None:
    """The score judged this run against this golden, with this release's tolerances."""
    if score.golden.manifest_sha256 != golden_manifest.manifest_sha256:
        raise LedgerError(
            f"{where}: judged golden {score.golden.id} with manifest "
            f"{score.golden.manifest_sha256[:12]}..., but {score.golden.path} now has "
            f"{golden_manifest.manifest_sha256[:12]}... ({golden_manifest.golden_id})"
        )
    if score.run.manifest_sha256 != run_manifest.manifest_sha256:
        raise LedgerError(
            f"{where}: judged run {score.run.id} with manifest "
            f"{score.run.manifest_sha256[:12]}..., but {score.run.path} now has "
            f"{run_manifest.manifest_sha256[:12]}..."
        )
    if run_manifest.golden_id != golden_manifest.golden_id:
        raise LedgerError(
            f"{where}: run {run_manifest.run_id} ran against golden {run_manifest.golden_id}, not "
            f"{golden_manifest.golden_id}"
        )
    facts = {
        "fingerprint": (score.fingerprint, run_manifest.model.fingerprint),
        "device_kind": (score.device_kind, device_kind(run_manifest.environment.device_name)),
        "numerics_profile": (score.numerics_profile, run_manifest.numerics_profile),
    }
    for key, (recorded, value) in facts.items():
        if recorded != value:
            raise LedgerError(f"{where}: {key} {recorded!r} is not the run's {value!r}")
    if score.tolerances != tolerances:
        raise LedgerError(
            f"{where}: judged with other tolerances than this release's configuration (give promote the "
            "--config the score was made with, or score the run again with this one)"
        )


def check_score(
    score: Score, golden_manifest: GoldenManifest, run_manifest: RunManifest, tolerances: Tolerances, where: str
) -> None:
    check_self_consistent(score, where)
    check_binding(score, golden_manifest, run_manifest, tolerances, where)


__all__ = ["check_binding", "check_score", "check_self_consistent", "read_score", "seal_ok"]
