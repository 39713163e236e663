"""One exception family and four exit statuses, so every command fails in one clear line.

    0  everything holds
    1  a verdict failed (a shape refused, a golden not reproduced)        -- never an exception
    2  the harness was asked something it cannot do: :class:`HarnessError` (bad input, missing
       file, server down), or :class:`Interrupted` (SIGINT, SIGTERM), printed as
       ``harness: error: <where>: <what>``
    3  anything else: an internal error (a bug), printed as one line naming the command and the
       step it was in; ``--debug`` (or ``HARNESS_DEBUG=1``) adds the traceback

Every :class:`HarnessError` names *where* (block, file, key, request) and *what*.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Iterator

from harness.base import phases
from harness.base.env_vars import variables

EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3

_STEP: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("harness_step", default=())


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Name the pipeline step in progress, so an internal error can say where it happened (and, with
    ``HARNESS_PHASES`` set, what it cost: :mod:`harness.base.phases`).

    The step is attached to an exception that leaves it (``harness_step``, innermost first): by the
    time the command line reports the exception, every step has been left."""
    token = _STEP.set((*_STEP.get(), name))
    phases.enter(name)
    try:
        yield
    except BaseException as exc:
        if getattr(exc, "harness_step", None) is None:
            with contextlib.suppress(AttributeError, TypeError):
                exc.harness_step = current_step()  # type: ignore[attr-defined]
        raise
    finally:
        phases.leave(current_step())
        _STEP.reset(token)


def current_step() -> str:
    return " > ".join(_STEP.get()) or "start-up"


def failed_step(exc: BaseException) -> str:
    """Where an unexpected exception happened: the named pipeline step it left, else the innermost
    function of the harness's own code it was raised in (``module.function``)."""
    named = getattr(exc, "harness_step", None)
    if isinstance(named, str) and named:  # set by step() above; anything else is not ours
        return named
    import traceback

    ours = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if any(f"/{pkg}/" in f.filename.replace("\\", "/") for pkg in ("harness", "lanes", "golden", "reports"))
        and f.name != "fault"
    ]  # a fault injected by a test is the caller's
    if not ours:
        return current_step()
    frame = ours[-1]
    module = frame.filename.replace("\\", "/").rsplit("/", 2)
    return f"{module[-2]}/{module[-1]}:{frame.name}"


class HarnessError(Exception):
    """Base of every failure the harness expects and explains (exit status 2)."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: the command stopped; whatever it had started writing was removed (exit 2).

    A ``KeyboardInterrupt``, not a :class:`HarnessError`: best-effort code that catches
    ``Exception`` (localisation, a foreign packer) must never swallow it, while every clean-up
    (``except BaseException``, ``finally``) still runs."""


# A signal is not raised where it lands (inside an import, a third-party library that swallows
# exceptions: measured, pyarrow's lazy pandas import did, and the command ran on to exit 0). The
# command line's handler records it; the harness raises it at the next check point: before every
# network call, every Parquet row group written or read, every corpus block, every batch scored,
# and before any output is renamed into place, so nothing is committed after a Ctrl-C.
_SIGNALS: list[str] = []


def request_interrupt(signal_name: str) -> None:
    """Record a SIGINT/SIGTERM (the command line's signal handler calls this)."""
    _SIGNALS.append(signal_name)


def clear_interrupt() -> None:
    _SIGNALS.clear()


# A clean-up that must finish (join a writer thread, then remove the file it wrote) is not interrupted by a
# second signal: the handler raises where it lands, and between the join and the removal, or between the
# request to stop and the join, a raise would leave a thread writing into a file about to be closed under it
# (harness.base.workers). Inside ``clean_up()`` the handler only records the signal; the command still ends
# as interrupted, at its next check point or at the command line's end.
# Per thread: the handler runs in the main thread and asks about the main thread's clean-up, not a writer's.
_CLEANING = threading.local()


@contextlib.contextmanager
def clean_up() -> Iterator[None]:
    """A clean-up no second SIGINT/SIGTERM breaks off (the command line's handler records it and goes on)."""
    _CLEANING.depth = getattr(_CLEANING, "depth", 0) + 1
    try:
        yield
    finally:
        _CLEANING.depth -= 1


def cleaning_up() -> bool:
    """Is this thread (the signal handler's: the main thread) inside :func:`clean_up`?"""
    return getattr(_CLEANING, "depth", 0) > 0


def interrupt_requested() -> str | None:
    return _SIGNALS[0] if _SIGNALS else None


def check_interrupted() -> None:
    """Raise :class:`Interrupted` if a signal asked the command to stop (main thread only: a writer
    thread's work is abandoned by the main thread's clean-up)."""
    if _SIGNALS:
        if threading.current_thread() is threading.main_thread():
            raise Interrupted(interrupted_message(_SIGNALS[0]))


# What this command has committed so far (an output renamed into place, a ledger transaction, a journal), in
# order, so that an interruption says exactly what is on disk and what the next command will finish: "nothing
# partial was written as complete" is true, but after a ledger commit it is not the whole truth.
# Recorded only inside a command (:func:`command_record`, which the command line opens): a library caller's
# commits are its own business, and one command's never leak into the next one's message.
_COMMITTED: dict[str, tuple[str, str | None]] = {}
_RECORDING: list[bool] = []


@contextlib.contextmanager
def command_record() -> Iterator[None]:
    """One command's record of what it committed (starts empty)."""
    _COMMITTED.clear()
    _RECORDING.append(True)
    try:
        yield
    finally:
        _RECORDING.pop()
        _COMMITTED.clear()


def committed(path: object, what: str, finish: str | None = None) -> None:
    """Record that ``what`` (at ``path``) is committed; ``finish`` says what the next command will complete from
    it (a journaled ledger commit). Recording the same path again replaces its entry."""
    if not _RECORDING:
        return
    _COMMITTED.pop(str(path), None)
    _COMMITTED[str(path)] = (what, finish)


def uncommitted(path: object) -> None:
    """Forget ``path``'s entry (a journal the same command then applied and removed)."""
    _COMMITTED.pop(str(path), None)


def committed_outputs() -> list[tuple[str, str, str | None]]:
    """(path, what, what the next command finishes) for every commit of this command, in order."""
    return [(path, what, finish) for path, (what, finish) in _COMMITTED.items()]


def interrupted_message(signal_name: str) -> str:
    """The one line of an interrupted command: what it had committed before the signal (each output, and what
    the next command finishes from a journal), then that nothing partial was written as complete."""
    done = committed_outputs()
    if not done:
        return f"interrupted ({signal_name}); nothing partial was written as complete"
    parts = [f"{what} ({path})" for path, what, _ in done]
    then = [finish for _, _, finish in done if finish]
    text = f"interrupted ({signal_name}) after committing: {'; '.join(parts)}"
    if then:
        text += f"; {'; '.join(then)}"
    return text + "; nothing else was written, and nothing partial was written as complete"


class BlockError(HarnessError):
    """A block (or a request) violates the request contract (docs/models.md).

    ``block_id``, ``field`` and ``value`` are kept as attributes so tests and callers can
    check what was named without parsing the message.
    """

    def __init__(self, block_id: str, field: str, value: object, reason: str) -> None:
        self.block_id = block_id
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"block {block_id!r}: {field}={short(value)}: {reason}")


class PackingError(HarnessError):
    """Blocks that cannot be packed together, or outputs that do not unpack."""


class ModelError(HarnessError):
    """A model that cannot be loaded, or that answers outside the contract."""


class CorpusError(HarnessError):
    """A corpus source or file that cannot be turned into valid blocks."""


class ConfigError(HarnessError):
    """A release configuration key that is unknown or has a bad value."""


class GoldenError(HarnessError):
    """A golden or run directory that is missing, tampered, truncated or mismatched."""


class LaneError(HarnessError):
    """A lane asked to do something its contract forbids (e.g. a non-release shape)."""


class BackendError(HarnessError):
    """A backend (in-process model or Triton server) that failed or answered wrongly."""


class ScoringError(HarnessError):
    """A run and a golden that cannot be compared (different corpus, missing OP, ...)."""


class SchemaError(HarnessError):
    """A file (manifest, score, ledger, config, ...) that is not what its schema declares."""


class LedgerError(HarnessError):
    """A ledger or promoted-shapes manifest that cannot be trusted or updated."""


class OutputError(HarnessError):
    """An output that cannot be written (not writable, a directory, disk full, ...)."""


# ``--debug`` (or HARNESS_DEBUG=1): the command line sets it for one command. Besides the traceback of a failure,
# it shows notes on what the harness set aside on its own and why (a cache entry it ignored), one line each.
_DEBUG: list[bool] = []


@contextlib.contextmanager
def debugging(on: bool) -> Iterator[None]:
    """One command run with ``--debug`` (``on``) or without."""
    _DEBUG.append(on)
    try:
        yield
    finally:
        _DEBUG.pop()


def debug_note(text: str) -> None:
    """``harness: note: <text>`` on stderr, under ``--debug`` only (HARNESS_DEBUG=1 outside a command)."""
    if _DEBUG[-1] if _DEBUG else variables().debug:
        print(f"harness: note: {one_line(text)}", file=sys.stderr, flush=True)


def short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


SCREEN: int = 1000  # the longest line the harness prints: about a screen; past it, cut with a count (clip_line)
ECHO: int = 120  # the longest echo of one value a user gave (a command, a path, a list) inside a line


def clip(value: object, limit: int = ECHO, quote: bool = True) -> str:
    """A value the user gave, as a message quotes it (``repr`` for text), cut past ``limit`` characters with a
    count of what was cut: ``'python packer.py --huge aaaa...' [+199880 characters]``. A value of any length
    then keeps its line on a screen, and the reader still sees how long it was."""
    text = repr(value) if isinstance(value, str) and quote else str(value)
    if len(text) <= limit:
        return text
    keep = max(limit - 24, 8)
    return f"{text[:keep]}... [+{len(text) - keep} characters]"


def clip_list(values: object, keep: int = 8) -> str:
    """A list a user gave (shapes, concurrencies) as a line shows it: ``[2, 3, 4, ... +9993 more]`` past ``keep``
    items, so ten thousand shapes stay one short line."""
    items = list(values)  # type: ignore[call-overload]
    if len(items) <= keep:
        return str(items)
    return "[" + ", ".join(str(v) for v in items[:keep]) + f", ... +{len(items) - keep} more]"


def clip_line(line: str, limit: int = SCREEN) -> str:
    """A whole line cut to about ``limit`` characters: its start and its end kept (where and what; the end often
    says what to do), the middle replaced by a count of the characters cut."""
    if len(line) <= limit:
        return line
    head, tail = (limit * 2) // 3, limit // 4
    return f"{line[:head]} ... [{len(line) - head - tail} characters cut] ... {line[-tail:]}"


def one_line(text: object, limit: int = 300) -> str:
    """A message (another library's, often multi-line) as one line of at most ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
