"""What runs on a Ray worker, and what the driver hands it: the :class:`WorkerSpec` every worker builds its
backend and packer from, the :class:`ShardJob` naming the module-level function that runs one shard, the
:class:`ShardResult` a shard returns (its one-line error rather than an exception, so Ray retries only a
worker's death), and the :class:`ShardWorker` actor itself. None of it imports Ray: the driver that starts
the workers and hands them shards is :mod:`harness.pipeline.distributed`.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.base.errors import HarnessError, failed_step, one_line, step
from harness.base.jsonio import write_json_atomic
from harness.corpus.shards import BlockRange, RequestRange
from harness.data.schemas.base import Strict
from harness.data.schemas.config_file import ConfigFile
from harness.packers.packing import Packer
from harness.pipeline.backends import IN_PROCESS, BackendChoice, make_backend, make_packer

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend

JOB_FILE = "job.json"


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker builds once: the configured model on its device (or a Triton client), the packer."""

    config: ConfigFile
    backend: BackendChoice = BackendChoice()
    packer_cmd: str | None = None
    packer: str | None = None
    packer_digest: str | None = None  # --packer-digest, for the packer each worker builds
    laws_examples: int = 100  # --laws-examples: each worker's runs judge its packer on the packing laws

    @property
    def on_gpu(self) -> bool:
        return self.backend.url in IN_PROCESS and self.config.release.device.startswith("cuda")

    @property
    def cpus(self) -> int:
        """CPUs per worker: 1 beside its GPU; on CPU as many as its torch threads (1 when --threads 0: set it)."""
        return 1 if self.on_gpu else self.config.numerics.threads or 1

    def resources(self) -> dict[str, int]:
        """Ray's resource keyword arguments of one worker: one GPU per worker, or :attr:`cpus` CPUs."""
        return {"num_gpus": 1, "num_cpus": self.cpus} if self.on_gpu else {"num_cpus": self.cpus}


# What a shard is: whole groups of a corpus (nightly, golden record) or whole requests of a capture (audit).
AnyShard = BlockRange | RequestRange
# A shard function: (backend, packer, config, shard, shard_dir, **args) -> the path of what it wrote.
ShardFn = Callable[..., Path]


@dataclass(frozen=True)
class ShardJob:
    """A job cut in shards: ``work`` runs one (on a worker), ``args`` are its keyword arguments."""

    name: str  # for progress and messages: "nightly", "golden record"
    work: ShardFn
    args: dict[str, Any] = field(default_factory=dict)  # keyword arguments of ``work``: each job's own


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


def worker_config(config: ConfigFile) -> ConfigFile:
    """Ray shows a GPU worker only the GPU it holds (CUDA_VISIBLE_DEVICES), as cuda:0."""
    if config.release.device.startswith("cuda"):
        return config.with_overrides(device="cuda:0")
    return config


def check_shared(job_root: Path, host: str) -> None:
    if not (job_root / JOB_FILE).is_file():
        raise HarnessError(
            f"{job_root}: not visible on Ray node {host}: --out (and the golden or corpus) must be "
            "on a filesystem every node of the cluster mounts (NFS, a shared volume)"
        )


def describe_bug(exc: BaseException) -> str:
    """A bug on a worker, located as the command line locates one (:func:`harness.base.errors.failed_step`)."""
    return f"at step '{failed_step(exc)}': {type(exc).__name__}: {one_line(exc)}"
