"""The packing-laws verdict of the packer a run's fast lane uses, judged at the start of the run.

Every shape's verdict rests on the packer: a packer that leaks one block's audio into another's
window can still match the golden on a corpus where the leak lands on silence. So each run (every
shard and Ray worker too: :func:`harness.pipeline.run.run_shapes` calls this) judges its packer
with :func:`harness.laws.check_packer` (default examples, a fixed seed, the largest candidate k as
the largest list where the kit takes one) and records the verdict in the run manifest's ``laws``;
the score copies it, and a packer that did not hold them fails every shape
(:func:`harness.evidence.shape_gates.laws_refusal`). ``--laws-examples 0`` records ``not-judged``: the run
runs, nothing can be promoted from it.

The harness's own packer is the same code for every run: its verdict is a function of the
harness's source, the laws' settings and the libraries they run on, so it is judged once per
(identity, examples, seed, largest k, digest of every harness source file, hypothesis and numpy
versions) and reused: within a process, and across processes through a small sealed file under
``$XDG_CACHE_HOME/diar-lane-harness/laws`` (``~/.cache``; ``HARNESS_LAWS_CACHE=off`` judges every
time, ``HARNESS_LAWS_CACHE=DIR`` puts it elsewhere). Any change to the harness's code is another key:
an edited packer is judged again. A foreign packer is judged every run (its identity cannot bind
everything it runs). A cache entry is used only when it is sealed, of this very key, validates as a
verdict and agrees with every field of its key (identity, examples, seed, harness version); anything else
(unreadable, edited, re-sealed with another figure, another packer's) is ignored, with a one-line note
under ``--debug``, and the laws are judged afresh (then written over it).

A verdict found in the cache costs no import of hypothesis (nor of :mod:`harness.laws`, which imports
it: ~1 s of the run's start-up): the key takes hypothesis's version from its installed metadata.
``judge_laws(..., beside=True)`` (what :func:`harness.pipeline.run.run_shapes` calls) judges the
harness's own packer in a thread beside the lanes and returns a :class:`~concurrent.futures.Future`:
the verdict only goes into the run manifest, so ``run_shapes`` joins it after the lanes, before the run is written,
and an error in it ends the command with its own line (step ``packing laws``) and no run is kept.
A foreign packer is judged before the lanes: an external one in a process of its own at the laws'
geometry (a packer process keeps its session's geometry), a Python one with its geometry set for the
judging. Its first failure (a crash, a stall) ends the judging, and the command: it is not restarted.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, ValidationError

from harness import __version__
from harness.base.errors import HarnessError, debug_note, short, step
from harness.base.fsio import user_cache_dir
from harness.base.jsonio import read_json, seal, seal_ok, write_json_atomic
from harness.data.schemas.base import describe_error
from harness.data.schemas.files import LawsVerdict
from harness.data.schemas.laws_file import DescribedPacker
from harness.packers.packing import LAWS_DEFAULT_MAX_BLOCKS, HarnessPacker, Packer

DEFAULT_EXAMPLES = 100
SEED = 0
# The largest list the laws pack: the largest candidate k, up to this (the laws' cost grows with it:
# 256 blocks already take ~5 s of CPU at one example per law, 8192 did not finish in 4 minutes).
MAX_JUDGED_BLOCKS = 64
DEFAULT_MAX_BLOCKS = LAWS_DEFAULT_MAX_BLOCKS  # harness.laws's default, from where no hypothesis is imported
LawsKey = tuple[str, int, int, int]  # (packer identity, examples, seed, largest list judged)
_CACHE: dict[LawsKey, LawsVerdict] = {}


def packer_identity(packer: Packer) -> str:
    """The packer's identity (the ``identity`` it describes itself with), or its name where a packer has none."""
    describe = getattr(packer, "describe", None)
    facts = DescribedPacker.of(describe() if describe else {})
    return str(facts.identity or facts.name or getattr(packer, "name", "?"))


@contextmanager
def _judged_as_the_laws_need(packer: Packer) -> Iterator[Packer]:
    """The packer to judge, at the laws' geometry (``LAW_GEOMETRY``): their examples have their own, and a
    foreign packer validates (and an external one encodes: every wire request carries it) with the one it
    was built for, the model's. A packer process keeps its session's geometry for life, so an external
    packer is judged in a process of its own (``with_geometry``: the same command, its own ``hello``),
    ended after; an in-process packer's geometry is set for the judging and restored after."""
    from harness.laws import LAW_GEOMETRY  # deferred: imports hypothesis (start-up)

    sibling = getattr(packer, "with_geometry", None)
    if callable(sibling):
        judged = sibling(LAW_GEOMETRY)
        try:
            yield judged
        finally:
            judged.close()
        return
    held: Any = packer  # a geometry is an attribute of some packers only, not of the Packer protocol
    saved = getattr(held, "geometry", None)
    if saved is None:  # the harness's own packer has none
        yield packer
        return
    try:
        held.geometry = LAW_GEOMETRY
        yield packer
    finally:
        held.geometry = saved


@contextmanager
def _no_files_left_by_hypothesis() -> Iterator[None]:
    """hypothesis caches what it learns under ``./.hypothesis`` (even without an example database): a
    run must leave nothing in the user's folder, so it keeps it in a temporary folder, removed after."""
    from hypothesis import configuration

    before = configuration.__dict__.get("__hypothesis_home_directory")  # hypothesis keeps no public getter
    with tempfile.TemporaryDirectory(prefix="harness-laws-") as home:
        configuration.set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(before)


@overload
def judge_laws(
    packer: Packer, examples: int = ..., max_blocks: int | None = ..., beside: Literal[False] = ...
) -> LawsVerdict: ...


@overload
def judge_laws(packer: Packer, examples: int, max_blocks: int | None, beside: Literal[True]) -> Future[LawsVerdict]: ...


def judge_laws(
    packer: Packer, examples: int = DEFAULT_EXAMPLES, max_blocks: int | None = None, beside: bool = False
) -> LawsVerdict | Future[LawsVerdict]:
    """The run manifest's ``laws``: the packer's identity, examples, seed, verdict, broken laws, each law's
    status and the harness's version.

    ``beside``: a Future of it, judged in a thread for the harness's own packer (step ``packing laws``;
    ``future.result()`` raises what judging raised), at once for any other (that packer is the lanes'
    too; its error is raised here, before the lanes)."""
    if not beside:
        return _judge(packer, examples, max_blocks)
    future: Future[LawsVerdict] = Future()
    if not isinstance(packer, HarnessPacker) or examples <= 0:
        with step("packing laws"):  # now, and an error now: before the lanes, as without beside
            future.set_result(_judge(packer, examples, max_blocks))
        return future
    context = contextvars.copy_context()  # the command's steps, so an internal error names where it was
    threading.Thread(
        target=context.run, args=(_settle, future, packer, examples, max_blocks), name="harness-laws", daemon=True
    ).start()
    return future


def _settle(future: Future[LawsVerdict], packer: Packer, examples: int, max_blocks: int | None) -> None:
    """Judge into ``future``: its result, or the exception (any, Ctrl-C's included) for the joiner to raise."""
    try:
        with step("packing laws"):
            verdict = _judge(packer, examples, max_blocks)
    except BaseException as exc:  # noqa: BLE001 - handed to the thread that joins
        future.set_exception(exc)
    else:
        future.set_result(verdict)


def _judge(packer: Packer, examples: int, max_blocks: int | None) -> LawsVerdict:
    identity = packer_identity(packer)
    if examples <= 0:
        return _verdict(identity, examples, "not-judged", [], {})
    # the largest list judged, as judged: every largest k past the cap is one key, not one per k
    max_blocks = min(int(max_blocks or DEFAULT_MAX_BLOCKS), MAX_JUDGED_BLOCKS)
    key: LawsKey = (identity, int(examples), SEED, max_blocks)
    own = isinstance(packer, HarnessPacker)
    if own and key in _CACHE:
        return _CACHE[key].model_copy()
    cached = _read_cached(key) if own else None
    if cached is not None:
        _CACHE[key] = cached.model_copy()
        return cached
    from harness.laws import check_packer  # hypothesis is imported only when a run judges

    with _judged_as_the_laws_need(packer) as judged, _no_files_left_by_hypothesis():
        report = check_packer(judged, examples=int(examples), seed=SEED, max_blocks=max_blocks)
        # the verdict is the judged process's: if it named itself otherwise, the verdict is not the lanes' packer's
        identity = packer_identity(judged)
        from harness.packers import check_unchanged  # deferred: imports pyarrow (start-up)

        check_unchanged(judged)  # judged what its identity names: its files did not change while it ran
    result = _verdict(
        identity,
        examples,
        "hold" if report.ok else "broken",
        [o.law for o in report.broken],
        {o.law: o.status for o in report.outcomes},
    )
    if own:
        _CACHE[key] = result.model_copy()
        _write_cached(key, result)
    return result


def _verdict(
    identity: str,
    examples: int,
    verdict: Literal["hold", "broken", "not-judged"],
    broken: list[str],
    laws: dict[str, str],
) -> LawsVerdict:
    """The verdict as judged, not validated here: the run manifest that records it is validated where it is read,
    so a verdict it refuses is refused there, as every other field of the manifest."""
    return LawsVerdict.model_construct(
        packer_identity=identity,
        examples=int(examples),
        seed=SEED,
        verdict=verdict,
        broken=broken,
        laws=laws,
        harness_version=__version__,
    )


@functools.cache
def _source_digest() -> str:
    """sha256 over every source file of the harness (names and bytes): the code a verdict is of."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _cache_file(key: LawsKey) -> Path | None:
    where = os.environ.get("HARNESS_LAWS_CACHE", "")  # an environment variable, by its name
    if where.lower() in ("off", "0", "no"):
        return None
    import numpy

    base = Path(where) if where else user_cache_dir("laws")
    if base is None:  # no home folder: judged every run, as with HARNESS_LAWS_CACHE=off
        return None
    full = repr((*key, _source_digest(), _hypothesis_version(), numpy.__version__))
    return base / f"{hashlib.sha256(full.encode()).hexdigest()[:32]}.json"


@functools.cache
def _hypothesis_version() -> str:
    """hypothesis's version without importing it (~1 s): its installed metadata, which is what
    ``hypothesis.__version__`` reports (pinned equal in tests/test_laws_beside.py)."""
    try:
        return metadata.version("hypothesis")
    except metadata.PackageNotFoundError:  # not installed: judging will say so when it imports it
        return "absent"


def _read_cached(key: LawsKey) -> LawsVerdict | None:
    """The verdict judged before for exactly this key, or None: judged afresh (no file; under ``--debug`` a
    one-line note says why an entry was set aside).

    An entry is used only when it is whole and sealed, names this key, validates as a verdict
    (:class:`~harness.data.schemas.files.LawsVerdict`: a run manifest refuses anything else, after the whole
    run) and agrees with every field of its key: the packer identity, the examples, the seed, and the harness
    version that judged. A sealed entry can still be wrong (re-sealed by hand, written by a harness with a
    bug): its verdict goes into the run manifest, the score and the ledger's evidence, so it must be the
    verdict of exactly what this run asked for."""
    path = _cache_file(key)
    if path is None or not path.exists():
        return None
    verdict, why = _entry(path, key)
    if verdict is None:
        debug_note(f"{path}: laws verdict cache entry ignored ({why}); judging the packing laws afresh")
    return verdict


class _CacheEntry(BaseModel):
    """A sealed cache entry's two parts, as written (any JSON: an entry of another key, or one edited by hand,
    is told apart by comparing them; its verdict is validated into :class:`LawsVerdict` only after its key
    matched, so a refusal names the first thing wrong)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    key: object = None  # repr() of the LawsKey it was judged for
    verdict: object = None  # LawsVerdict's JSON


def _entry(path: Path, key: LawsKey) -> tuple[LawsVerdict | None, str]:
    """The verdict of the cache entry at ``path`` if it may stand for ``key``'s, else None and why not."""

    try:
        data = read_json(path, "laws verdict cache")
    except HarnessError as exc:
        return None, str(exc)
    if not isinstance(data, dict) or not seal_ok(data, "sha256"):
        return None, "not a sealed entry: edited after it was written"
    entry = _CacheEntry.model_validate(data)
    if entry.key != repr(key):
        return None, f"of another key {short(entry.key)}"
    try:
        verdict = LawsVerdict.model_validate(entry.verdict)
    except ValidationError as exc:
        return None, f"its verdict does not validate: {describe_error(exc)}"
    identity, examples, seed, _ = key
    asked = (
        ("packer_identity", verdict.packer_identity, identity),
        ("examples", verdict.examples, examples),
        ("seed", verdict.seed, seed),
        ("harness_version", verdict.harness_version, __version__),
    )
    for name, found, value in asked:
        if found != value:
            return None, f"its verdict's {name} is {short(found)}, its key's {short(value)}"
    if verdict.verdict == "not-judged":  # examples > 0 here: the schema allows not-judged only with none
        return None, "its verdict is not-judged"
    return verdict, ""


def _write_cached(key: LawsKey, result: LawsVerdict) -> None:
    """Best effort: a cache that cannot be written costs the next run its judging, nothing else."""
    path = _cache_file(key)
    if path is None:
        return
    with contextlib.suppress(OSError, HarnessError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, seal({"key": repr(key), "verdict": result.model_dump()}, "sha256"))
