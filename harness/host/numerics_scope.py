"""The numeric settings applied for a scope, and the process given back as it was when the scope ends.

:meth:`harness.data.numeric_settings.NumericSettings.applied` is the one way the harness sets torch's
flags: a context manager that takes torch's state (:class:`harness.host.torch_state.TorchState`) and
``CUBLAS_WORKSPACE_CONFIG`` before it changes them, and puts back what it changed when the block ends,
however it ends (an error, a KeyboardInterrupt). Inside, :meth:`NumericsScope.apply` sets the settings
again (a backend does before every call: a flag changed meanwhile by a plug-in does not survive).

Scopes nest: each one gives back the state it found, so nested scopes restore last in, first out. A scope
entered inside an open scope of the same settings (a backend's call inside a recording) only sets them again:
the outer one took the state and gives it back (a call pays no reading of torch's state). Scopes of two
threads can overlap (a backend's calls run in its device queue's thread): one that ends while a scope
entered after it is still open changes nothing then, and hands what it found to that scope, which restores
it when it ends (a scope of the same settings inside it takes its place); torch's thread count, which is per
thread (OpenMP's), is handed over the same way among the scopes of one thread only.

torch's flags are read and set only once torch is imported (``torch_loaded``): a scope entered before a
model's factory imports torch takes torch's state at the first apply that finds torch there, before
setting anything, for itself and for every open scope that has none yet (torch's state as it was
imported is what each of them found).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Final, Protocol

from harness.host.torch_state import TorchState, reset_fp32_tree, torch_loaded

CUBLAS_VARIABLE: Final = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_DETERMINISTIC: Final = ":4096:8"


class ScopedSettings(Protocol):
    """What a scope sets (:class:`harness.data.numeric_settings.NumericSettings` has it; that module makes the
    scopes, so this one names only what it reads)."""

    @property
    def mkldnn(self) -> bool: ...
    @property
    def cudnn_benchmark(self) -> bool: ...
    @property
    def cudnn_deterministic(self) -> bool: ...
    @property
    def deterministic_algorithms(self) -> bool: ...
    @property
    def allow_tf32(self) -> bool: ...
    @property
    def matmul_precision(self) -> str: ...
    def resolved_threads(self) -> int: ...


_LOCK = threading.RLock()  # the open scopes and torch's flags change together
_OPEN: list[NumericsScope] = []  # the open scopes, oldest first


@dataclass(frozen=True)
class _Found:
    """What a scope gives back: ``CUBLAS_WORKSPACE_CONFIG`` (None: unset) and torch's state (None: not yet
    read, torch not imported when the scope last applied); ``thread``: the thread that entered the scope, whose
    thread count it gives back (torch's thread count is per thread)."""

    cublas: str | None
    torch: TorchState | None
    thread: int


class NumericsScopeError(RuntimeError):
    """A scope used outside its ``with`` block (applied after it ended, entered twice)."""


class NumericsScope:
    """``with settings.applied() as scope:`` the settings in force until the block ends (module doc)."""

    def __init__(self, settings: ScopedSettings) -> None:
        self.settings = settings
        self._found: _Found | None = None
        self._ended = False
        self._within: NumericsScope | None = None  # an open scope of the same settings this one is inside
        self._inside: list[NumericsScope] = []  # the open scopes of the same settings inside this one
        self._entered_in = 0  # the thread that entered it

    def __enter__(self) -> NumericsScope:
        with _LOCK:
            if self._found is not None or self._ended or self._within is not None:
                raise NumericsScopeError("numeric settings: a scope is entered once (settings.applied() again)")
            self._entered_in = threading.get_ident()
            innermost = _OPEN[-1] if _OPEN else None
            if innermost is not None and innermost.settings == self.settings:
                # inside a scope of the same settings (a backend's call inside a recording): the outer scope
                # took the state and gives it back; this one only sets the settings again
                self._within = innermost
                innermost._inside.append(self)
                try:
                    self.apply()
                except BaseException:
                    self._end()
                    raise
                return self
            self._found = _Found(os.environ.get(CUBLAS_VARIABLE), None, self._entered_in)
            _OPEN.append(self)
            try:
                self.apply()
            except BaseException:
                self._end()
                raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self._end()
        except RuntimeError as failure:
            if exc is None:
                raise
            exc.add_note(str(failure))  # the error that ended the scope stays the one raised

    def apply(self) -> None:
        """Set every setting (again), whatever the process has now; torch's only once torch is imported.

        A process without torch runs no torch network, and importing torch to set flags nothing reads costs
        seconds. Whoever loads a model applies again once it is built (its factory may be what imports torch)."""
        with _LOCK:
            if self._within is not None and not self._ended:
                self._within.apply()
                return
            if self._found is None or self._ended:
                raise NumericsScopeError(
                    "numeric settings applied outside their scope: use `with settings.applied() as scope:` and "
                    "scope.apply() inside it"
                )
            if self.settings.deterministic_algorithms:
                # cuBLAS needs this before its first handle is created to be deterministic (any cuBLAS user).
                os.environ.setdefault(CUBLAS_VARIABLE, CUBLAS_DETERMINISTIC)
            if not torch_loaded():
                return
            if self._found.torch is None:
                state = TorchState.read()
                for scope in _OPEN:
                    if scope._found is not None and scope._found.torch is None:
                        scope._found = replace(scope._found, torch=state)
                reset_fp32_tree()  # as in a fresh process: a user's new-API TF32 would outrank the switches
            _set_torch_flags(self.settings)

    def _end(self) -> None:
        """Give back what this scope found (module doc), or hand it to the scopes entered after it."""
        with _LOCK:
            if self._ended:
                return
            self._ended = True
            if self._within is not None:  # inside a scope of the same settings: that one gives the state back
                self._within._inside.remove(self)
                return
            found = self._found
            if self not in _OPEN or found is None:
                return
            at = _OPEN.index(self)
            _OPEN.pop(at)
            if self._inside:  # one inside it is still open (another thread's): it takes this one's place
                self._hand_to_inside(at, found)
                return
            later = _OPEN[at:]
            if not later:
                _restore_cublas(found.cublas)
                if found.torch is not None:
                    found.torch.restore()
                return
            # a newer scope (another thread's) is still open: what this one found is given back when it ends
            heir = later[0]
            assert heir._found is not None
            heir._found = replace(heir._found, cublas=found.cublas, torch=_flags_of(found.torch, heir._found.torch))
            if found.torch is None:
                return
            # the thread count is per thread: handed to this thread's next scope, or given back now
            mine = next((s for s in later if s._found is not None and s._found.thread == found.thread), None)
            if mine is None:
                _restore_threads(found.torch)
            elif mine._found is not None and mine._found.torch is not None:
                mine._found = replace(mine._found, torch=replace(mine._found.torch, threads=found.torch.threads))

    def _hand_to_inside(self, at: int, found: _Found) -> None:
        """This scope ends while scopes of the same settings inside it are still open (in other threads): the
        first takes its place, and gives back what it found when it ends; this thread's count is back now."""
        heir, *rest = self._inside
        self._inside = []
        heir._within, heir._inside = None, rest
        for scope in rest:
            scope._within = heir
        torch = found.torch
        if torch is not None and heir._entered_in != found.thread:
            if threading.get_ident() == found.thread:
                _restore_threads(torch)
            torch = replace(torch, threads=self.settings.resolved_threads())  # what the heir's thread was set to
        heir._found = _Found(found.cublas, torch, heir._entered_in)
        _OPEN.insert(at, heir)


def _flags_of(found: TorchState | None, heir: TorchState | None) -> TorchState | None:
    """The heir's torch state with the process-wide flags the ended scope found (its own thread count kept:
    a thread count is handed over only within one thread)."""
    if found is None or heir is None:
        return heir if found is None else found
    return replace(found, threads=heir.threads)


def _restore_threads(state: TorchState) -> None:
    import torch

    if torch.get_num_threads() != state.threads:
        torch.set_num_threads(state.threads)


def _restore_cublas(value: str | None) -> None:
    if value is None:
        os.environ.pop(CUBLAS_VARIABLE, None)
    else:
        os.environ[CUBLAS_VARIABLE] = value


def _set_torch_flags(settings: ScopedSettings) -> None:
    import torch

    torch.set_num_threads(settings.resolved_threads())
    # torch swaps this module's class at import: ``enabled`` is a ContextProp descriptor taking a bool
    torch.backends.mkldnn.enabled = settings.mkldnn  # type: ignore[assignment]
    torch.backends.cudnn.benchmark = settings.cudnn_benchmark
    torch.backends.cudnn.deterministic = settings.cudnn_deterministic
    torch.use_deterministic_algorithms(settings.deterministic_algorithms)
    torch.backends.cuda.matmul.allow_tf32 = settings.allow_tf32
    torch.backends.cudnn.allow_tf32 = settings.allow_tf32
    torch.set_float32_matmul_precision(settings.matmul_precision)


def open_scopes() -> int:
    """How many scopes are open in this process now (0: torch's flags are the process's own)."""
    with _LOCK:
        return len(_OPEN)
