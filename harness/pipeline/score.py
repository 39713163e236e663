"""Scoring a run against its golden: once, streamed, every lane in one pass over the golden.

The golden's outputs are read once, batch by batch (the next batch read in a thread while this one
is scored), and every lane of the run is judged against the same batch: the run's exact lane
(golden reproduction), every packed shape (the verdicts), and every packed shape against the
run's own exact lane (what packing alone changes). The corpus
audio is never opened. The score is sealed with its digest and names the run and golden (with
their manifest digests) it judged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from golden.runs import Run
from golden.store import Golden
from harness.base.destinations import check_output_file
from harness.base.errors import ScoringError, check_interrupted, step
from harness.base.jsonio import plain_dict, seal, write_json_atomic
from harness.base.overlap import prefetch
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.backend_facts import BackendFacts
from harness.data.schemas.files import RunLayout
from harness.data.schemas.results import Score, ShapeScore
from harness.data.shape import EXACT, Shape, lane_name
from harness.data.tolerances import Tolerances
from harness.evidence.kind import ShapeEvidence, ShapeFinish, ShapeSetting, with_evidence
from harness.evidence.kind_registry import REQUESTS, kinds, loaded_specs
from harness.evidence.refusal import ScoreFacts, with_cause
from harness.host.environment import differences, numerics_differences
from harness.judging.lane_scoring import LaneScorer, op_limits, packing_effect, shape_result
from harness.judging.reproduction import REPORT_ONLY, reproduction, reproduction_scorer
from harness.judging.sensitivity import sensitivity
from harness.throughput.host_share import DeviceTime, host_entry
from harness.throughput.timing import summarize_calls

FORMAT = 2
BATCH_BLOCKS = 32


def check_comparable(golden: Golden, run: Run, lanes: Sequence[str]) -> list[str]:
    """The run's blocks (in golden order), or one error naming both sides of what differs; ``lanes`` are
    opened (their files hashed at once, the exact lane's with them) once the manifests agree."""
    if run.golden_id != golden.golden_id or run.manifest.golden_manifest_sha256 != golden.manifest_sha256:
        raise ScoringError(
            f"run {run.run_id} was made against golden {run.golden_id}, not {golden.golden_id} "
            f"({golden.path}): score it against the golden it ran against"
        )
    if golden.fingerprint != run.fingerprint:
        raise ScoringError(
            f"run {run.run_id} was made with model {run.fingerprint[:16]}..., golden "
            f"{golden.golden_id} with {golden.fingerprint[:16]}...: not comparable"
        )
    if golden.geometry != run.geometry:
        raise ScoringError(f"run {run.run_id} and golden {golden.golden_id} declare different geometries")
    order = {b: i for i, b in enumerate(golden.block_ids())}
    run.open_lanes(lanes)
    ids = run.block_ids()
    strays = [b for b in ids if b not in order]
    if strays:
        raise ScoringError(f"run {run.run_id} holds block {strays[0]!r}, which golden {golden.golden_id} does not")
    return sorted(ids, key=order.__getitem__)


class Scoring:
    """The accumulating half of a score: every scorer of every lane, fed batch by batch (the golden's
    outputs and every lane's of the same blocks, ``BATCH_BLOCKS`` at a time in golden order), then
    :meth:`finish`, the small end (verdicts, the call log's pass, the body). :func:`score_run` feeds it
    from a finished run's files; :mod:`harness.pipeline.live_score` from the run's sink while the lanes
    run (the nightly): one body, built in one place, whichever fed it.

    ``layout``: what scoring reads of the run manifest (:class:`RunLayout`): the run's, or, before the run
    exists, the one it will be written with (:meth:`finish` compares them)."""

    def __init__(self, golden: Golden, layout: RunLayout, tolerances: Tolerances) -> None:
        self.layout, self.tolerances = layout, tolerances
        self.shapes = shapes = list(layout.shapes)
        self.kinds = kinds()  # every kind of evidence, in order (harness.evidence.kind_registry)
        names = [EXACT, *(lane_name(k) for k in shapes)]
        names += [lane for kind in self.kinds for k in shapes for lane in kind.lanes(layout, Shape(k))]
        self.names = names
        self.ops = ops = [Op(o) for o in layout.ops]
        g, self.voiceprint_inputs, floors = golden.geometry, layout.voiceprint_inputs, golden.floors()
        voiceprint_inputs = self.voiceprint_inputs
        self.limits = limits = op_limits(tolerances, ops, floors)
        self.verdict_scorers = {k: LaneScorer(k, ops, g, limits, voiceprint_inputs) for k in shapes}
        self.effect_scorers = {
            k: LaneScorer(k, ops, g, op_limits(REPORT_ONLY, ops, None, False), VoiceprintInputs.CHAINED) for k in shapes
        }
        self.exact_scorer = reproduction_scorer(ops, g, floors, tolerances, VoiceprintInputs.ISOLATED)
        self.evidence: dict[int, list[ShapeEvidence]] = {}
        for k in shapes:
            setting = ShapeSetting(k, tuple(ops), g, tolerances, floors, limits, voiceprint_inputs, layout)
            self.evidence[k] = [s for kind in self.kinds if (s := kind.scorer(setting)) is not None]

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        """One batch: the golden's outputs and every lane's (``names``) of the same blocks, in golden order."""
        exact = lanes[EXACT]
        self.exact_scorer.add(gold, exact)
        for k in self.shapes:
            lane = lanes[lane_name(k)]
            self.verdict_scorers[k].add(gold, lane)
            self.effect_scorers[k].add(exact, lane)
            for scorer in self.evidence[k]:
                scorer.add(gold, lanes)

    def finish(self, golden: Golden, run: Run, ids: list[str]) -> Score:
        """The sealed score (frozen) of ``run``, whose blocks ``ids`` (golden order, as
        :func:`check_comparable` gave them) were every one added; reads the run's call log once."""
        if run.manifest.layout() != self.layout:
            raise ScoringError(
                f"run {run.run_id}: its lanes are not the ones this score was accumulated for "
                f"({self.layout.model_dump(mode='json')} vs {run.manifest.layout().model_dump(mode='json')}): "
                "score it again with `harness score`"
            )
        shapes, voiceprint_inputs, tolerances = self.shapes, self.voiceprint_inputs, self.tolerances
        gm, rm = golden.manifest, run.manifest
        env_diff = differences(gm.environment.model_dump(mode="json"), rm.environment.model_dump(mode="json"))
        env_diff += numerics_differences(dict(gm.numerics.in_force), dict(rm.numerics.in_force))
        verification = reproduction(
            golden.golden_id,
            self.exact_scorer.verdicts(),
            gm.reproducibility.bitwise,
            golden.fingerprint == run.fingerprint,
            env_diff,
        )
        # what every kind counts in the call log (full k-block requests, where each block sat), and every logged
        # call's time (the host share, harness.throughput.host_share): one pass over the call log
        counted = {kind.name: c for kind in self.kinds if (c := kind.counter(self.layout, ids)) is not None}
        device = DeviceTime()
        calls: Iterable[Mapping[str, Any]] = device.observe(run.iter_calls())
        for counter in counted.values():
            calls = counter.observe(calls)
        throughput = summarize_calls(calls)
        laws = rm.laws.model_dump(mode="json")
        shape_results: dict[str, ShapeScore] = {}
        for k in shapes:
            verdicts = self.verdict_scorers[k].verdicts()
            requests = REQUESTS.entry(counted, k, verdicts, len(ids))
            result = shape_result(k, verdicts, requests, laws, packing_effect(self.effect_scorers[k].verdicts()))
            finish = ShapeFinish(verdicts, counted, rm)
            for scorer in self.evidence[k]:
                result = scorer.apply(result, finish)
            result = with_evidence(result, {"sensitivity": sensitivity(result, self.limits)})
            shape_results[str(k)] = with_cause(k, result, ScoreFacts(laws, verification))
        verdict = "pass" if verification.passed and all(s.verdict == "pass" for s in shape_results.values()) else "fail"
        host = host_entry(rm.lanes_wall_s, device.seconds, len(ids))
        body = {
            "kind": "harness.score",
            "format": FORMAT,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "release": golden.release,
            "golden": {"id": golden.golden_id, "path": str(golden.path), "manifest_sha256": golden.manifest_sha256},
            "run": {
                "id": run.run_id,
                "path": str(run.path),
                "manifest_sha256": rm.manifest_sha256,
                "created": rm.created,
            },
            "fingerprint": golden.fingerprint,
            "model": gm.model.model_dump(mode="json"),
            "device_kind": run.device_kind,
            "numerics_profile": rm.numerics_profile,
            "numerics": rm.numerics.model_dump(mode="json"),
            "environment": rm.environment.model_dump(mode="json"),
            "mode": voiceprint_inputs,
            "pad_to_fixed": rm.pad_to_fixed,
            "packer": rm.packer,
            "laws": laws,
            "corpus": {**gm.corpus.model_dump(mode="json"), "blocks": len(ids)},
            "reproducibility": gm.reproducibility.model_dump(mode="json"),
            "tolerances": tolerances.model_dump(),
            "shapes": {k: s.model_dump(mode="json") for k, s in shape_results.items()},
            "verification": verification.model_dump(mode="json"),
            "throughput": throughput,
            "exact_timing_source": "this run (interleaved)",
            "verdict": verdict,
            # absent from a run before --arrangements/--repeats: so from its score
            **(
                {}
                if rm.evidence is None
                else {"evidence": rm.evidence.model_dump(mode="json", include={"arrangements", "repeats", "seed"})}
            ),
            "backend": BackendFacts.of(rm.backend).model_dump(mode="json"),
            # absent from a run before it (or merged shards): so from its score
            **({} if host is None else {"host": host}),
            # the team's kinds that scored it ([evidence] kinds): promotion loads the same
            **({"evidence_kinds": list(loaded_specs())} if loaded_specs() else {}),
        }
        # sealed over the same canonical JSON as the file (its digest), then typed: the model dumps to it again
        return Score.model_validate(seal(plain_dict(body), "digest"))


def score_run(golden: Golden, run: Run, tolerances: Tolerances) -> Score:
    """Judge every lane of ``run`` against ``golden`` from the run's files (see module doc); the sealed score
    (frozen). ``harness score`` and the sharded or merged nightly score this way; the one-process nightly
    accumulates the same :class:`Scoring` while its lanes run (:mod:`harness.pipeline.live_score`)."""
    scoring = Scoring(golden, run.manifest.layout(), tolerances)
    names = scoring.names
    with step("check run"):
        ids = check_comparable(golden, run, names)
    reader = golden.outputs()

    def batches() -> Iterator[tuple[LaneOutputs, dict[str, LaneOutputs]]]:
        for start in range(0, len(ids), BATCH_BLOCKS):
            chunk = ids[start : start + BATCH_BLOCKS]
            yield reader.select(chunk), {name: run.lane(name).select(chunk) for name in names}

    with step("score"):
        # the next batch is read (decoded, checksummed) while this one is scored
        for gold, lanes in prefetch(batches(), name="score-reader"):
            check_interrupted()  # here, in the main thread: a signal is only seen there
            scoring.add(gold, lanes)
    return scoring.finish(golden, run, ids)


def write_score(path: Path, score: Score) -> Path:
    check_output_file(path, "score file")
    return write_json_atomic(path, score.model_dump(mode="json"))
