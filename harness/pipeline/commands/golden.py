"""``harness golden``: ``record``, ``verify``, ``show``, ``diff`` and ``adopt``, one function each, answering
with an :class:`~harness.pipeline.answer.Answer`.

The CLI only parses options and prints (:mod:`harness.cli.golden_cmds`); everything a command does (in which
order, what it checks before long work) is here, so it is testable without a shell and used the same way by
``nightly``, ``demo`` and the benchmarks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from golden.locate import refuse_folder_of_goldens
from golden.store import load_golden
from harness.base.destinations import check_output_dir
from harness.base.fsio import safe_name
from harness.corpus.synth import iter_synth_blocks
from harness.data.corpus_reader import CorpusReader
from harness.data.ops import Op
from harness.data.schemas.config_file import (
    ConfigFile,
    ReleaseSection,
)
from harness.judging.binomial import needed_at_zero
from harness.pipeline.adopt import check_regeneration
from harness.pipeline.answer import Answer
from harness.pipeline.backends import IN_PROCESS, BackendChoice, load_model, make_backend, model_geometry
from harness.pipeline.distributed import import_ray
from harness.pipeline.golden_counts import counts_line, golden_counts
from harness.pipeline.model_match import check_before_building, check_fingerprint, check_geometry
from harness.pipeline.ray_jobs import RecordTarget, record_ray
from harness.pipeline.record import GoldenChanges, adopt_hint, model_release_name, record_golden, verify_golden
from harness.pipeline.shard_worker import WorkerSpec
from harness.progress import progress_bar
from lanes.models.diar_nn_g.config import CONFIGS
from lanes.models.model_api import describe

if TYPE_CHECKING:
    from golden.store import Golden
    from harness.data.corpus_schema import CorpusRow
    from harness.data.geometry import Geometry
    from harness.data.schemas.config_file import ConfigFile
    from harness.pipeline.distributed import RayOptions


def _corpus_rows(corpus: Path | None, cfg: ConfigFile, geometry: Geometry) -> tuple[Iterator[CorpusRow], int]:

    if corpus is not None:
        reader = CorpusReader(corpus, geometry)
        return reader.rows(), len(reader)
    rows = iter_synth_blocks(geometry, cfg.corpus.blocks, seed=cfg.corpus.seed, step=cfg.corpus.step or None)
    return rows, cfg.corpus.blocks


def record(
    cfg: ConfigFile,
    corpus: Path | None,
    goldens: Path,
    release: str | None,
    regen: bool,
    backend: BackendChoice | str,
    progress: bool,
    ray: RayOptions | None = None,
) -> Answer:

    if release is not None:
        safe_name(release, "--release")
    if ray is not None:
        import_ray()  # before anything is created: without Ray, one line saying how to install it
    check_output_dir(goldens, "golden folder", [("--corpus", corpus), ("--config", cfg.source)])
    if ray is not None:  # the driver builds no backend; a plug-in's name is read from the model on CPU
        name = release if release is not None else release_name(cfg, lambda: describe(load_model(cfg, "cpu")))
        if regen:
            check_regeneration(goldens / name, model_geometry(cfg))  # before any work: what adopt would refuse
        gold, changes = record_on_ray(cfg, corpus, goldens, name, regen, backend, progress, ray)
    else:
        be = make_backend(cfg, backend)
        # the backend's environment answer (its own JSON object; Triton's for a server): the model under "model"
        name = release if release is not None else release_name(cfg, lambda: be.environment()["model"])
        if regen:
            check_regeneration(goldens / name, be.geometry)  # before any work: what adopt would refuse
        rows, n = _corpus_rows(corpus, cfg, be.geometry)
        with progress_bar(
            f"golden record ({n} blocks, exact lane x2)",
            2 * 3 * n,
            progress,
            announce=f"writing to {goldens}/ (the golden at {goldens / name}/ when done)",
        ) as tick:
            gold, changes = record_golden(goldens, name, rows, be, cfg, regen=regen, progress=tick)
    repro = gold.manifest.reproducibility
    floor = (
        "bitwise"
        if repro.bitwise
        else "NOT bitwise, noise floor "
        + ", ".join(f"OP {op} max_abs {v.max_abs:.3g} ({v.max_ulp} ULP)" for op, v in repro.ops.items())
    )
    lines = [f"recorded golden {gold.golden_id} at {gold.path} ({gold.blocks} blocks; exact lane reproduced {floor})"]
    lines += recorded_lines(gold, cfg)
    module_floors = gold.manifest.module_floors  # harness.localisation.module_floors
    if skipped := module_floors.skipped if module_floors is not None else None:
        lines.append(f"module noise floors not recorded: {skipped}; localisation will use one ulp of each scale")
    if serial := module_floors.serial if module_floors is not None else None:
        lines.append(f"module noise floors measured one pass after another (the same figures, slower): {serial}")
    if changes is not None:
        lines.append("changes against the previous golden: " + changes.to_json())
        if changes.fingerprint_changed:
            lines.append(
                f"the model changed ({gold.manifest.model.name}, fingerprint {gold.fingerprint[:16]}...): once "
                "adopted, the new model starts unpromoted and the old model's promotions stay with it in the ledger"
            )
        lines.append(adopt_hint(gold.path))
    return Answer.of(lines)


def recorded_lines(gold: Golden, cfg: ConfigFile) -> list[str]:
    """What the golden recorded to judge, per OP, and a warning for an OP with fewer units than the sample-size
    bound of this configuration's tolerances needs (no packed shape could pass it on this corpus)."""

    counts = golden_counts(gold)
    lines = [f"recorded per OP: {counts_line(counts)}"]
    frames = gold.geometry.frames_per_window
    for op, (n, unit) in counts.items():
        if op is Op.SEGMENTATION:
            rate, key = cfg.tolerances.op0.max_flip_rate, "max_flip_rate"
            have, what = n * frames, "audio frames (at most)"
        else:
            rate, key = (
                (cfg.tolerances.op1 if op is Op.VOICEPRINT else cfg.tolerances.op2).max_failed_row_rate,
                "max_failed_row_rate",
            )
            have, what = n, unit
        need = needed_at_zero(float(rate))
        if need is not None and have < need:
            lines.append(
                f"warning: OP {int(op)}: {have:,} {what}, fewer than the {need:,} the sample-size bound needs "
                f"([tolerances.op{int(op)}] {key} = {rate}): no packed shape can pass OP {int(op)} on this "
                "corpus; record more blocks"
            )
    return lines


def release_name(cfg: ConfigFile, model: Callable[[], dict[str, object]]) -> str:
    """The configured release name; for a plug-in left at the default name, the model's own name
    (a plug-in's golden is not the reference model's), from ``model()`` (its description: the model's own
    JSON object, as the backend's environment records it under ``model``), called only then."""
    import re

    if cfg.release.name != ReleaseSection().name or cfg.model.spec in CONFIGS:
        return cfg.release.name

    name = model_release_name(model())  # a TorchScript file's stem: goldens/tiny, not goldens/tiny.pt
    return safe_name(re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-.") or "model", "release name")


def record_on_ray(
    cfg: ConfigFile,
    corpus: Path | None,
    goldens: Path,
    name: str,
    regen: bool,
    backend: BackendChoice | str,
    progress: bool,
    ray: RayOptions,
) -> tuple[Golden, GoldenChanges | None]:
    """``golden record --ray``: the workers build the model; this process only needs its geometry."""

    choice = BackendChoice(backend) if isinstance(backend, str) else backend
    geometry = model_geometry(cfg)
    rows, _ = _corpus_rows(corpus, cfg, geometry)
    return record_ray(cfg, rows, RecordTarget(goldens, name, regen), ray, WorkerSpec(cfg, choice), geometry, progress)


def verify(cfg: ConfigFile, golden_path: Path, backend: BackendChoice | str, progress: bool) -> Answer:

    gold = load_golden(golden_path)  # instant: a folder of goldens, a tampered manifest, before the model is built
    url = backend if isinstance(backend, str) else backend.url
    in_process = url in IN_PROCESS
    model = f"model {cfg.model.spec!r}" if in_process else f"the model served at {url}"
    check_before_building(gold, cfg.model.spec, in_process)
    be = make_backend(cfg, backend)
    check_geometry(gold, be.geometry, model)  # a plug-in's, a server's: before any block runs
    check_fingerprint(gold, be.fingerprint, model)
    with progress_bar("golden verify", 3 * gold.blocks, progress) as tick:
        result = verify_golden(gold, be, cfg, progress=tick)
    return Answer.of([result.summary], held=result.passed)


def golden_show(golden: Path, as_json: bool, no_hash: bool) -> Answer:
    """The golden described (or its manifest's JSON), its files' content checked unless ``no_hash``."""
    from golden.store import load_golden  # deferred: imports numpy, pyarrow, pydantic (start-up)
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        CONTENT_NOT_CHECKED,
        check_golden_content,
        describe_golden,
    )

    refuse_folder_of_goldens(golden, "GOLDEN")
    gold = load_golden(golden)
    hashed = None if no_hash else check_golden_content(gold)
    if as_json:
        notes = [f"{golden}: {CONTENT_NOT_CHECKED}"] if hashed is None else []
        return Answer.of([json.dumps(gold.manifest.model_dump(mode="json"), indent=1, sort_keys=True)], notes=notes)
    return Answer.of(describe_golden(gold, hashed))


def golden_diff(cfg: ConfigFile, a: Path, b: Path, as_json: bool, out: Path | None) -> Answer:
    """B's exact lane judged against A's; fails when some OP differs beyond the tolerances."""
    from harness.pipeline.golden_diff import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        as_json as diff_json,
    )
    from harness.pipeline.golden_diff import run_diff  # deferred: imports numpy, pyarrow, pydantic (start-up)

    result, lines = run_diff(a, b, cfg.tolerances, out)
    shown = [json.dumps(diff_json(result), indent=1, sort_keys=True)] if as_json else lines
    return Answer.of(shown, held=not result.differing_ops)


def adopt(regen: Path) -> Answer:
    """``harness golden adopt``: a regenerated golden becomes the golden of its release, in one step."""
    from harness.pipeline.adopt import adopt_golden  # deferred: imports numpy, pyarrow, pydantic (start-up)

    return Answer.of(adopt_golden(regen))
