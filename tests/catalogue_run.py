"""Running the catalogue's cases: a workspace per case, the command in-process or in a subprocess
(a signal, another user), and the checks every case shares."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from harness import cli
from tests.catalogue_setups import CFG, CONFIG, NOBODY, QUIET, ROOT, RUN, Case, run_dir


@dataclass
class Base:
    root: Path
    run: str  # "runs/<run id>"


def cli_status(*args: str) -> int:
    try:
        cli.main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def build_base(root: Path) -> Base:
    """One small golden, run, score, ledger (a promoted shape), localisation, corpus and WAV in ``root``,
    made with the command line itself (so every path in them is relative to ``root``)."""
    from harness.corpus.wav import write_wav

    here = os.getcwd()
    slow = os.environ.get("HARNESS_SLOW_SECONDS")
    os.chdir(root)
    try:
        (root / "harness.toml").write_text(CONFIG)
        assert cli_status("corpus", "synth", "c.parquet", "--blocks", "4", *CFG) == 0
        assert cli_status("golden", "record", "--corpus", "c.parquet", *CFG, *QUIET) == 0
        assert cli_status("run", "--golden", "goldens/r", *CFG, *QUIET) == 0
        (run,) = (root / "runs").iterdir()
        assert cli_status("score", "--golden", "goldens/r", "--run", f"runs/{run.name}", *CFG) == 0
        assert cli_status("promote", "--score", "score.json", *CFG) == 0
        score = json.loads((root / "score.json").read_text())
        (root / "localisation.json").write_text(
            json.dumps({"kind": "harness.localisation", "format": 1, "score_digest": score["digest"], "shapes": {}})
        )
        # a golden of the slow negative control (recorded fast), for signals during run and nightly
        os.environ["HARNESS_SLOW_SECONDS"] = "0"
        assert (
            cli_status(
                "golden",
                "record",
                "--corpus",
                "c.parquet",
                "--release",
                "slow",
                "--model",
                "lanes.controls:slow",
                *CFG,
                *QUIET,
            )
            == 0
        )
        rng = np.random.default_rng(0)
        write_wav(root / "a.wav", 0.1 * rng.standard_normal(3 * 16_000), 16_000)
    finally:
        os.chdir(here)
        if slow is None:
            os.environ.pop("HARNESS_SLOW_SECONDS", None)
        else:
            os.environ["HARNESS_SLOW_SECONDS"] = slow
    ledger = json.loads((root / "ledger.json").read_text())
    assert [e["state"] for e in ledger["entries"].values()] == ["promoted"], ledger
    return Base(root, f"runs/{run.name}")


def snapshot(root: Path) -> dict[str, str]:
    """Every file (sha256) and folder under ``root``; lock files of the ledger are not results."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.name.endswith(".lock") and path.name.startswith("."):
            continue
        if path.is_symlink():
            out[rel] = "link"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            try:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            except PermissionError:  # a file of the "unreadable" cases, when the tests do not run as root
                out[rel] = f"unreadable {path.stat().st_size}"
    return out


def _format(argv: tuple[str, ...], ws: Path) -> list[str]:
    run = run_dir(ws).relative_to(ws).as_posix() if (ws / "runs").is_dir() and any((ws / "runs").iterdir()) else "x"
    return [a.replace(RUN, run) for a in argv]


def _run_inproc(ws: Path, argv: list[str], env: dict, monkeypatch, capsys) -> tuple[int, str, str]:
    monkeypatch.chdir(ws)
    monkeypatch.delenv("HARNESS_DEBUG", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = 0
    try:
        cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for name in set(sys.modules) - modules:  # plug-in modules of this workspace
            if name.startswith("geo_"):
                del sys.modules[name]
    out = capsys.readouterr()
    return code, out.out, out.err


def harness_env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_DEBUG", "HARNESS_FAULT")}
    env.update(PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _run_subprocess(
    ws: Path, argv: list[str], env: dict, prefix: tuple[str, ...] = (), timeout: float = 300
) -> tuple[int, str, str]:
    cmd = [*prefix, sys.executable, "-m", "harness.cli", *argv]
    p = subprocess.run(cmd, cwd=ws, env=harness_env(env), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------------------------- without permission, as root
# Root may write and read anything (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). The cases of an unwritable folder
# or an unreadable file run their command without those two capabilities, still as root, against a folder and
# files owned by another uid: the interpreter, the checkout and the workspace stay root's own, so it does not
# matter where the checkout lives (a clone under a private folder, as /root is). Where capabilities cannot be
# dropped, the command runs as that other uid if it can reach the interpreter; else the cases skip, saying why.


@dataclass(frozen=True)
class Unprivileged:
    """How a command runs without the permissions ``ro/`` denies: a command prefix, and who owns ``ro/``."""

    how: str
    prefix: tuple[str, ...]
    owner: int  # uid owning ro/ and its files


DAC = "dac_override,dac_read_search"
WAYS = (
    Unprivileged(
        "root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH",
        ("setpriv", f"--bounding-set=-{DAC.replace(',', ',-')}", f"--inh-caps=-{DAC.replace(',', ',-')}"),
        NOBODY,
    ),
    Unprivileged(f"uid {NOBODY}", ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"), 0),
)
PROBE = (
    "import sys, harness.cli\nfor attempt in (lambda: open(sys.argv[1] + '/w', 'x'), "
    "lambda: open(sys.argv[1] + '/secret').read()):\n    try:\n        attempt()\n    except PermissionError:\n"
    "        continue\n    sys.exit('permitted: ' + repr(attempt))\n"
)


def _probe(way: Unprivileged) -> str | None:
    """None when ``way`` runs this interpreter and the harness, and is refused writing a folder of ``way.owner``
    (0755) and reading its file (0600); else why not."""
    top = Path(tempfile.mkdtemp(prefix="harness-dac-probe-"))
    try:
        os.chmod(top, 0o755)
        folder = top / "ro"
        folder.mkdir()
        (folder / "secret").write_text("x")
        os.chmod(folder / "secret", 0o600)
        os.chown(folder / "secret", way.owner, way.owner)
        os.chown(folder, way.owner, way.owner)
        os.chmod(folder, 0o755)
        try:
            p = subprocess.run(
                [*way.prefix, sys.executable, "-c", PROBE, str(folder)],
                capture_output=True,
                text=True,
                cwd="/",
                timeout=120,
            )
        except OSError as exc:
            return f"{way.how}: {exc}"
        return None if p.returncode == 0 else f"{way.how}: {(p.stderr.strip() or p.stdout.strip())[-300:]}"
    finally:
        shutil.rmtree(top, ignore_errors=True)


@functools.cache
def unprivileged() -> Unprivileged | str:
    """The first way that works here (as root), or why none does."""
    failures = []
    for way in WAYS:
        why = _probe(way)
        if why is None:
            return way
        failures.append(why)
    return "; ".join(failures)


def _run_with_signal(ws: Path, argv: list[str], env: dict, sig: signal.Signals, wait_for: str) -> tuple[int, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *argv],
        cwd=ws,
        env=harness_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(ws.glob(wait_for)):
            assert proc.poll() is None, f"the command ended before {wait_for} appeared: {proc.communicate()}"
            assert time.monotonic() < deadline, f"{wait_for} never appeared"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


@contextlib.contextmanager
def _shared_workspace(base: Base, way: Unprivileged | None):
    """A workspace with ``ro/``: a folder the command may not write, holding two files it may not read (``way``:
    how the command runs without those permissions as root, ``ro/`` owned accordingly; None: not root, plain
    modes). Reachable by another uid too (pytest's tmp_path is private to its owner), for that fallback."""
    top = Path(tempfile.mkdtemp(prefix="harness-catalogue-"))
    try:
        os.chmod(top, 0o755)
        ws = top / "ws"
        shutil.copytree(base.root, ws)
        os.chmod(ws, 0o755)  # pytest's temporary folders are private to their owner
        home = top / "home"
        home.mkdir(mode=0o777)
        os.chmod(home, 0o777)
        ro = ws / "ro"
        ro.mkdir()
        (ro / "secret.toml").write_text(CONFIG)
        shutil.copy(ws / "c.parquet", ro / "secret.parquet")
        for secret in ro.iterdir():
            os.chmod(secret, 0o600 if way is not None else 0o000)
            if way is not None:
                os.chown(secret, way.owner, way.owner)
        if way is not None:
            os.chown(ro, way.owner, way.owner)
        os.chmod(ro, 0o755 if way is not None else 0o555)
        yield ws, home
    finally:
        with contextlib.suppress(OSError):
            os.chmod(top / "ws" / "ro", 0o755)
            for secret in (top / "ws" / "ro").iterdir():
                os.chmod(secret, 0o644)
        shutil.rmtree(top, ignore_errors=True)


def check_one_line(case: Case, code: int, out: str, err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, f"CONTRACT {case.id}: a traceback:\n{err[-3000:]}"
    assert code == case.status, (
        f"CONTRACT {case.id}: exit {code}, expected {case.status}; stderr:\n{err[-3000:]}\nstdout:\n{out[-2000:]}"
    )
    prefix = "harness: internal error" if case.status == 3 else "harness: error: "
    assert len(lines) == 1 and lines[0].startswith(prefix), (
        f"CONTRACT {case.id}: expected one line '{prefix}...' on stderr, got {len(lines)}:\n{err[-3000:]}"
    )
    assert case.says in lines[0], f"MESSAGE {case.id}: {case.says!r} not in {lines[0]!r}"


def run_case(case: Case, base: Base, tmp_path: Path, monkeypatch, capsys) -> None:
    """Break one thing in a copy of the base workspace, run the command, check the promise."""
    env = dict(case.env)
    if case.how == "nobody":
        way = unprivileged() if ROOT else None
        if isinstance(way, str):
            pytest.skip(f"as root, no way to run a command without the permission to write a folder here: {way}")
        with _shared_workspace(base, way) as (ws, home):
            if case.setup:
                case.setup(ws)
            before = snapshot(ws)
            argv = _format(case.argv, ws)
            if way is not None:
                code, out, err = _run_subprocess(
                    ws, argv, {**env, "HOME": str(home), "MPLCONFIGDIR": str(home)}, way.prefix
                )
            else:
                code, out, err = _run_inproc(ws, argv, env, monkeypatch, capsys)
            after = snapshot(ws)
    else:
        ws = tmp_path / "ws"
        shutil.copytree(base.root, ws)
        if case.setup:
            case.setup(ws)
        before = snapshot(ws)
        argv = _format(case.argv, ws)
        if case.how == "inproc":
            code, out, err = _run_inproc(ws, argv, env, monkeypatch, capsys)
        elif case.how == "subprocess":
            code, out, err = _run_subprocess(ws, argv, env)
        else:
            code, out, err = _run_with_signal(ws, argv, env, getattr(signal, case.how), case.wait_for)
        after = snapshot(ws)
    if os.environ.get("CATALOGUE_LOG"):
        with open(os.environ["CATALOGUE_LOG"], "a") as log:
            log.write(json.dumps({"case": case.id, "code": code, "err": err}) + "\n")
    check_one_line(case, code, out, err)
    left = sorted(set(after) - set(before))
    gone = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    assert not (left or gone or changed), f"CONTRACT {case.id}: left {left}, removed {gone}, changed {changed}"
