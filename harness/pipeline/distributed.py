"""Fanning a sharded job out on Ray: one actor per GPU (or CPU worker) holding the model, one Ray task
per shard, a dead worker's shard rerun by Ray, a shard that fails for a harness reason failing the job.

Why Ray and not a scheduler of our own: placing workers on GPUs, restarting a dead worker (on
another node when its node is gone), rerunning the shard it held, and clusters on Kubernetes
(KubeRay) are Ray's job. The harness keeps what is its own: which blocks make a shard
(:func:`harness.corpus.shards.block_ranges`), what a shard writes (a run or golden directory in the
shared ``--out`` folder, with the writers every other command uses) and how shards merge (the
existing merge rules, which refuse shards of different device kinds or numerics).

A :class:`harness.pipeline.shard_worker.ShardJob` names a module-level function that runs one shard on a
worker, given the worker's backend and packer, and returns where the shard's result lies. ``nightly --ray``
and ``golden record --ray`` are such jobs (:mod:`harness.pipeline.ray_jobs`), and so is ``audit --ray``
(:mod:`harness.pipeline.ray_audit`): a shard function, then its own merge.

Faults. A worker killed mid-shard (SIGKILL, the OOM killer, a lost node) is restarted by Ray
(``max_restarts``), which reruns the shard it held (``max_task_retries``); the rerun writes a new
directory beside the lost attempt's leftovers and only the path it returns is merged, so the result
is the same bits. A shard that fails for a harness reason (bad input) *returns* its one-line error
instead of raising: Ray sees no exception to retry (``retry_exceptions`` stays off) and the job
stops with that line. Ray is imported only here, and only when ``--ray`` is given.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.base.errors import HarnessError, one_line
from harness.base.jsonio import read_json, write_json_atomic
from harness.data.schemas import validate
from harness.pipeline.backends import IN_PROCESS
from harness.pipeline.shard_worker import (
    JOB_FILE,
    AnyShard,
    AttemptRecord,
    ShardJob,
    ShardResult,
    ShardWorker,
    WorkerSpec,
)
from harness.progress import progress_bar

RAY_INSTALL = "pip install 'diar-lane-harness[ray]'"
SHARDS_PER_WORKER = 4  # finer shards: a dead worker costs less, progress moves evenly, stragglers matter less


class ShardInternalError(RuntimeError):
    """A shard hit a bug in the harness (exit status 3, like any internal error)."""


def import_ray() -> ModuleType:
    """Ray, or the one line that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise HarnessError(f"--ray: Ray is not installed here ({exc}); install the extra: {RAY_INSTALL}") from None
    return ray


@dataclass(frozen=True)
class RayOptions:
    """``--ray ADDRESS`` and its companions. ``address``: 'local' (start a Ray instance on this machine
    for this job), 'auto' (the cluster this machine belongs to, e.g. started by `ray start`), or a
    cluster's address (ray://head:10001, head:6379)."""

    address: str
    workers: int | None = None  # actors; default: one per GPU (or per --threads CPUs) the cluster offers
    shards: int | None = None  # default: SHARDS_PER_WORKER per worker (never more than the corpus' groups)
    retries: int = 3  # restarts of a dead worker, and reruns of the shard it held
    accelerator: str | None = None  # GPU workers only on nodes of this kind (Ray's accelerator_type: H100, A100)

    def __post_init__(self) -> None:
        if not self.address or not self.address.strip():
            raise HarnessError("--ray: expected 'local', 'auto' or a Ray cluster address (ray://host:10001)")
        for name, value, low in (
            ("ray.workers", self.workers, 1),
            ("ray.shards", self.shards, 1),
            ("ray.retries", self.retries, 0),
        ):
            if value is not None and value < low:
                raise HarnessError(f"{name} {value}: expected a whole number >= {low}")
        if self.accelerator is not None and not self.accelerator.strip():
            raise HarnessError("ray.accelerator: expected a GPU kind as Ray names it, e.g. H100 or A100")


def new_job_root(parent: Path, name: str) -> Path:
    """``<parent>/<job id>/`` with its job file, which every worker must see (a shared folder)."""
    job_id = f"{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
    root = Path(parent) / job_id
    write_json_atomic(root / JOB_FILE, {"kind": "harness.ray-job", "job": name, "id": job_id})
    return root


def remove_job_root(root: Path) -> None:
    """After the merge: the shard results are copies now; the parent goes too unless another job uses it."""
    shutil.rmtree(root, ignore_errors=True)
    with contextlib.suppress(OSError):
        root.parent.rmdir()


def shard_dir(job_root: Path, shard: AnyShard) -> Path:
    return job_root / f"{shard.index:04d}-of-{shard.count:04d}"


def attempts(directory: Path) -> list[AttemptRecord]:
    return [
        validate(AttemptRecord, read_json(p, "shard attempt record"), str(p))
        for p in sorted(directory.glob("attempt-*.json"))
    ]


def run_shards(
    options: RayOptions,
    spec: WorkerSpec,
    job: ShardJob,
    plan: Callable[[int], Sequence[AnyShard]],
    job_root: Path,
    show_progress: bool = True,
) -> tuple[list[ShardResult], dict[str, Any]]:  # the facts: ray.json's JSON object, built to be written
    """Run every shard ``plan(workers)`` gives on Ray; returns the results in shard order and the facts of
    the job (for ``ray.json``). Raises the first failing shard's one line."""
    ray = import_ray()
    started = connect(ray, options, spec)
    actors: list[Any] = []  # Ray actor handles
    begin = time.perf_counter()
    try:
        workers, note = worker_count(ray, options, spec)
        shards = plan(options.shards or SHARDS_PER_WORKER * workers)
        workers = min(workers, len(shards))
        if spec.backend.url in IN_PROCESS and not spec.on_gpu and spec.config.numerics.threads == 0:
            note = ((note + "; ") if note else "") + (
                "numerics.threads = 0 with --ray: each CPU worker runs one torch thread "
                "per CPU of its node, and they compete; set --set numerics.threads=N (it is "
                "part of the numerics profile shapes are promoted under)"
            )
        if note:
            print(f"harness: warning: {note}", file=sys.stderr, flush=True)
        pinned = {"accelerator_type": options.accelerator} if options.accelerator else {}
        remote = ray.remote(ShardWorker).options(
            **spec.resources(), **pinned, max_restarts=options.retries, max_task_retries=options.retries
        )
        actors = [remote.remote(spec) for _ in range(workers)]
        label = f"{job.name} on Ray: {len(shards)} shards, {workers} workers"
        results = dispatch(ray, actors, job, shards, job_root, label, show_progress, options.retries)
        close_actors(ray, actors)
    finally:
        for actor in actors:  # after a failure: at once, cancelling the shards still running
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already dead
                pass
        if started:
            ray.shutdown()
    facts = {
        "kind": "harness.ray-run",
        "job": job.name,
        "address": options.address,
        "workers": workers,
        "accelerator": options.accelerator,
        "resources_per_worker": spec.resources(),
        "max_restarts": options.retries,
        "wall_s": round(time.perf_counter() - begin, 3),
        "shards": [
            {
                "shard": f"{s.index}/{s.count}",
                "blocks": s.blocks,
                "host": r.host,
                "pid": r.pid,
                "seconds": round(r.seconds, 3),
                "path": r.path,
                "attempts": [a.model_dump() for a in attempts(shard_dir(job_root, s))],
            }
            for s, r in zip(shards, results, strict=True)
        ],
    }
    return results, facts


def connect(ray: ModuleType, options: RayOptions, spec: WorkerSpec) -> bool:
    """Join (or start) a Ray instance; True when this call started it (and must shut it down). A caller
    that already initialised Ray (a test, a notebook) keeps its own instance. ``kwargs`` are the keyword
    arguments of Ray's own call."""
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if options.address == "local":
        if options.workers is not None and not spec.on_gpu:
            kwargs["num_cpus"] = options.workers * spec.cpus  # Ray's keyword argument, by its name
        address = "local"
    else:
        address = options.address
    try:
        ray.init(address=address, **kwargs)
    except Exception as exc:  # ConnectionError, ValueError, RuntimeError: Ray's words, on one line
        raise HarnessError(
            f"--ray {options.address}: cannot start or reach a Ray cluster: "
            f"{type(exc).__name__}: {one_line(str(exc), 200)}"
        ) from None
    return True


def worker_count(ray: ModuleType, options: RayOptions, spec: WorkerSpec) -> tuple[int, str | None]:
    """Workers to start: ``--ray-workers`` or as many as the cluster holds now (one per GPU, or per
    --threads CPUs). More than it holds now is allowed (an autoscaler adds nodes), with a warning.
    Ray's resources and nodes are its JSON-like answers: read by the key names Ray gives them."""
    total = ray.cluster_resources()
    if options.accelerator and not spec.on_gpu:
        raise HarnessError(f"ray.accelerator {options.accelerator}: applies to GPU workers (--device cuda)")
    if spec.on_gpu:
        slots, what = int(total.get("GPU", 0)), "GPUs"  # Ray's answer, by its resource names
        if options.accelerator:  # Ray counts each node's GPU kind as a resource 'accelerator_type:<kind>'
            kind = f"accelerator_type:{options.accelerator}"
            slots = sum(  # Ray's nodes, as Ray answers them (their keys and resource names)
                int(n["Resources"].get("GPU", 0))  # Ray's answer
                for n in ray.nodes()
                if n.get("Alive") and kind in n.get("Resources", {})  # Ray's answer
            )
            what = f"{options.accelerator} GPUs"
    else:
        slots, what = int(total.get("CPU", 0) // spec.cpus), f"workers of {spec.cpus} CPU(s)"  # Ray's answer
    if options.workers is None:
        if slots < 1:
            need = "a GPU per worker (--device cuda)" if spec.on_gpu else f"{spec.cpus} CPU(s) per worker"
            raise HarnessError(
                f"--ray {options.address}: the cluster offers no room for a worker: it needs {need}, "
                f"the cluster has {dict(total)}"
            )
        return slots, None
    if options.workers > slots:
        return options.workers, (
            f"ray.workers {options.workers}: the cluster holds {slots} {what} now; the rest "
            "wait until Ray finds room (an autoscaler adding nodes)"
        )
    return options.workers, None


SHARD_WAIT_S = 3600.0  # no shard ended for an hour (the least bound), or ...
SHARD_GAP_FACTOR = 8.0  # ... this many times the longest wait for one so far: the job stops, naming the shards


def dispatch(
    ray: ModuleType,
    actors: list[Any],
    job: ShardJob,
    shards: Sequence[AnyShard],
    job_root: Path,
    label: str,
    show_progress: bool,
    retries: int,
) -> list[ShardResult]:
    """Hand shards to idle workers until none is left; stop at the first failure."""
    pending = list(reversed(shards))
    running: dict[Any, tuple[Any, AnyShard]] = {}  # Ray object ref -> (actor handle, shard)
    done: dict[int, ShardResult] = {}

    def hand(actor: Any) -> None:
        shard = pending.pop()
        running[actor.run.remote(job, shard, str(shard_dir(job_root, shard)))] = (actor, shard)

    for actor in actors:
        if pending:
            hand(actor)
    with progress_bar(label, len(shards), show_progress, unit="shards") as tick:
        last, longest = time.monotonic(), 0.0
        while running:
            bound = max(SHARD_WAIT_S, SHARD_GAP_FACTOR * longest)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=bound)
            if not ready:  # no shard ended for far longer than any took: a worker hangs, or no node has room
                names = ", ".join(str(s) for _, s in list(running.values())[:4])
                raise HarnessError(
                    f"{label}: no shard ended within {bound:.0f} s (running: {names}"
                    f"{'...' if len(running) > 4 else ''}): a worker hangs or the cluster has no room for one; see "
                    "the Ray logs (/tmp/ray/session_latest/logs on the workers' nodes)"
                )
            now = time.monotonic()
            last, longest = now, max(longest, now - last)
            actor, shard = running.pop(ready[0])
            done[shard.index] = result_of(ray, ready[0], shard, retries)
            tick(1)
            if pending:
                hand(actor)
    return [done[s.index] for s in shards]


def result_of(ray: ModuleType, ref: Any, shard: AnyShard, retries: int) -> ShardResult:
    where = f"shard {shard} ({shard.blocks} blocks)"
    try:
        result: ShardResult = ray.get(ref)
    except ray.exceptions.RayError as exc:  # the worker died more often than Ray may restart it, a node lost
        raise HarnessError(
            f"{where}: its Ray worker died and was not brought back after {retries} restart(s) "
            f"({type(exc).__name__}: {one_line(str(exc), 200)}); see the Ray logs "
            "(/tmp/ray/session_latest/logs on the worker's node)"
        ) from None
    if result.error is not None:
        if result.internal:
            raise ShardInternalError(f"{where} on {result.host}: {result.error}")
        raise HarnessError(f"{where} on {result.host}: {result.error}")
    return result


def close_actors(ray: ModuleType, actors: list[Any]) -> None:
    """Let each worker close its packer (an external process) and backend; best effort."""
    try:
        ray.get([actor.close.remote() for actor in actors], timeout=30)
    except Exception:  # a worker that cannot close is killed next anyway
        pass
