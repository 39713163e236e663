"""Recording and verifying goldens: the exact lane run, judged, and stored (streamed, batch by batch).

Recording runs the exact lane twice, interleaved, over the corpus, copying it into the golden as the
lanes read it (validating every block before it is sent: :func:`copied`), writes the first run's
outputs and stores how much the second differed from the first (the noise floor). A golden holding
NaN or Inf is refused: nothing is written (the golden's folder is temporary until the manifest is in).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from golden.calls import CallLog
from golden.lane_reader import LaneReader
from golden.store import (
    CALLS,
    CORPUS,
    Golden,
    golden_path,
    load_golden,
    new_lane_writer,
    seal_golden_manifest,
    write_manifest,
)
from golden.tables import BackgroundWriter
from harness.base.destinations import check_output_dir
from harness.base.errors import GoldenError, step
from harness.base.fsio import atomic_directory
from harness.compute.metrics import start_warming
from harness.data.blocks import Block
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import CorpusRow, CorpusWriter
from harness.data.modes import VoiceprintInputs
from harness.data.ops import ALL_OPS, Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.config_file import ConfigFile
from harness.data.shape import EXACT, lane_name
from harness.data.tolerances import Tolerances
from harness.host.backend_answer import BackendAnswer
from harness.host.environment import differences, machine_environment, numerics_differences, provenance
from harness.judging.lane_scoring import LaneScorer, op_limits
from harness.judging.reproduction import floor_scorer, noise_floor, reproduction, reproduction_scorer
from harness.localisation.module_floors import floor_sampler
from harness.pipeline.golden_counts import refuse_unjudgeable
from lanes.backends.backend_numerics import under_backend_numerics
from lanes.running.run_plan import RunPlan
from lanes.running.runner import LaneHooks, run_lanes

if TYPE_CHECKING:
    from harness.data.geometry import Geometry
    from harness.data.schemas.results import Reproduction
    from lanes.backends.backend_api import Backend

Progress = Callable[[int], None]


def exact_plan(config: ConfigFile, repeats: int, ops: Iterable[Op] | None = None) -> RunPlan:
    return RunPlan(
        shapes=(),
        release_shapes=config.release_shapes,
        voiceprint_inputs=config.lanes.voiceprint_inputs,
        include_exact=True,
        exact_repeats=repeats,
        mask_policy=config.masks,
        ops=tuple(ops) if ops is not None else ALL_OPS,
    )


@under_backend_numerics
def record_golden(
    root: Path,
    release: str,
    corpus_rows: Iterable[CorpusRow],
    backend: Backend,
    config: ConfigFile,
    regen: bool = False,
    progress: Progress | None = None,
    whole: bool = True,
) -> tuple[Golden, GoldenChanges | None]:
    """Record a golden of ``corpus_rows`` ((block, source, provenance) tuples) under ``root/release``.

    Returns the golden and, with ``regen``, a summary of how it differs from the previous one
    (which is kept: the new golden lands beside it). ``whole``: the golden is the release's (not one
    shard of it), so an OP it recorded nothing to judge for is refused (:func:`refuse_unjudgeable`)."""
    start_warming()  # numba's import + kernels behind the first group's reading, not in the first sink
    final, previous = golden_target(root, release, regen)
    check_output_dir(final.parent, "golden folder")
    geometry = backend.geometry
    plan = exact_plan(config, repeats=2)
    with atomic_directory(final) as tmp:
        writer = CorpusWriter(tmp / CORPUS, geometry)
        with step("exact lane x2"), writer:
            calls = CallLog(tmp / CALLS)  # written as the calls happen: memory stays flat
            outputs = BackgroundWriter(new_lane_writer(tmp, geometry, list(plan.ops)))
            floor = floor_scorer(plan.ops, geometry, VoiceprintInputs.ISOLATED)
            exact: list[LaneOutputs] = []  # the exact lane's last group, until its second run's arrives

            def sink(lane: str, batch: LaneOutputs) -> None:
                if lane == EXACT:
                    refuse_non_finite(batch)
                    batch.segmentation.decisions()  # computed once, here: the writer and the floor share them
                    outputs.write(batch)
                    exact[:] = [batch]
                elif lane == lane_name(EXACT, 1):
                    floor.add(exact.pop(), batch)

            try:
                run_lanes(
                    copied(corpus_rows, writer, geometry),
                    backend,
                    plan,
                    sink,
                    hooks=LaneHooks(progress=progress, log=calls),
                )
                summary = writer.close()  # the corpus copy, renamed into place once the lanes have read it whole
            except BaseException:
                outputs.abort()
                calls.abort()
                raise
            assert writer.entry is not None  # close() sets it
            files = {CORPUS: writer.entry, **outputs.close(), CALLS: calls.close()}
        if whole:
            refuse_unjudgeable(files, summary, plan.ops, config.masks, geometry)
        fields = {
            "release": release,
            "geometry": geometry.to_dict(),
            **provenance(backend.environment()),
            "config": config.to_dict(),
            "ops": [int(op) for op in plan.ops],
            "mode": plan.voiceprint_inputs,  # file key "mode" (the contract): the voiceprint inputs
            "corpus": summary.model_dump(),
            "reproducibility": noise_floor(floor.verdicts()),
        }
        with step("module floors"):  # per-module floors: harness.localisation.module_floors
            corpus = CorpusReader(tmp / CORPUS, geometry)
            modules = floor_sampler(getattr(backend, "model", None), corpus, config.localise, plan.ops)
            modules.spill = tmp  # beside the golden being written (not a tmpfs), gone with it
            modules.progress = getattr(progress, "phase", None)  # "module noise floors: OP 1, module 14 of 115"
            modules.note = getattr(progress, "note", None)  # what it decided on its own: one line
            modules.add_inputs(LaneReader(tmp, geometry, plan.ops, decisions=True, where=f"golden {tmp}"))
            fields.update(modules.fields(corpus))
            if modules.progress is not None:
                modules.progress(None)
        write_manifest(tmp, seal_golden_manifest(fields, files))
    golden = load_golden(final)
    changes = golden_changes(previous, golden) if previous is not None else None
    return golden, changes


def copied(rows: Iterable[CorpusRow], writer: CorpusWriter, geometry: Geometry) -> Iterator[Block]:
    """The blocks of ``rows`` as the lanes read them, each written to the golden's corpus copy first (a tee).

    The copy used to be written whole, then read back for the lanes: 365 MB for 256 full-geometry blocks,
    before the first call. Now each block is validated and handed to the writer (its row groups encoded and
    hashed behind, :class:`harness.data.corpus_schema.CorpusWriter`) as the lanes take it, so the copy is
    made while the device runs. The lanes get the block as reading it back would give it (``Block.create``
    of the same arrays: the dtypes the file holds), so the golden is the serial copy's, byte for byte; a
    refused row stops the lanes there (the writer's one line), and the copy appears only once complete."""
    for block, source, prov in rows:
        writer.add(block, source, prov)  # validates: a bad block never reaches the lanes
        yield Block.create(block.id, block.op, block.span, block.offsets, block.valid, geometry)


def golden_target(root: Path, release: str, regen: bool) -> tuple[Path, Golden | None]:
    """Where a recording of ``release`` lands, and the golden it regenerates (kept: the new one lands beside)."""
    final = golden_path(root, release)
    if not final.exists():
        return final, None
    if not regen:
        raise GoldenError(
            f"{final}: a golden for release {release!r} exists; record with --regen to write a "
            "new one beside it, then `harness golden adopt` it (nothing is overwritten)"
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return final.with_name(f"{release}.regen-{stamp}"), load_golden(final)


def adopt_hint(regen: Path) -> str:
    """The line after a ``--regen`` recording: how the nightly starts using it (nothing reads a regen until then)."""
    target = Path(regen).with_name(Path(regen).name.rpartition(".regen-")[0] or Path(regen).name)
    return (
        f"adopt it with: harness golden adopt {regen} (it becomes {target}; the golden there now is kept as "
        f"{target}.history-<its recorded time>)"
    )


def model_release_name(description: dict[str, object]) -> str:
    """A plug-in's default release name from its description: a TorchScript model is named after its
    file (``tiny.pt``), and its golden after the file's stem (``goldens/tiny``), as a factory's is after
    the model's own name."""
    name = str(description.get("name") or "model")  # the model's own description: a JSON object of its keys
    if description.get("kind") == "torchscript":  # its kind, by the same description's key
        return Path(name).stem or name
    return name


def refuse_non_finite(outputs: LaneOutputs) -> None:
    import numpy as np

    seg = outputs.segmentation
    bad = ~np.isfinite(seg.logprobs).all(axis=(2, 3))
    if bad.any():
        b, w = (int(v) for v in np.argwhere(bad)[0])
        raise GoldenError(
            f"refusing to record a golden: OP 0 output of block {seg.block_ids[b]!r} window {w} holds NaN/Inf"
        )
    for op, vp in outputs.voiceprint.items():
        bad_rows = np.flatnonzero(~np.isfinite(vp.embedding).all(axis=1))
        if bad_rows.size:
            i = int(bad_rows[0])
            raise GoldenError(
                f"refusing to record a golden: OP {int(op)} embedding of block {vp.block_ids[i]!r} "
                f"window {int(vp.window[i])} speaker {int(vp.speaker[i])} holds NaN/Inf"
            )


@under_backend_numerics
def verify_golden(
    golden: Golden, backend: Backend, config: ConfigFile, progress: Progress | None = None
) -> Reproduction:
    """Re-run the exact lane over the golden's corpus and judge it against the golden's noise floor."""
    plan = exact_plan(config, repeats=1, ops=golden.ops)
    scorer = reproduction_scorer(
        golden.ops, golden.geometry, golden.floors(), config.tolerances, VoiceprintInputs.ISOLATED
    )
    reader = golden.outputs()

    def sink(lane: str, batch: LaneOutputs) -> None:
        scorer.add(reader.select(batch.block_ids), batch)

    with step("exact lane"):
        run_lanes(
            golden.corpus(),
            backend,
            plan,
            sink,
            golden_inputs=golden.voiceprint_inputs,
            hooks=LaneHooks(progress=progress),
        )
    answer = BackendAnswer.of(backend.environment())  # the backend's environment record, read once
    return judge_reproduction(
        golden, scorer, backend.fingerprint, machine_environment(answer), answer.numerics_in_force or {}
    )


def judge_reproduction(
    golden: Golden,
    scorer: LaneScorer,
    fingerprint: str,
    env_now: Mapping[str, object],
    numerics_now: dict[str, object],
) -> Reproduction:
    diffs = differences(golden.manifest.environment.model_dump(mode="json"), dict(env_now))
    diffs += numerics_differences(dict(golden.manifest.numerics.in_force), numerics_now)
    return reproduction(
        golden.golden_id,
        scorer.verdicts(),
        golden.manifest.reproducibility.bitwise,
        fingerprint == golden.fingerprint,
        diffs,
    )


Metric = float | bool | None  # a regen metric: a flag, a count or a figure (None: not measurable)


class GoldenChangesRecord(TypedDict):
    """:class:`GoldenChanges` as the JSON object the --regen line and a script's summary hold, in that order."""

    old: str
    new: str
    fingerprint_changed: bool
    environment: list[str]
    ops: dict[str, dict[str, Metric]]
    corpus_changed: NotRequired[bool]  # only when it did


@dataclass(frozen=True)
class GoldenChanges:
    """What a regenerated golden changes against the previous one: its ids, whether the model's fingerprint
    changed, the environment's differences, and per OP (keyed "0", "1", "2") the regen metrics; a changed
    corpus (other blocks) ends the comparison with no OP compared."""

    old: str
    new: str
    fingerprint_changed: bool
    environment: list[str]
    ops: dict[str, dict[str, Metric]] = field(default_factory=dict)  # per OP: metric name -> value
    corpus_changed: bool = False

    def to_json(self) -> str:
        """The --regen summary line's JSON."""
        return json.dumps(self.to_dict())

    def to_dict(self) -> GoldenChangesRecord:
        """As a JSON object (``corpus_changed`` only when it did): what the line and a script's summary hold."""
        body: GoldenChangesRecord = {
            "old": self.old,
            "new": self.new,
            "fingerprint_changed": self.fingerprint_changed,
            "environment": self.environment,
            "ops": self.ops,
        }
        return {**body, "corpus_changed": True} if self.corpus_changed else body


def summarize_changes(old: Golden, new: Golden) -> GoldenChangesRecord:
    """:func:`golden_changes` as its JSON object, for a script that writes it into a summary of its own."""
    return golden_changes(old, new).to_dict()


def golden_changes(old: Golden, new: Golden) -> GoldenChanges:
    """What a regenerated golden changes, per OP (for the --regen summary)."""
    environment = differences(
        old.manifest.environment.model_dump(mode="json"), new.manifest.environment.model_dump(mode="json")
    )
    if old.block_ids() != new.block_ids():
        return GoldenChanges(
            old.golden_id, new.golden_id, old.fingerprint != new.fingerprint, environment, corpus_changed=True
        )
    ops = [op for op in new.ops if op in old.ops]
    scorer = LaneScorer(
        "regen", ops, new.geometry, op_limits(Tolerances(), ops, None, sample_bound=False), VoiceprintInputs.ISOLATED
    )
    ids = new.block_ids()
    for start in range(0, len(ids), 32):
        chunk = ids[start : start + 32]
        scorer.add(old.outputs().select(chunk), new.outputs().select(chunk))
    per_op: dict[str, dict[str, Metric]] = {}
    for v in scorer.verdicts():
        keys = (
            ("bitwise", "max_abs_finite", "max_ulp", "argmax_flips_near_tie", "argmax_flips_confident")
            if v.op == 0
            else ("bitwise", "max_abs", "min_cosine", "missing_rows", "extra_rows")
        )
        per_op[str(v.op)] = {k.replace("_finite", ""): v.metrics[k] for k in keys}  # a verdict's metrics: by name
    return GoldenChanges(old.golden_id, new.golden_id, old.fingerprint != new.fingerprint, environment, per_op)
