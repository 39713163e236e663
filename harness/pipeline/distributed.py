"""Fanning a sharded job out on Ray: one actor per GPU (or CPU worker) holding the model, one Ray task
per shard, a dead worker's shard rerun by Ray, a shard that fails for a harness reason failing the job.

Why Ray and not a scheduler of our own: placing workers on GPUs, restarting a dead worker (on
another node when its node is gone), rerunning the shard it held, and clusters on Kubernetes
(KubeRay) are Ray's job. The harness keeps what is its own: which blocks make a shard
(:func:`harness.corpus.shards.block_ranges`), what a shard writes (a run or golden directory in the
shared ``--out`` folder, with the writers every other command uses) and how shards merge (the
existing merge rules, which refuse shards of different device kinds or numerics).

A :class:`ShardJob` names a module-level function that runs one shard on a worker, given the
worker's backend and packer, and returns where the shard's result lies. ``nightly --ray`` and
``golden record --ray`` are such jobs (:mod:`harness.pipeline.ray_jobs`), and so is ``audit --ray``
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
import functools
import logging
import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.corpus.shards import BlockRange, RequestRange
from harness.data.errors import HarnessError, failed_step, one_line, step
from harness.data.jsonio import read_json, write_json_atomic
from harness.data.schemas import validate
from harness.data.schemas.base import Strict
from harness.packers.packing import Packer
from harness.pipeline.backends import IN_PROCESS, BackendChoice, make_backend, make_packer
from harness.progress import progress_bar
from harness.release_config import ReleaseConfig

if TYPE_CHECKING:
    from lanes.backend import Backend

RAY_INSTALL = "pip install 'diar-lane-harness[ray]'"
JOB_FILE = "job.json"
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


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker builds once: the configured model on its device (or a Triton client), the packer."""

    config: ReleaseConfig
    backend: BackendChoice = BackendChoice()
    packer_cmd: str | None = None
    packer: str | None = None
    packer_digest: str | None = None  # --packer-digest, for the packer each worker builds
    laws_examples: int = 100  # --laws-examples: each worker's runs judge its packer on the packing laws

    @property
    def on_gpu(self) -> bool:
        return self.backend.url in IN_PROCESS and self.config.device.startswith("cuda")

    def resources(self) -> dict[str, int]:
        """One GPU per worker; on CPU as many CPUs as its torch threads (1 when --threads 0: set it)."""
        if self.on_gpu:
            return {"num_gpus": 1, "num_cpus": 1}
        return {"num_cpus": self.config.numerics.threads or 1}


# What a shard is: whole groups of a corpus (nightly, golden record) or whole requests of a capture (audit).
AnyShard = BlockRange | RequestRange
# A shard function: (backend, packer, config, shard, shard_dir, **args) -> the path of what it wrote.
ShardFn = Callable[..., Path]


@dataclass(frozen=True)
class ShardJob:
    """A job cut in shards: ``work`` runs one (on a worker), ``args`` are its keyword arguments."""

    name: str  # for progress and messages: "nightly", "golden record"
    work: ShardFn
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShardResult:
    index: int
    path: str | None = None
    error: str | None = None
    internal: bool = False
    host: str = ""
    pid: int = 0
    seconds: float = 0.0

    @property
    def written(self) -> Path:
        """Where the shard's result lies: set on every result :func:`run_shards` returns (a shard that
        failed raises there instead)."""
        assert self.path is not None, f"shard {self.index} failed ({self.error}): it wrote nothing"
        return Path(self.path)


class AttemptRecord(Strict):
    """``<shard>/attempt-<pid>-<hex>.json``: a worker started this shard (a rerun after a death adds one)."""

    kind: str
    shard: str
    host: str
    pid: int
    started: str


class ShardWorker:
    """A Ray actor: one per GPU (or CPU worker). Builds the backend once (the model placed once) and
    runs shard after shard with it. Never raises out of a method for a harness reason: Ray must
    retry only a worker's death, so failures come back as :class:`ShardResult` errors."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.backend: Backend | None = None
        self.packer: Packer | None = None
        self.failure: tuple[str, bool] | None = None  # (its line, whether it is a bug)
        try:
            with step("ray worker start-up"):
                self.backend = make_backend(worker_config(spec.config), spec.backend)
                self.packer = make_packer(spec.packer_cmd, spec.packer, self.backend.geometry, spec.packer_digest)
        except HarnessError as exc:
            self.failure = (f"worker start-up: {exc}", False)
        except Exception as exc:  # a bug: reported as such by the first shard handed here
            self.failure = (f"worker start-up: {describe_bug(exc)}", True)

    def run(self, job: ShardJob, shard: AnyShard, shard_dir: str) -> ShardResult:
        start, host = time.perf_counter(), socket.gethostname()
        result = functools.partial(ShardResult, shard.index, host=host, pid=os.getpid())
        if self.failure is not None:
            return result(error=self.failure[0], internal=self.failure[1])
        directory = Path(shard_dir)
        try:
            with step(f"{job.name} shard {shard}"):
                check_shared(directory.parent, host)
                write_json_atomic(
                    directory / f"attempt-{os.getpid()}-{secrets.token_hex(3)}.json",
                    {
                        "kind": "harness.ray-attempt",
                        "shard": str(shard),
                        "host": host,
                        "pid": os.getpid(),
                        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    },
                )
                path = job.work(self.backend, self.packer, self.spec.config, shard, directory, **job.args)
        except HarnessError as exc:
            return result(error=str(exc))
        except Exception as exc:
            return result(error=describe_bug(exc), internal=True)
        return result(path=str(path), seconds=time.perf_counter() - start)

    def close(self) -> None:
        parts: tuple[Packer | None, Backend | None] = (self.packer, self.backend)
        for part in parts:
            try:
                if part is not None:
                    part.close()
            except Exception:  # closing is best effort: the actor is killed next
                pass


def worker_config(config: ReleaseConfig) -> ReleaseConfig:
    """Ray shows a GPU worker only the GPU it holds (CUDA_VISIBLE_DEVICES), as cuda:0."""
    if config.device.startswith("cuda"):
        return config.with_overrides(device="cuda:0")
    return config


def check_shared(job_root: Path, host: str) -> None:
    if not (job_root / JOB_FILE).is_file():
        raise HarnessError(
            f"{job_root}: not visible on Ray node {host}: --out (and the golden or corpus) must be "
            "on a filesystem every node of the cluster mounts (NFS, a shared volume)"
        )


def describe_bug(exc: BaseException) -> str:
    """A bug on a worker, located as the command line locates one (:func:`harness.data.errors.failed_step`)."""
    return f"at step '{failed_step(exc)}': {type(exc).__name__}: {one_line(exc)}"


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
) -> tuple[list[ShardResult], dict[str, Any]]:
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
                "--threads 0 with --ray: each CPU worker runs one torch thread "
                "per CPU of its node, and they compete; set --threads (it is "
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
    that already initialised Ray (a test, a notebook) keeps its own instance."""
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if options.address == "local":
        per = spec.resources()
        if options.workers is not None and "num_gpus" not in per:
            kwargs["num_cpus"] = options.workers * per["num_cpus"]
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
    --threads CPUs). More than it holds now is allowed (an autoscaler adds nodes), with a warning."""
    per = spec.resources()
    total = ray.cluster_resources()
    if options.accelerator and "num_gpus" not in per:
        raise HarnessError(f"ray.accelerator {options.accelerator}: applies to GPU workers (--device cuda)")
    if "num_gpus" in per:
        slots, what = int(total.get("GPU", 0)), "GPUs"
        if options.accelerator:  # Ray counts each node's GPU kind as a resource 'accelerator_type:<kind>'
            kind = f"accelerator_type:{options.accelerator}"
            slots = sum(
                int(n["Resources"].get("GPU", 0))
                for n in ray.nodes()
                if n.get("Alive") and kind in n.get("Resources", {})
            )
            what = f"{options.accelerator} GPUs"
    else:
        slots, what = int(total.get("CPU", 0) // per["num_cpus"]), f"workers of {per['num_cpus']} CPU(s)"
    if options.workers is None:
        if slots < 1:
            need = "a GPU per worker (--device cuda)" if "num_gpus" in per else f"{per['num_cpus']} CPU(s) per worker"
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
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
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
