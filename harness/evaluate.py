"""Scoring a run against a golden: every OP of every shape judged, one JSON-able report.

This is what ``harness score`` writes (score.json) and what promotion, the sign-off report
and the nightly read. A run and a golden are comparable only if they come from the same
model (fingerprint) and cover the same blocks; anything else is refused by name.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np

from golden.runs import EXACT, Run, lane_dir
from golden.store import Golden, golden_calls, verification
from harness.errors import ScoringError
from harness.gate import OpVerdict, judge_segmentation, judge_voiceprint
from harness.jsonio import write_json_atomic
from harness.ops import Op
from harness.outputs import LaneOutputs
from harness.scoring import compare_segmentation, compare_voiceprint
from harness.timing import summarize_calls
from harness.tolerances import Tolerances

FORMAT = 1
DISTRIBUTION_LIMIT = 20_000  # values kept per OP and shape for the error-distribution plot


def check_comparable(golden: Golden, run: Run) -> None:
    if golden.fingerprint != run.fingerprint:
        raise ScoringError(f"run {run.run_id} was made with model {run.fingerprint[:16]}..., golden "
                           f"{golden.golden_id} with {golden.fingerprint[:16]}...: not comparable")
    if golden.geometry != run.geometry:
        raise ScoringError(f"run {run.run_id} and golden {golden.golden_id} declare different geometries")
    missing = sorted(set(golden.corpus.ids) - set(run.manifest.get("corpus_blocks", [])))
    if missing:
        raise ScoringError(f"run {run.run_id} lacks {len(missing)} block(s) of golden {golden.golden_id}, "
                           f"first {missing[0]!r}")


def judge_lane(golden: Golden, lane: LaneOutputs, shape: int, tolerances: Tolerances) -> tuple[list[OpVerdict], dict]:
    """Every OP of one lane against the golden; returns verdicts and error distributions."""
    verdicts, dist = [], {}
    seg = compare_segmentation(golden.outputs.segmentation, lane.segmentation, golden.geometry,
                               tolerances.op0.near_tie_margin)
    verdicts.append(judge_segmentation(seg, tolerances.op0, shape, golden.noise_floor(Op.SEGMENTATION)))
    dist["0"] = _sample(seg.window_max_abs.reshape(-1))
    for op, g in golden.outputs.voiceprint.items():
        if op not in lane.voiceprint:
            raise ScoringError(f"lane k={shape} has no OP {int(op)} outputs but the golden does")
        vp = compare_voiceprint(g, lane.voiceprint[op], golden.geometry)
        verdicts.append(judge_voiceprint(vp, tolerances.for_op(op), shape, golden.noise_floor(op)))
        dist[str(int(op))] = _sample(vp.max_abs)
    return verdicts, dist


def score_run(golden: Golden, run: Run, tolerances: Tolerances, localisation: dict | None = None) -> dict:
    check_comparable(golden, run)
    blocks = golden.corpus.ids
    shapes = {}
    for k in run.shapes:
        lane = run.lanes[lane_dir(k)].select(blocks)
        verdicts, dist = judge_lane(golden, lane, k, tolerances)
        reasons = [r for v in verdicts for r in v.reasons]
        shapes[str(k)] = {
            "shape": k,
            "verdict": "pass" if all(v.passed for v in verdicts) else "fail",
            "reasons": reasons,
            "ops": {str(v.op): v.to_dict() for v in verdicts},
            "distribution": dist,
        }
        if localisation and str(k) in localisation:
            shapes[str(k)]["localisation"] = localisation[str(k)]
    calls = list(run.calls)
    exact_timing_source = "this run (interleaved)"
    if EXACT not in run.lanes:
        calls += [c for c in golden_calls(golden) if c["lane"] == "exact"]
        exact_timing_source = "the golden's recording (not interleaved with this run)"
    report = {
        "kind": "harness.score",
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "release": golden.release,
        "golden_id": golden.golden_id,
        "golden_path": str(golden.path),
        "run_id": run.run_id,
        "run_path": str(run.path),
        "fingerprint": golden.fingerprint,
        "model": golden.manifest["model"],
        "device_kind": run.device_kind,
        "environment": run.manifest["environment"],
        "numerics": run.manifest.get("numerics"),
        "mode": run.manifest["mode"],
        "pad_to_fixed": run.manifest.get("pad_to_fixed", False),
        "corpus": golden.manifest["corpus"],
        "reproducibility": golden.manifest.get("reproducibility"),
        "tolerances": tolerances.to_dict(),
        "shapes": shapes,
        "throughput": summarize_calls(calls),
        "exact_timing_source": exact_timing_source,
    }
    if EXACT in run.lanes:
        report["verification"] = verification_of_run(golden, run)
    report["verdict"] = "pass" if all(s["verdict"] == "pass" for s in shapes.values()) and \
        report.get("verification", {}).get("passed", True) else "fail"
    return report


def verification_of_run(golden: Golden, run: Run) -> dict:
    """The interleaved exact lane of a run against the golden (golden reproduction)."""
    numerics = (run.manifest.get("numerics") or {}).get("in_force") or {}
    return verification(golden, run.lanes[EXACT].select(golden.corpus.ids), run.fingerprint,
                        run.manifest["environment"], numerics)


def write_score(path: Path, report: dict) -> Path:
    return write_json_atomic(path, report)


def read_score(path: Path) -> dict:
    try:
        report = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ScoringError(f"{path}: score file not found") from None
    except json.JSONDecodeError as exc:
        raise ScoringError(f"{path}: not a score file ({exc})") from None
    if report.get("kind") != "harness.score":
        raise ScoringError(f"{path}: not a score file (kind={report.get('kind')!r})")
    return report


def _sample(values: np.ndarray) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    if v.size > DISTRIBUTION_LIMIT:
        v = np.sort(v)[np.linspace(0, v.size - 1, DISTRIBUTION_LIMIT).astype(int)]
    return [float(x) if np.isfinite(x) else None for x in v]
