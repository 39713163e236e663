"""System shared memory for the Triton lane's tensors (client and server on the same host).

A packed request of k blocks carries about k x 1.7 MB (full model); through shared memory the
HTTP body holds only JSON, and the tensors are written once into a region the server has mapped.

Why regions leave nothing in ``/dev/shm``, whatever happens to the client:

- a region is created (``shm_open``), registered with the server, and its **name is unlinked
  at once**: Triton maps a system region when it is registered (``mmap`` at registration, the
  descriptor closed; verified on the bundled 2.51 by ``test_triton_shm.py``), and the client
  keeps its own mapping, so both go on using the memory while ``/dev/shm`` no longer lists it.
  A run that ends, raises or is SIGKILLed leaves no name; the memory itself is freed when the
  last mapping goes (client exit; the server's at unregister or server exit);
- the one window in which a name exists is between create and register (one HTTP round trip
  per region, at first use or when a larger request needs a larger region). Names carry the
  creating process's id (``diar_shm_<pid>_...``); every :class:`ShmPool` first removes names of
  processes that no longer exist, so a client killed inside that window is cleaned up by the next.

``tritonclient.utils.shared_memory`` wraps the same ``multiprocessing.shared_memory`` but unlinks
only when a region is destroyed (a killed client leaves its names); hence this small module over
the standard library, with tritonclient's own register/``set_shared_memory`` API on the wire.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np

from harness.base.errors import BackendError
from lanes.backends.triton.triton_json import TensorMetadata, parsed

SHM_DIR = Path("/dev/shm")
PREFIX = "diar_shm_"
_ALIGN = 64
_MIN_BYTES = 1 << 20


def aligned(n: int) -> int:
    return (int(n) + _ALIGN - 1) // _ALIGN * _ALIGN


def region_size(needed: int) -> int:
    """Regions grow in powers of two from 1 MiB: a run of growing k re-registers a few times, not per call."""
    size = _MIN_BYTES
    while size < needed:
        size *= 2
    return size


@dataclass
class Region:
    """One registered region: ``name`` is both Triton's region name and the (unlinked) shm key."""

    name: str
    size: int
    memory: shared_memory.SharedMemory

    def write(self, offset: int, array: np.ndarray) -> None:
        view = np.ndarray(array.shape, array.dtype, buffer=self.memory.buf, offset=offset)
        view[...] = array
        del view  # no export may outlive the call: close() refuses while one exists

    def read(self, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        count = int(np.prod(shape, dtype=np.int64))
        buf = self.memory.buf
        assert buf is not None, f"shared-memory region {self.name} read after it was closed"
        view = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
        out = view.reshape(shape).copy()
        del view
        return out


class ShmPool:
    """``slots`` regions, one per request in flight, each grown on demand.

    ``register(name, key, size)`` and ``unregister(name)`` are the server calls (the backend
    passes its client's ``register_system_shared_memory``/``unregister_system_shared_memory``).
    """

    def __init__(
        self, slots: int, register: Callable[[str, str, int], None], unregister: Callable[[str], None]
    ) -> None:
        sweep_dead()
        self._register, self._unregister = register, unregister
        self._tag = f"{PREFIX}{os.getpid()}_{secrets.token_hex(4)}_"
        self._regions: list[Region | None] = [None] * slots
        self._free = list(range(slots))[::-1]
        self._made = 0

    @property
    def prefix(self) -> str:
        return self._tag

    def acquire(self) -> int:
        if not self._free:
            raise RuntimeError("shared-memory pool: more requests in flight than slots")
        return self._free.pop()

    def release(self, slot: int) -> None:
        self._free.append(slot)

    def region(self, slot: int, needed: int) -> Region:
        """The slot's region, replaced by a larger one first if it holds fewer than ``needed`` bytes."""
        current = self._regions[slot]
        if current is not None and current.size >= needed:
            return current
        if current is not None:
            self._regions[slot] = None
            self._drop(current)
        self._made += 1
        name = f"{self._tag}{slot}_{self._made}"
        size = region_size(needed)
        memory = shared_memory.SharedMemory(name=name, create=True, size=size)
        try:
            self._register(name, f"/{name}", size)
        except BaseException:
            _close(memory)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                memory.unlink()  # registered (mapped by the server) or failed: the name is no longer needed
        region = Region(name, size, memory)
        self._regions[slot] = region
        return region

    def close(self) -> None:
        """Unregister every region (best effort: the server may be gone) and unmap it here."""
        regions, self._regions = self._regions, [None] * len(self._regions)
        for region in regions:
            if region is not None:
                self._drop(region)

    def _drop(self, region: Region) -> None:
        with contextlib.suppress(Exception):  # a dead server or connection must not mask the real error
            self._unregister(region.name)
        _close(region.memory)


def layout(arrays: Mapping[str, np.ndarray]) -> tuple[dict[str, int], int]:
    """Byte offset of each array in a region (each 64-byte aligned) and the bytes they take."""
    offsets, end = {}, 0
    for name, array in arrays.items():
        offsets[name] = end
        end = aligned(end + array.nbytes)
    return offsets, end


def sweep_dead(directory: Path = SHM_DIR) -> list[str]:
    """Remove regions named by this module for processes that no longer exist; returns their names."""
    removed = []
    for path in directory.glob(f"{PREFIX}*"):
        pid = path.name[len(PREFIX) :].split("_", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path.name)
    return removed


def leftovers(prefix: str = PREFIX, directory: Path = SHM_DIR) -> list[str]:
    return sorted(p.name for p in directory.glob(f"{prefix}*"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _close(memory: shared_memory.SharedMemory) -> None:
    with contextlib.suppress(BufferError, OSError):
        memory.close()


def infer_through_shm(
    client,
    model_name: str,
    pool: ShmPool,
    output: str,
    arrays: dict[str, np.ndarray],
    datatypes: dict[str, str],
    out_shape: tuple[int, ...],
    where: str,
) -> tuple[dict[str, np.ndarray], float]:
    """One request through a region of ``pool``: inputs written into it, the output read back from it
    (the HTTP body carries JSON only). Returns the outputs and the round trip's seconds."""
    import time

    import tritonclient.http as httpclient
    from tritonclient.utils import triton_to_np_dtype

    offsets, used = layout(arrays)
    out_bytes = 4 * int(np.prod(out_shape, dtype=np.int64))
    slot = pool.acquire()
    try:
        region = pool.region(slot, used + out_bytes)
        inputs = []
        for key, array in arrays.items():
            region.write(offsets[key], array)
            tensor = httpclient.InferInput(key, list(array.shape), datatypes[key])
            tensor.set_shared_memory(region.name, array.nbytes, offsets[key])
            inputs.append(tensor)
        wanted = httpclient.InferRequestedOutput(output, binary_data=True)
        wanted.set_shared_memory(region.name, region.size - used, used)
        start = time.perf_counter()
        result = client.infer(model_name, inputs, outputs=[wanted])
        wall = time.perf_counter() - start
        answer = result.get_output(output)
        if answer is None:
            return {}, wall
        meta = parsed(TensorMetadata, answer, where)
        shape = tuple(meta.shape)
        dtype = triton_to_np_dtype(str(meta.datatype))
        if dtype is None or dtype is np.object_:
            raise BackendError(f"{where}: output {output} has datatype {meta.datatype}, the contract says FP32")
        nbytes = np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64))
        if nbytes > region.size - used:
            raise BackendError(
                f"{where}: output {output} of shape {list(shape)} does not fit the "
                f"{region.size - used} bytes given for it in shared memory"
            )
        return {output: region.read(used, np.dtype(dtype), shape)}, wall
    finally:
        pool.release(slot)
