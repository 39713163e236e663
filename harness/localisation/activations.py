"""Module outputs of one hooked call, kept out of memory: written as produced, read back one module at a time.

Localisation and the golden's module floors compare every module's output between two calls (alone and
packed; two passes and a jittered one). Kept in memory, one block's activations of the full voiceprint
network are 3.7 GiB per call (114 modules, up to 78 MiB each), so the floors' three calls peaked at
12 GiB, and copying them cost more time than the network itself. A store holds the first
``BUDGET`` bytes (16 MiB) in memory and appends the rest to a file as each module produces it (its bytes,
with their dtype and shape in an index), so a comparison holds one module's outputs per call at a time
whatever the network. The file lives in a folder the caller names (beside the golden or the run being
written, not a tmpfs), is unlinked at once (nothing is left, even after a kill) and read back with
``readinto``. Parts a module produced over several calls of it are concatenated along dim 0 when read,
as they were when kept in memory.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

BUDGET = 16 << 20  # bytes kept in memory per store before the file takes the rest (small networks: no file)


@dataclass(frozen=True)
class _Part:
    offset: int  # in the file; -1: kept in memory (``tensor``)
    nbytes: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    tensor: torch.Tensor | None


class ActivationStore:
    """Per module name (in the order the modules first produced output), the parts of its output."""

    def __init__(self, folder: Path | None = None, budget: int = BUDGET) -> None:
        self.folder, self.budget = folder, budget
        self.parts: OrderedDict[str, list[_Part]] = OrderedDict()
        self.in_memory = 0
        self.spilled = 0
        self._file: io.BufferedRandom | None = None

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Keep ``tensor`` (a module's output, or its slice) under ``name``; a copy, so the call's own buffers
        can be freed and reused."""
        t = tensor.detach()
        nbytes = t.numel() * t.element_size()
        if self.in_memory + nbytes <= self.budget:
            self.in_memory += nbytes
            part = _Part(-1, nbytes, tuple(t.shape), t.dtype, t.clone())
        else:
            part = self._write(t.to("cpu").contiguous(), nbytes)
        self.parts.setdefault(name, []).append(part)

    def _write(self, t: torch.Tensor, nbytes: int) -> _Part:
        if self._file is None:
            folder = self.folder if self.folder is not None else Path(tempfile.gettempdir())
            fd, path = tempfile.mkstemp(prefix=".activations-", dir=folder)
            os.unlink(path)  # gone with the last descriptor: nothing left behind, whatever ends the process
            handle = os.fdopen(fd, "w+b")
            assert isinstance(handle, io.BufferedRandom)
            self._file = handle
        offset = self._file.seek(0, os.SEEK_END)
        if nbytes:
            self._file.write(t.reshape(-1).view(torch.uint8).numpy().data)
        self.spilled += nbytes
        return _Part(offset, nbytes, tuple(t.shape), t.dtype, None)

    def names(self) -> list[str]:
        return list(self.parts)

    def __contains__(self, name: object) -> bool:
        return name in self.parts

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape :meth:`get` returns, without reading anything."""
        parts = self.parts[name]
        first = parts[0].shape
        return (sum(p.shape[0] for p in parts), *first[1:]) if len(parts) > 1 else first

    def get(self, name: str) -> torch.Tensor:
        """The module's output (its parts concatenated along dim 0), read back."""
        tensors = [self._read(p) for p in self.parts[name]]
        return tensors[0] if len(tensors) == 1 else torch.cat(tensors)

    def _read(self, part: _Part) -> torch.Tensor:
        if part.tensor is not None:
            return part.tensor
        if not part.nbytes:
            return torch.empty(part.shape, dtype=part.dtype)
        buffer = bytearray(part.nbytes)
        assert self._file is not None
        self._file.seek(part.offset)
        if self._file.readinto(buffer) != part.nbytes:
            raise OSError(f"activation store: short read of {part.nbytes} bytes at {part.offset}")
        return torch.frombuffer(buffer, dtype=torch.uint8).view(part.dtype).reshape(part.shape)

    def items(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, output) in execution order, each read when reached (one module in memory at a time)."""
        for name in list(self.parts):
            yield name, self.get(name)

    def close(self) -> None:
        self.parts.clear()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> ActivationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
