"""Promotion: a verified score applied to the ledger and the promoted-shapes manifest, as one
transaction (:mod:`harness.ledger.ledger_store`); and what that manifest, the file the engine reads, allows for a
score (:func:`engine_manifest`, for the report)."""

from __future__ import annotations

from pathlib import Path

from golden.runs import load_run
from golden.store import load_golden
from harness.base.errors import HarnessError, LedgerError, step
from harness.data.engine_allows import EngineManifest
from harness.data.schemas.config_file import ConfigFile
from harness.data.schemas.engine_manifest import PromotedShapes
from harness.data.schemas.files import GoldenManifest, RunManifest
from harness.data.schemas.laws_file import DescribedPacker
from harness.data.schemas.results import Score
from harness.ledger.history_store import Figures, rows_of
from harness.ledger.ledger_store import commit, load_manifest
from harness.ledger.promoted_manifest import allowed_for
from harness.ledger.promotion import Transition, apply_score, release_shapes_of
from harness.ledger.score_check import check_score, read_score


def load_score_evidence(
    score_path: Path, golden_path: Path | None = None, run_path: Path | None = None
) -> tuple[Score, GoldenManifest, RunManifest]:
    """The score and the manifests of the golden and run it judged (which must still be there)."""
    score = read_score(score_path)
    golden_at = Path(golden_path or score.golden.path)
    run_at = Path(run_path or score.run.path)
    try:
        golden = load_golden(golden_at).manifest
        run = load_run(run_at).manifest
    except HarnessError as exc:
        raise LedgerError(
            f"{score_path}: cannot check the score against what it judged: {exc} (promotion needs the "
            "golden and run the score names; give --golden/--run if they moved)"
        ) from None
    return score, golden, run


def promote(
    score: Score,
    golden_manifest: GoldenManifest,
    run_manifest: RunManifest,
    config: ConfigFile,
    ledger_path: Path,
    manifest_path: Path,
    where: str,
) -> list[Transition]:
    """Verify ``score`` and commit it; the state changes made (one per scored shape)."""
    with step("verify score"):
        check_score(score, golden_manifest, run_manifest, config.tolerances, where)
        if score.canaries is not None and not score.canaries.seen:
            missed = next(c for c in score.canaries.canaries if not c.seen)
            raise LedgerError(
                f"{where}: the gate did not see a planted defect ({missed.name}: {missed.planted}; expected "
                f"{missed.expected!r}): a score whose gate is blind may promote nothing; find why in its report's "
                "Canaries section, then run the nightly again"
            )
    release_shapes = config.release_shapes_json()
    release = release_shapes_of(release_shapes)  # no ledger event for these (apply_score), so no figures either
    with step("commit ledger and manifest"):
        return commit(
            ledger_path,
            manifest_path,
            release_shapes,
            lambda book: apply_score(book, score, run_manifest.created, release_shapes),
            # the figures beside the ledger, same transaction, bound to the score the events name
            history=lambda seq: Figures(rows_of(score, seq, skip=release), score.digest),
        )


def promote_file(
    score_path: Path,
    config: ConfigFile,
    ledger_path: Path,
    manifest_path: Path,
    golden_path: Path | None = None,
    run_path: Path | None = None,
) -> tuple[Score, list[Transition]]:
    score, golden, run = load_score_evidence(score_path, golden_path, run_path)
    return score, promote(score, golden, run, config, ledger_path, manifest_path, str(score_path))


def describe_transition(t: Transition) -> str:
    """'shape k=2: candidate -> promoted (run R, packer P)' or 'shape k=4: stays candidate (run R failed, packer
    P): ...'."""
    head = f"shape k={t.shape}: "
    packer = f", packer {t.packer}" if t.packer else ""
    if t.before != t.after:
        text = f"{head}{t.before} -> {t.after} (run {t.run_id}{packer})"
    else:
        text = f"{head}stays {t.after} (run {t.run_id} {'passed' if t.passed else 'failed'}{packer})"
    if not t.passed and t.reasons:
        text += f": {t.reasons[0]}"
    return text


def engine_manifest(score: Score, path: Path, manifest: PromotedShapes | None = None) -> EngineManifest:
    """What ``path`` allows for the score's model, device, numerics profile and packer. ``manifest``: as read
    with its ledger (a night that promoted); None: read here, read-only and without a lock, as the engine reads it
    (a night that did not promote touches neither file)."""
    path = Path(path)
    if manifest is None:
        if not path.exists():
            return EngineManifest(str(path), False, None)
        try:
            manifest = load_manifest(path)
        except HarnessError as exc:
            return EngineManifest(str(path), True, None, unreadable=str(exc))
    ops = sorted({op for s in score.shapes.values() for op in s.ops})
    described = DescribedPacker.of(score.packer)  # score.packer: the packer's own describe() JSON (free-form)
    allows = allowed_for(
        manifest,
        score.fingerprint,
        score.device_kind,
        score.numerics_profile,
        str(described.identity) if described.has_identity else "",
        ops,
    )
    return EngineManifest(str(path), True, allows)
