"""A set of outputs that belong together, published as one unit: a reader sees the old set or the new one.

A nightly's score, localisation, report pages, JUnit file and summary; an audit's ``audit.json``,
``junit.xml`` and report pages; a report's three pages. Renaming the files one by one (even after
all were written) leaves a mix when a kill lands between two renames: ``audit.json`` the new FAIL,
``junit.xml`` still the old PASS. So the set lives in a generation folder and one ``rename(2)``
switches every member at once. In the folder ``F`` that holds set ``S``::

    F/.S.gen-<time>-<hex>/     one generation: every member of the set, written and fsynced
    F/.S.current -> .S.gen-... the generation readers see: a symlink, replaced by one rename (the commit)
    F/<member> -> .S.current/<member>   each member's usual name (report.html, junit.xml, ...); made once

Publishing (:func:`output_set`): the caller writes every member into a temporary sibling folder
``F/.S.tmp-<pid>-<hex>`` (a temporary name: ignored by every reader, removed on any failure);
then it is fsynced, renamed to its generation name, the member links it needs are made (a link to
a member the old set lacks shows nothing until the switch), ``.S.current`` is replaced (the one
step that changes what a reader sees), links to members the new set lacks are removed, and
generations older than the previous one are removed (a reader that pinned the previous one can
finish). A Ctrl-C or SIGTERM before the switch publishes nothing; a kill at any step leaves the old
set whole (and at most a temporary folder or an unreferenced generation, removed by the next
publish). Members written by something else at their usual name (an old harness, ``harness score
--out nightly/score.json``) are first adopted into a generation of their own, one name at a time
showing the same bytes, so even that first switch is old set -> new set.

Readers that open several members pin the generation once (:func:`pin`), so a publish between two
reads cannot give them two generations.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import errno
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.base.errors import OutputError, check_interrupted
from harness.base.fsio import (
    dir_mode,
    fault,
    fsync_path,
    lock_path,
    locked,
    make_dirs,
    missing_dirs,
    os_failure,
    remove_empty,
    remove_path,
)

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def current_link(folder: Path, name: str) -> Path:
    return Path(folder) / f".{name}.current"


def _target(name: str, member: str) -> str:
    return f".{name}.current/{member}"


@contextlib.contextmanager
def output_set(folder: Path, name: str, members: Sequence[str]) -> Iterator[Path]:
    """Yield a fresh temporary folder; write the set's members (``members``: names directly under
    ``folder``, files or folders) into it. When the block succeeds they replace the previous set in
    ``folder`` in one step (module doc); when it fails, or a signal came, nothing changes.

    A member the block did not write is absent from the new set (its name shows nothing)."""
    folder = Path(folder)
    members = tuple(members)
    created = missing_dirs(folder)
    stage = folder / f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    gen: Path | None = None
    made: list[Path] = []  # member names this publish created (they show nothing until the switch)
    in_block = False  # an OSError of the caller's own block is its own, not this publish's
    try:
        make_dirs(folder)
        stage.mkdir(mode=dir_mode())
        in_block = True
        yield stage
        in_block = False
        check_interrupted()  # nothing is published after a Ctrl-C
        extra = sorted(p.name for p in stage.iterdir() if p.name not in members)
        if extra:
            raise RuntimeError(f"output set {name!r}: {extra} written but not declared as members")
        _fsync_tree(stage)
        with locked(folder / name):  # two publishers of one set in one folder take turns
            fault(f"set:{name}:staged")
            gen = folder / f".{name}.gen-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"
            os.rename(stage, gen)
            fsync_path(folder)
            fault(f"set:{name}:generation")
            _adopt(folder, name, members)
            present = {p.name for p in gen.iterdir()}
            for member in members:
                if member in present and not (folder / member).is_symlink() and not (folder / member).exists():
                    made.append(folder / member)
                if member in present:
                    _link_member(folder, name, member)
            fsync_path(folder)
            fault(f"set:{name}:linked")
            check_interrupted()  # the last moment a signal can stop the publish
            previous = _current(folder, name)
            _switch(folder, name, gen)  # the commit point: every member changes at once
            fault(f"set:{name}:switched")
            for member in members:
                link = folder / member
                if member not in present and link.is_symlink() and os.readlink(link) == _target(name, member):
                    link.unlink()  # showed nothing since the switch; the name goes too
            _collect(folder, name, keep={gen.name, previous})
    except BaseException as exc:
        remove_path(stage)
        if gen is not None and _current(folder, name) != gen.name:
            remove_path(gen)
            for link in made:  # new names of a set that was not published: they go with it
                remove_path(link)
        if created:  # a folder this publish made holds nothing else: the lock goes too
            remove_path(lock_path(folder / name))
        remove_empty(created)
        if isinstance(exc, OSError) and not in_block:
            raise os_failure(folder, exc, f"cannot publish the {name} outputs in") from None
        if isinstance(exc, OutputError):  # a member that could not be written: named where it was going
            raise OutputError(str(exc).replace(str(stage), str(folder))) from None
        raise


def pin(paths: Sequence[Path]) -> list[Path]:
    """The same paths, with every member of a published set (or a file inside a member folder) read through one
    generation: the set's current one, resolved once for all of them, so two reads never straddle a publish."""
    resolved: dict[Path, str | None] = {}
    out = []
    for p in paths:
        p = Path(p)
        out.append(p)
        for inner, member_path in ((Path(), p), (Path(p.name), p.parent)):
            link = os.readlink(member_path) if member_path.is_symlink() else ""
            head, sep, member = link.partition("/")
            if not (sep and head.startswith(".") and head.endswith(".current") and "/" not in member):
                continue
            current = member_path.parent / head
            if current not in resolved:
                resolved[current] = _current(member_path.parent, head[1 : -len(".current")])
            generation = resolved[current]
            if generation is not None:  # else nothing is published: the name shows nothing, as it is
                out[-1] = member_path.parent / generation / member / inner
            break
    return out


# ---------------------------------------------------------------------------------- steps


def _adopt(folder: Path, name: str, members: tuple[str, ...]) -> None:
    """Members at their usual name that are not this set's links (written by something else): copy what a
    reader sees now into a generation, point ``.S.current`` at it, then swap each name for its link. Every
    step shows the same bytes, so the publish that follows switches old set -> new set."""
    foreign = [
        m
        for m in members
        if (folder / m).exists() or (folder / m).is_symlink()
        if not ((folder / m).is_symlink() and os.readlink(folder / m) == _target(name, m))
    ]
    if not foreign:
        return
    stage = folder / f".{name}.tmp-adopt-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir(mode=dir_mode())
    try:
        for m in members:
            src = folder / m
            if not src.exists():
                continue  # absent, or a link that shows nothing
            if src.is_dir():
                shutil.copytree(src, stage / m, symlinks=False)
            else:
                shutil.copy2(src, stage / m)
        _fsync_tree(stage)
        gen = folder / f".{name}.gen-adopted-{secrets.token_hex(4)}"
        os.rename(stage, gen)
    except BaseException:
        remove_path(stage)
        raise
    _switch(folder, name, gen)
    for m in foreign:
        if (folder / m).exists() and not (gen / m).exists():
            continue  # appeared meanwhile: not ours to replace
        _link_member(folder, name, m)


def _link_member(folder: Path, name: str, member: str) -> None:
    """Make ``folder/member`` the link through ``.S.current``: one rename over a file or link, an exchange
    (or, where the kernel has none, two renames) over a real folder."""
    path, target = folder / member, _target(name, member)
    if path.is_symlink() and os.readlink(path) == target:
        return
    tmp = folder / f".{member}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.symlink(target, tmp)
    try:
        if path.is_dir() and not path.is_symlink():
            if not swap_paths(tmp, path):
                aside = folder / f".{member}.tmp-old-{os.getpid()}-{secrets.token_hex(4)}"
                os.rename(path, aside)
                os.rename(tmp, path)
                tmp = aside
            remove_path(tmp)  # the old folder, now under the temporary name
        else:
            os.replace(tmp, path)
    except BaseException:
        if tmp.is_symlink():
            tmp.unlink()
        raise


def _switch(folder: Path, name: str, gen: Path) -> None:
    link = current_link(folder, name)
    tmp = folder / f".{name}.current.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.symlink(gen.name, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink()
        raise
    fsync_path(folder)


def _current(folder: Path, name: str) -> str | None:
    """The generation readers see now (its folder name), None before the first publish."""
    try:
        return os.readlink(current_link(folder, name))
    except OSError:
        return None


def _collect(folder: Path, name: str, keep: set[str | None]) -> None:
    """Remove every generation but the current and the previous one (kept for a reader that pinned it), and
    the ones a killed publish left."""
    for p in folder.glob(f".{name}.gen-*"):
        if p.name not in keep:
            remove_path(p)
    stale = re.compile(rf"\.{re.escape(name)}(?:\.current)?\.tmp-(?:adopt-)?(\d+)-[0-9a-f]+")
    for p in folder.glob(f".{name}.*tmp-*"):
        match = stale.fullmatch(p.name)
        if match and int(match.group(1)) != os.getpid() and not process_alive(int(match.group(1))):
            remove_path(p)  # a killed publisher's stage: its process is gone, nobody will finish it


def process_alive(pid: int) -> bool:
    """Whether a process with this pid runs (another user's counts: it may still be writing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def swap_paths(a: Path, b: Path) -> bool:
    """``renameat2(a, b, RENAME_EXCHANGE)``: swap two names atomically; False where libc or the file system
    has no such call."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    if fn(_AT_FDCWD, os.fsencode(str(a)), _AT_FDCWD, os.fsencode(str(b)), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            fsync_path(Path(dirpath) / f)
        os.chmod(dirpath, dir_mode())
        fsync_path(Path(dirpath))
