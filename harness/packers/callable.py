"""A packer written in Python, named by import path (``--packer package.module:attr``).

``attr`` may be a plain function ``pack(items, pad_to=None) -> PackedRequest`` (its requests are
then taken apart by the harness's :func:`~harness.packers.packing.unpack`, following the layout the
function returned), an object with ``pack`` and ``unpack`` methods, or a class whose no-argument
instance is such an object. It is foreign code to the harness: whatever it returns is validated
like an external process's answer, and whatever it raises becomes one
:class:`~harness.packers.packer_errors.PackerFailed` line naming it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from harness.base.errors import HarnessError, PackingError, clip
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.packers.identity import callable_identity, module_file_digest
from harness.packers.inputs import check_items, check_output, describe_items
from harness.packers.packer_errors import PackerFailed, PackerUnavailable
from harness.packers.packing import PackedRequest, unpack
from harness.packers.validate import check_packed, check_unpacked


def load_object(
    spec: str,
    what: str = "--packer",
    error: type[HarnessError] = PackerUnavailable,
    expected: str = "'package.module:function'",
) -> object:
    """Import ``package.module:attr`` (attr may be dotted); raise ``error`` naming ``what`` named it and what failed
    (a packer's spec, a team's kind of evidence: harness.evidence.kind_registry)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise error(f"{what} {spec!r}: expected {expected}")
    try:
        target: object = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of foreign code is the user's to fix, named
        raise error(f"{what} {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise error(f"{what} {spec!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


class CallablePacker:
    """A :class:`~harness.packers.packing.Packer` around a Python callable or packer object, answers validated."""

    def __init__(self, spec: str, geometry: Geometry, target: object | None = None) -> None:
        self.spec = spec
        self.geometry = geometry
        self.name = f"callable: {spec}"
        before = module_file_digest(spec) if target is None else None  # the identity is of what is imported
        obj = load_object(spec) if target is None else target
        if inspect.isclass(obj):
            try:
                obj = obj()
            except Exception as exc:
                raise PackerUnavailable(f"packer {spec!r}: cannot instantiate: {type(exc).__name__}: {exc}") from None
        self._unpack: Callable[..., object] | None = None
        self._pack: Callable[..., object]
        pack_fn, unpack_fn = getattr(obj, "pack", None), getattr(obj, "unpack", None)
        if callable(pack_fn) and callable(unpack_fn):
            self._pack, self._unpack = pack_fn, unpack_fn
        elif callable(obj):
            self._pack = obj
        else:
            raise PackerUnavailable(
                f"packer {spec!r}: a {type(obj).__name__} is neither a function nor an object with pack() and unpack()"
            )
        self._target = obj
        self.identity, self.digest, self.source = callable_identity(spec, obj)
        if before is not None and before != (self.source, self.digest):
            raise PackerUnavailable(
                f"packer {clip(spec)}: its module file {clip(before[0])} changed while it was imported (sha256 "
                f"{before[1][:16]}... before, {self.digest[:16]}... after): refusing, its identity would not be "
                "of the code that runs; run again once the file stays as it is"
            )
        self.accepts_packs = bool(getattr(obj, "accepts_packs", False))

    def pack(self, items: Sequence[Block | PackedRequest], pad_to: int | None = None) -> PackedRequest:
        """Pack blocks (or, for a packer with ``accepts_packs``, unpadded packs: judged as their blocks)."""
        label = f"packer {self.spec!r}"
        blocks = self._blocks_of(items, label)
        check_items(blocks, pad_to, label)
        what = f"packing {describe_items(blocks)}" + ("" if pad_to is None else f" padded to k={pad_to}")
        packed = self._call(self._pack, what, list(items), pad_to=pad_to)
        return check_packed(packed, blocks, pad_to, self.geometry, f"{label}: answer to {what}")

    def _blocks_of(self, items: Sequence[Block | PackedRequest], label: str) -> list[Block]:
        if not self.accepts_packs or not any(isinstance(i, PackedRequest) for i in items):
            for item in items:  # (check_items' refusal, before the list is typed as blocks)
                if not isinstance(item, Block):
                    raise PackingError(f"{label}: packs blocks only, got a {type(item).__name__}")
            return [item for item in items if isinstance(item, Block)]
        blocks: list[Block] = []
        for item in items:
            if isinstance(item, PackedRequest):
                if any(s.padding for s in item.segments):
                    raise PackingError(f"{label}: a pack with padding cannot be packed again")
                blocks.extend(item.split())
            else:
                blocks.append(item)
        return blocks

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        name, out = check_output(packed, outputs)
        if self._unpack is None:
            return unpack(packed, {name: out})
        what = f"unpacking {out.dtype}{list(out.shape)} for blocks {packed.block_ids[:3]}"
        parts = self._call(self._unpack, what, packed, {name: out})
        parts = list(parts) if isinstance(parts, list | tuple) else parts
        return check_unpacked(parts, packed, out, f"packer {self.spec!r}: answer to {what}")

    # the Packer protocol's describe(): a free-form JSON mapping a team's packer may fill as it likes
    def describe(self) -> dict[str, Any]:
        """Provenance; ``identity`` (what a promotion is keyed by) binds the spec to its module's source."""
        return {
            "name": self.name,
            "kind": "callable",
            "spec": self.spec,
            "identity": self.identity,
            "digest": self.digest,
            "digest_source": f"sha256 of the module's source file {self.source}",
            "unpack": "own" if self._unpack is not None else "harness.packers.packing.unpack (by the packer's layout)",
        }

    def close(self) -> None:
        close = getattr(self._target, "close", None)
        if callable(close) and not inspect.isclass(self._target):
            self._call(close, "closing")

    def __enter__(self) -> CallablePacker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[..., object], what: str, *args: object, **kwargs: object) -> object:
        try:
            return fn(*args, **kwargs)
        except HarnessError:
            raise
        except Exception as exc:  # foreign code: named, never a traceback
            raise PackerFailed(f"packer {self.spec!r}: raised {type(exc).__name__} while {what}: {exc}") from None
