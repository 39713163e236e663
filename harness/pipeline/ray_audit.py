"""``harness audit CAPTURE --ray``: the audit's exact lane on Ray workers, the judging in this process.

The laws stay here, in the driver (:func:`harness.pipeline.audit.judge_capture` runs them first:
they are cheap, and a broken law must stop the audit before any model is built anywhere). What
costs is re-running every captured block alone on the golden model. That is what is sharded: the
capture's requests are cut into consecutive shards of whole requests, even in blocks
(:func:`harness.corpus.shards.request_ranges`); each shard goes to a worker holding the model
(:mod:`harness.pipeline.distributed`: one per GPU or per ``--threads`` CPUs, built once, restarted by
Ray when it dies, the shard it held rerun), which reads its requests straight from the capture and
writes the exact outputs of their blocks to one ``.npz`` per attempt in the shared ``--out``.

The driver then walks the capture once more, in file order, and scores each block's served output
against its shard's exact output with the same judges, batch for batch, in the same order as the
one-process audit: ``audit.json``, ``junit.xml`` and the report are that audit's, apart from the
time they were made; ``ray.json`` records who ran which shard. Memory: a worker holds one shard's
exact outputs; the driver reads them one block at a time.

Why an ``.npz`` and not a golden directory: the exact outputs of an audit are scratch, read once by
the driver and removed; keys and the golden model travel in the same file, so a shard's result is
one atomic rename.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.base.errors import HarnessError, step
from harness.base.fsio import atomic_file
from harness.base.jsonio import write_json_atomic
from harness.capture.capture_laws import Survey, blocks_of
from harness.capture.reader import CaptureReader
from harness.capture.schema import CapturedRequest
from harness.corpus.shards import RequestRange, request_ranges
from harness.data.blocks import Block
from harness.data.schemas.audit import GoldenModel
from harness.data.schemas.config_file import ConfigFile
from harness.host.backend_answer import BackendAnswer
from harness.host.environment import machine_environment, shard_conflict
from harness.packers.packing import Packer
from harness.pipeline.audit import AUDIT, AuditOutcome, judge_capture
from harness.pipeline.audit_rerun import InProcessRerun, check_geometry
from harness.pipeline.backends import model_geometry
from harness.pipeline.distributed import (
    RayOptions,
    import_ray,
    new_job_root,
    remove_job_root,
    run_shards,
)
from harness.pipeline.shard_worker import ShardJob, WorkerSpec
from lanes.backends.backend_numerics import under_backend_numerics

if TYPE_CHECKING:
    from numpy.lib.npyio import NpzFile

    from lanes.backends.backend_api import Backend


def audit_on_ray(
    cfg: ConfigFile,
    capture: Path,
    out: Path,
    options: RayOptions,
    progress: bool = True,
    spec: WorkerSpec | None = None,
) -> AuditOutcome:
    """``harness audit --ray``: Ray is checked first (one line saying how to install it), then the audit,
    its exact lane on the workers; ``ray.json`` beside ``audit.json``."""
    import_ray()
    rerun = RayRerun(cfg, Path(out), options, spec or WorkerSpec(cfg), progress)
    outcome = judge_capture(capture, out, cfg, rerun, progress)
    if rerun.facts is not None:  # None: a law stopped the audit before any worker started
        # the outcome's files by name (what the CLI prints); ray.json: the shards' run facts (free-form JSON)
        outcome.paths["ray"] = write_json_atomic(
            Path(out) / "ray.json", {**rerun.facts, "audit": str(Path(out) / AUDIT)}
        )
        assert rerun.job_root is not None  # set before the facts
        remove_job_root(rerun.job_root)
    return outcome


@under_backend_numerics  # the worker's settings for the shard, given back after it (the rerun's own scope is inside)
def audit_shard(
    backend: Backend, packer: Packer, config: ConfigFile, shard: RequestRange, shard_dir: Path, capture: str
) -> Path:
    """On a worker: every block of the shard's requests re-run alone (the exact lane, as in one process:
    :class:`InProcessRerun` on the worker's model, which the worker keeps), written in order."""
    reader = CaptureReader(capture)
    rerun = InProcessRerun(config, lambda: backend)
    golden = rerun.start(reader, None)
    keys: list[str] = []
    arrays: list[np.ndarray] = []
    for request in reader.requests(shard.rows):
        blocks = blocks_of(request, reader.geometry)
        exact = rerun.exact(request, blocks)
        keys += [block_key(request, b.id) for b in blocks]
        arrays += [exact[b.id] for b in blocks]
    if len(keys) != shard.blocks:
        raise HarnessError(
            f"{capture}: requests {shard.first}..{shard.stop - 1} hold {len(keys)} blocks, "
            f"{shard.blocks} when the audit began: the capture changed while it was audited"
        )
    path = Path(shard_dir) / f"exact-{os.getpid()}-{secrets.token_hex(3)}.npz"  # one per attempt
    return write_exact(path, keys, arrays, golden, machine_environment(BackendAnswer.of(backend.environment())))


def write_exact(
    path: Path,
    keys: Sequence[str],
    arrays: Sequence[np.ndarray],
    golden: GoldenModel,
    environment: Mapping[str, object],
) -> Path:
    """A shard's result, atomically: its blocks' keys and exact outputs in order, what re-ran them and on
    which software (torch, CUDA, driver: shards must agree, as merged nightly shards must)."""
    with atomic_file(path) as tmp, open(tmp, "wb") as f:
        exact = {f"b{i:06d}": a for i, a in enumerate(arrays)}
        # numpy 2's stub also matches **exact against savez(allow_pickle: bool); no key of it is named so
        np.savez(
            f,
            keys=np.array(keys, dtype=str),
            golden=np.array(golden.model_dump_json()),
            environment=np.array(json.dumps(environment)),
            **exact,  # type: ignore[arg-type]
        )
    return path


def block_key(request: CapturedRequest, block_id: str) -> str:
    """How the audit names a captured block (``<request id>/<block id>``)."""
    return f"{request.request_id}/{block_id}"


class RayRerun:
    """:class:`harness.pipeline.audit_rerun.Rerun` on Ray: ``start`` runs every shard, ``exact`` reads their
    results back in file order, one block at a time."""

    label = "scored against their re-run on Ray"

    def __init__(self, cfg: ConfigFile, out: Path, options: RayOptions, spec: WorkerSpec, progress: bool) -> None:
        self.cfg, self.out, self.options, self.spec, self.progress = cfg, out, options, spec, progress
        self.facts: dict[str, Any] | None = None  # run_shards' facts of the job: ray.json's free-form JSON
        self.job_root: Path | None = None
        self.files: list[Path] = []
        self.shard, self.pos = 0, 0  # the next shard file to open; the next block in the open one
        self.keys: list[str] = []
        self.npz: NpzFile | None = None

    def start(self, reader: CaptureReader, survey: Survey) -> GoldenModel:

        check_geometry(reader, model_geometry(self.cfg), self.cfg)  # before any worker starts
        with step("cut the capture in shards"):
            sizes = reader.block_counts()
        self.job_root = new_job_root(self.out / "shards", "audit")
        job = ShardJob("audit", audit_shard, {"capture": str(reader.path.resolve())})
        with step("exact lane on Ray"):
            results, facts = run_shards(
                self.options, self.spec, job, lambda n: request_ranges(sizes.tolist(), n), self.job_root, self.progress
            )
        self.files = [r.written for r in results]
        golden = self.golden_model_of_shards(survey)
        self.facts = facts
        return golden

    def golden_model_of_shards(self, survey: Survey) -> GoldenModel:
        """Every shard re-ran on the same model, device kind, numerics and numeric software (a mixed
        cluster would mix them: refused, by the rule that refuses merging such nightly shards), and
        together they hold every block."""
        models: list[GoldenModel] = []
        environments: list[Mapping[str, object]] = []
        blocks = 0
        for path in self.files:
            with np.load(path, allow_pickle=False) as npz:
                # an npz archive's members, by the names write_exact gave them
                models.append(GoldenModel.model_validate_json(str(npz["golden"])))
                environments.append(json.loads(str(npz["environment"])))  # the archive's member, by name
                blocks += len(npz["keys"])  # the archive's member, by name
        for i, model in enumerate(models[1:], start=2):
            if model != models[0]:
                differs = sorted(k for k in GoldenModel.model_fields if getattr(model, k) != getattr(models[0], k))
                raise HarnessError(
                    f"audit on Ray: shard {i}/{len(models)} re-ran its blocks with another "
                    f"{', '.join(differs)} than shard 1 ({model.device_kind} vs "
                    f"{models[0].device_kind}): one audit re-runs on one kind of device "
                    "(ray.accelerator)"
                )
            why = shard_conflict(
                model.device_kind,
                _as_manifest(model, environments[i - 1]),
                models[0].device_kind,
                _as_manifest(models[0], environments[0]),
            )
            if why:
                raise HarnessError(
                    f"audit on Ray: shard {i}/{len(models)} re-ran its blocks with other software "
                    f"than shard 1: {why}; one audit re-runs on one software stack (pin the "
                    "cluster's image)"
                )
        if blocks != survey.blocks:
            raise HarnessError(
                f"audit on Ray: the shards re-ran {blocks} blocks, the capture holds {survey.blocks}: "
                "the capture changed while it was audited"
            )
        return models[0]

    def exact(self, request: CapturedRequest, blocks: list[Block]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for block in blocks:
            key, array = self._next()
            if key != block_key(request, block.id):
                raise HarnessError(
                    f"{self.files[self.shard - 1]}: holds block {key!r} where the capture holds "
                    f"{block_key(request, block.id)!r}: the capture changed while it was audited"
                )
            out[block.id] = array
        return out

    def _next(self) -> tuple[str, np.ndarray]:
        """The next block's key and exact output, opening the next shard's file when one is read."""
        while self.npz is None or self.pos == len(self.keys):
            self.close()
            if self.shard == len(self.files):
                raise HarnessError("audit on Ray: the shards hold fewer blocks than the capture")
            self.npz = np.load(self.files[self.shard], allow_pickle=False)  # members by name (write_exact)
            # the archive's member by the name write_exact gave it
            self.keys, self.pos, self.shard = [str(k) for k in self.npz["keys"]], 0, self.shard + 1
        key, array = self.keys[self.pos], self.npz[f"b{self.pos:06d}"]
        self.pos += 1
        return key, array

    def close(self) -> None:
        if self.npz is not None:
            self.npz.close()
            self.npz = None


# the JSON shape shard_conflict reads of a manifest (a run's or a golden's, as dumped)
def _as_manifest(model: GoldenModel, environment: Mapping[str, object]) -> dict[str, Any]:
    """A shard's golden model and environment in the shape :func:`harness.host.environment.shard_conflict` reads."""
    return {"environment": environment, "numerics": {"in_force": model.numerics_in_force}}
