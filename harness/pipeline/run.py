"""Running the lanes over a golden's corpus into a run directory (streamed, batch by batch)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from golden.manifest import PendingHashes
from golden.runs import Run, RunWriter, load_run, new_run_id
from golden.store import Golden
from harness.base.errors import HarnessError, step
from harness.corpus.shards import BlockRange, Shard
from harness.data.geometry import Geometry
from harness.data.outputs import LaneOutputs
from harness.data.schemas.config_file import ConfigFile
from harness.data.schemas.files import RunLayout
from harness.data.shape import Shape
from harness.host.environment import provenance
from harness.packers.packing import HARNESS_PACKER, Packer
from harness.pipeline.backends import IN_PROCESS
from harness.pipeline.laws_gate import DEFAULT_EXAMPLES, judge_laws
from lanes.backends.backend_numerics import under_backend_numerics
from lanes.running.arrangers import manifest_evidence, variants_for
from lanes.running.neighbour_controls import NeighbourControls
from lanes.running.run_plan import RunPlan, check_request_sizes
from lanes.running.runner import LaneHooks, run_lanes

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend

Progress = Callable[[int], None]
Sink = Callable[[str, LaneOutputs], None]  # one lane's outputs of one group (lanes.running.runner's sink)


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_shapes` runs, beside what (the golden, the plan, the configuration): the fast lane's
    ``packer``; one ``shard`` of the corpus (None: all of it); the ``progress`` tick; the ``run_id`` (None: a
    new one); ``corpus_verified``: the caller checked the corpus's sha256 (a Ray driver, once for every shard);
    ``laws_examples`` per packing law (0: not judged); the ``observer`` given every lane's outputs of every group
    after the run's writer (the nightly's live score); ``on_first_queued``: :func:`lanes.running.runner.run_lanes`' hook
    (a scoring caller warms its kernels there)."""

    packer: Packer = HARNESS_PACKER
    shard: Shard | BlockRange | None = None
    progress: Progress | None = None
    run_id: str | None = None
    corpus_verified: bool = False
    laws_examples: int = DEFAULT_EXAMPLES
    observer: Sink | None = None
    on_first_queued: Callable[[], object] | None = None


def plan_for(config: ConfigFile, shapes: tuple[int, ...] | None = None, pad_to_fixed: bool | None = None) -> RunPlan:
    ks, ev = tuple(Shape(k) for k in (shapes if shapes is not None else config.shapes.candidates)), config.evidence
    return RunPlan(
        shapes=ks,
        release_shapes=config.release_shapes,
        voiceprint_inputs=config.lanes.voiceprint_inputs,
        pad_to_fixed=config.shapes.pad_to_fixed if pad_to_fixed is None else pad_to_fixed,
        include_exact=True,
        mask_policy=config.masks,
        warmup_packed=packed_warm_up(config),
        variants=variants_for(ks, ev.arrangements, ev.repeats, ev.seed, ev.neighbours),
    )  # [evidence] (lanes.running.arrangers)


def neighbour_controls(plan: RunPlan, config: ConfigFile, geometry: Geometry) -> NeighbourControls | None:
    """The control repeats of the plan's neighbour lanes (None: no neighbour lane)."""
    fills = {v.k: v.fill for v in plan.variants if v.fill is not None}
    if not fills:
        return None
    return NeighbourControls(config.evidence.neighbour_controls, fills, geometry)


def packed_warm_up(config: ConfigFile) -> bool:
    """Whether the packed shapes warm up too (``[lanes] warm_up``): ``auto`` says yes where a first call pays
    one-off costs worth leaving out of its timing (a GPU: lazy initialisation, cuDNN's autotuning; a server:
    its model's first run), no on an in-process CPU (milliseconds against seconds of network per call)."""
    if config.lanes.warm_up != "auto":
        return config.lanes.warm_up == "every-lane"
    return config.backend.url not in IN_PROCESS or not config.release.device.startswith("cpu")


def scoring_fields(plan: RunPlan, config: ConfigFile) -> RunLayout:
    """The run manifest's fields that scoring reads (shapes, ops, mode, evidence), as :func:`run_shapes` will
    write them: a scorer built before the run (the nightly's live score) is built from the same layout."""
    evidence = manifest_evidence(
        plan.variants, config.evidence.arrangements, config.evidence.repeats, config.evidence.seed
    )  # the variant lanes (lanes.running.arrangers); None: a run without variants keeps today's manifest, key absent
    return RunLayout.model_validate(
        {
            "shapes": list(plan.shapes),
            "ops": [int(op) for op in plan.ops],
            "mode": plan.voiceprint_inputs,  # file key "mode" (the contract): the voiceprint inputs
            "evidence": evidence,
        }
    )


def _teed(first: Sink, also: Sink | None) -> Sink:
    """``first`` (the run's writer), then ``also`` (an observer of every group: the live score)."""
    if also is None:
        return first

    def sink(lane: str, batch: LaneOutputs) -> None:
        first(lane, batch)
        also(lane, batch)

    return sink


def shard_ids(golden: Golden, shard: Shard | BlockRange | None) -> list[str] | None:
    """The blocks of one shard (None: all); refuses a shard that holds none."""
    if shard is None:
        return None
    ids = [b for b in golden.block_ids() if shard.owns(b)]
    if not ids:
        raise HarnessError(f"shard {shard} holds no block of the {golden.blocks}-block corpus; use fewer shards")
    return ids


@contextmanager
def _cancelled_on_failure(pending: PendingHashes) -> Iterator[None]:
    try:
        yield
    except BaseException:
        pending.cancel()
        raise


@under_backend_numerics
def run_shapes(
    golden: Golden,
    backend: Backend,
    plan: RunPlan,
    runs_root: Path,
    config: ConfigFile,
    options: RunOptions = RunOptions(),
) -> Run:
    """The exact lane and every packed shape of ``plan`` over the golden's corpus (or ``options.shard`` of it),
    interleaved, written to a new run directory under ``runs_root``. The fast lane's packer is judged
    on the packing laws first (``options.laws_examples`` per law; 0: not judged) and its verdict recorded as
    the manifest's ``laws``: a packer that breaks them still runs (its evidence is worth reporting),
    but no shape of the run can pass (:mod:`harness.pipeline.laws_gate`). ``options.observer``: given every
    lane's outputs of every group too, after the run's writer (the nightly's live score,
    :mod:`harness.pipeline.live_score`); what it raises fails the run, which is then not written."""
    packer, shard = options.packer, options.shard
    wanted = shard_ids(golden, shard)
    keep = set(wanted) if wanted is not None else None
    check_request_sizes(
        golden.manifest.corpus.max_span_samples,
        len(wanted) if wanted is not None else golden.blocks,
        backend,
        plan,
    )
    # a Future: the harness's packer is judged beside the lanes (laws_gate), joined after them, inside the
    # writer: its error ends the command with its own line and the unfinished run is removed
    laws = judge_laws(packer, options.laws_examples, max(plan.shapes) if plan.shapes else None, beside=True)
    writer = RunWriter(
        Path(runs_root), options.run_id or new_run_id(plan.shapes), golden.geometry, list(plan.ops), plan.lanes()
    )
    controls = neighbour_controls(plan, config, golden.geometry)
    with writer:
        corpus, corpus_hash = golden.corpus_hashed_meanwhile(verified=options.corpus_verified)
        with _cancelled_on_failure(corpus_hash):
            blocks = (b for b, _, _ in corpus.rows(keep) if keep is None or b.id in keep)
            with step("lanes"):
                started = time.perf_counter()
                run_lanes(
                    blocks,
                    backend,
                    plan,
                    _teed(writer.sink, options.observer),
                    golden_inputs=golden.voiceprint_inputs,
                    packer=packer,
                    hooks=LaneHooks(
                        progress=options.progress,
                        log=writer.calls,
                        on_first_queued=options.on_first_queued,
                        controls=controls,
                    ),
                )
                # beside the calls' device time (harness.throughput.host_share)
                lanes_wall_s = time.perf_counter() - started
            describe = getattr(packer, "describe", None)
            scored = scoring_fields(plan, config)  # what scoring reads: the live score was built from the same
            fields = {
                "golden_id": golden.golden_id,
                "golden_manifest_sha256": golden.manifest_sha256,
                **provenance(backend.environment()),
                "config": config.to_dict(),
                "mode": scored.voiceprint_inputs,  # the voiceprint inputs (the file key is "mode")
                "pad_to_fixed": plan.pad_to_fixed,
                "packer": describe() if describe else {"name": packer.name},
                "shapes": list(scored.shapes),
                "shard": str(shard) if shard else None,
                "laws": laws.result().model_dump(),
                "lanes_wall_s": lanes_wall_s,
            }
            # fields: the run manifest's JSON keys, as the run's writer (golden.runs) seals and writes them
            if scored.evidence is not None:  # a run without variants keeps today's manifest, key absent
                fields["evidence"] = scored.evidence.model_dump(mode="json")  # a run manifest key
            if config.evidence.kinds:  # a team's kinds ([evidence] kinds); absent without, as before them
                fields["evidence_kinds"] = list(config.evidence.kinds)  # a run manifest key
            sent = controls.figures() if controls is not None else {}
            if sent:  # absent when no neighbour request moved (or none ran)
                # the run manifest's key, built byte-exactly for the writer
                fields["neighbour_controls"] = {
                    k: {op: f.model_dump(mode="json") for op, f in per_op.items()} for k, per_op in sent.items()
                }
            with step("write run"):
                from harness.packers import check_unchanged  # deferred: imports pyarrow (start-up)

                corpus_hash.wait()  # a run of a corpus that is not the golden's is never kept
                check_unchanged(packer)  # nor one whose packer's files changed while it ran (its identity)
                path = writer.finish(fields)
    return load_run(path, trusted=True)
