"""Start and stop a local Triton server for the ``diar_nn_g`` repository, leaving nothing behind.

The ``nvidia-pytriton`` wheel bundles a ``tritonserver`` binary with the Python backend; this
module runs that binary directly on a classic model repository (PyTriton's own proxy model is
not used: the harness must exercise the same ``config.pbtxt`` + ``model.py`` a release ships).

What it takes to run it outside PyTriton (measured, see docs/triton.md):

- a backend folder ``python/`` assembled from ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the ``triton_python_backend_stub`` built for *this*
  interpreter's version;
- ``LD_LIBRARY_PATH`` holding the wheel's ``nvidia_pytriton.libs`` and this interpreter's
  ``LIBDIR`` (otherwise the stub loads another libpython and dies);
- this interpreter's ``bin`` first on ``PATH`` (otherwise the stub cannot import torch).

Everything the server needs (backend folder, repository copy with the parameters filled in,
log) lives in one temporary folder removed on stop (and by a reaper process when the harness is
killed before it can stop: :mod:`lanes.backends.triton.reaper`); the server runs in its own process group,
stopped with SIGTERM and then SIGKILL (:mod:`lanes.backends.triton.process_group`), and the Python backend's
shared-memory regions carry a per-server prefix so that any left by a killed stub can be removed by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import BackendError
from lanes.backends.triton.process_group import _comm, _die_with_parent, _main_thread, _stop_group, group_members
from lanes.backends.triton.reaper import Reaper, start_reaper
from lanes.backends.triton.repository import (  # noqa: F401 (re-exported: the server's tests and tools use them)
    Bundle,
    assemble_backend,
    copy_repository,
    copy_verbatim,
    fill_config,
    server_env,
)
from lanes.backends.triton.server_options import MODEL_NAME, ServerOptions  # noqa: F401 (re-exported: tests and tools use them)

REPOSITORY = Path(__file__).parent / "model_repository"
SHM_DIR = Path("/dev/shm")
_LOG_TAIL = 8
_PORT_ATTEMPTS = 3
# Error lines Triton prints on every CPU-only start: noise in a startup failure's summary.
_HARMLESS = ("CudaDriverHelper", "NVML", "GPU metrics")


class _PortTaken(Exception):
    """The server could not bind a port we found free a moment earlier (a race): try others."""


@dataclass
class _Start:
    """What one start created, so that :meth:`TritonServer.leftovers` can look for all of it."""

    pgid: int
    tmp: Path
    shm_prefix: str


class TritonServer:
    """A running ``tritonserver`` (context manager). ``url`` is its HTTP endpoint."""

    def __init__(self, options: ServerOptions | None = None) -> None:
        self.options = options or ServerOptions()
        self.url = ""
        self.log_path: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._tmp: Path | None = None
        self._shm_prefix = ""
        self._lock = threading.Lock()
        self._starts: list[_Start] = []
        self._repo: Path | None = None
        self._reaper: Reaper | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> TritonServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> TritonServer:
        """Start and wait until the model is ready; on failure nothing is left running."""
        if self._proc is not None:
            raise BackendError(f"Triton server at {self.url} is already running")
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._start()
                return self
            except _PortTaken as taken:  # another process took a free port between our check and the bind
                self.stop()
                if attempt == _PORT_ATTEMPTS - 1:
                    raise BackendError(
                        f"Triton server: could not bind free ports in {_PORT_ATTEMPTS} tries; {taken}"
                    ) from None
            except BaseException:
                self.stop()
                raise
        return self

    def _start(self) -> None:
        opts = self.options
        bundle = Bundle.find()
        self._shm_prefix = f"diar_triton_{secrets.token_hex(4)}_"
        self._tmp = Path(tempfile.mkdtemp(prefix="diar-triton-"))
        self._starts.append(_Start(0, self._tmp, self._shm_prefix))
        backends = self._tmp / "backends"
        assemble_backend(bundle, backends / "python")
        repo = self._tmp / "model_repository"
        if opts.verbatim:
            copy_verbatim(opts.repository or REPOSITORY, repo)
        else:
            copy_repository(opts.repository or REPOSITORY, repo, opts)
        self._repo = repo
        self.log_path = Path(opts.log_path) if opts.log_path else self._tmp / "tritonserver.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        http, grpc, metrics = _distinct_ports(opts.http_port)
        self.url = f"http://127.0.0.1:{http}"
        cmd = [
            str(bundle.binary),
            f"--model-repository={repo}",
            f"--backend-directory={backends}",
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
            "--http-address=127.0.0.1",
            f"--http-port={http}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={grpc}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={metrics}",
            "--exit-on-error=true",
            "--strict-readiness=true",
            f"--log-verbose={int(opts.log_verbose)}",
        ]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=server_env(bundle, opts),
                start_new_session=True,
                preexec_fn=_die_with_parent if _main_thread() else None,
            )
        self._starts[-1].pgid = self._proc.pid
        # cleans up even if this process is SIGKILLed (no finally runs then): see lanes.backends.triton.reaper
        self._reaper = start_reaper(self._proc.pid, self._shm_prefix, [self._tmp])
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.options.startup_timeout_s
        # With --strict-readiness, /v2/health/ready waits for every model; a verbatim repository
        # need not hold a model named model_name, so it is waited for only where it exists.
        named = self._repo is None or (self._repo / self.options.model_name).is_dir()
        ready = f"{self.url}/v2/models/{self.options.model_name}/ready" if named else f"{self.url}/v2/health/ready"
        while True:
            code = self._proc.poll() if self._proc is not None else -1
            if code is not None:
                if _port_clash(self.log_tail(lines=40)) and not self.options.http_port:
                    raise _PortTaken(self.log_summary())
                raise BackendError(f"Triton server exited during startup (exit code {code}); {self.log_summary()}")
            if _http_ok(f"{self.url}/v2/health/ready") and _http_ok(ready):
                return
            if time.monotonic() > deadline:
                opts = self.options
                raise BackendError(
                    f"Triton server at {self.url} not ready after "
                    f"{opts.startup_timeout_s:.0f} s (model {opts.model_name!r}); "
                    f"{self.log_summary()}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period, remove what it left."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                _stop_group(proc, self.options.stop_grace_s)
            if self._shm_prefix:
                remove_shm(self._shm_prefix)
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
            if self._reaper is not None:
                self._reaper.release()
                self._reaper = None

    def kill(self) -> None:
        """SIGKILL the server's process group at once (tests: a server dying mid-run)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def log_tail(self, lines: int = _LOG_TAIL) -> str:
        """The server log's error lines, then its last lines (tables skipped), indented."""
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return "  (no log)"
        return summarize_log(text, lines)

    def log_summary(self) -> str:
        kept = self.options.log_path is not None
        where = f"server log {self.log_path}" if kept else "server log (removed with its temp folder)"
        return f"{where}:\n{self.log_tail()}"

    def leftovers(self) -> list[str]:
        """What exists now of every start of this server: its processes (server and Python stubs),
        temporary folder and shared-memory regions. While running, that is the server; after
        :meth:`stop` it must be empty (the tests and ``harness serve`` check it)."""
        left = []
        for run in self._starts:
            if run.pgid:
                left += [f"process {p} ({_comm(p)}) of group {run.pgid}" for p in group_members(run.pgid)]
            if run.tmp.exists():
                left.append(str(run.tmp))
            left += [str(p) for p in SHM_DIR.glob(f"{run.shm_prefix}*")]
        return left


def serve_forever(
    options: ServerOptions, on_ready: Callable[[str], None] | None = None, on_stop: Callable[[str], None] | None = None
) -> TritonServer:
    """Serve until SIGINT/SIGTERM, then stop the server (``harness serve``). Main thread only.

    ``on_ready`` gets the server's URL once the model is ready; ``on_stop`` the name of the signal
    that stopped it, once the server is stopped (a signal is the normal end of serving, not a
    failure). Returns the stopped server (its ``leftovers()`` say whether anything survived the stop)."""
    stop, stopped_by = threading.Event(), []

    def _stop(signum, _frame) -> None:
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with TritonServer(options) as server:
            if on_ready is not None:
                on_ready(server.url)
            while not stop.wait(0.5):
                if not server.running():
                    raise BackendError(
                        f"Triton server at {server.url} exited unexpectedly (exit code "
                        f"{server._proc.returncode if server._proc else '?'}); "
                        f"{server.log_summary()}"
                    )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if on_stop is not None and stopped_by:
        on_stop(stopped_by[0])
    return server


# -- building blocks ---------------------------------------------------------------------------
def summarize_log(text: str, lines: int = _LOG_TAIL) -> str:
    """Triton logs its reason for failing once, early, as an ``E`` line; the end of the log only
    says "failed to load all models". So: error lines first, then the tail."""
    kept = [
        ln
        for ln in text.splitlines()
        if ln.strip() and not ln.startswith(("|", "+-")) and not re.match(r"[IWE]\d{4} .*\] ?$", ln)
    ]
    errors = [ln for ln in kept if re.match(r"E\d{4} ", ln) and not any(h in ln for h in _HARMLESS)]
    tail = [ln for ln in kept[-lines:] if ln not in errors]
    shown = [_clip(ln) for ln in errors[:10]] + [_clip(ln) for ln in tail]
    return "\n".join(f"  {line}" for line in shown) or "  (empty log)"


def _clip(line: str, limit: int = 400) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _distinct_ports(http_port: int) -> tuple[int, int, int]:
    """Three ports, no two alike: a port found free and closed may be handed out again by the next
    call, and Triton refuses to serve HTTP and metrics on one port."""
    chosen: list[int] = [http_port] if http_port else []
    while len(chosen) < 3:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    return chosen[0], chosen[1], chosen[2]


def _port_clash(log_tail: str) -> bool:
    return "already in use" in log_tail or "at the same address and port" in log_tail


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def remove_shm(prefix: str) -> None:
    for path in SHM_DIR.glob(f"{prefix}*"):
        with contextlib.suppress(OSError):
            path.unlink()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False
