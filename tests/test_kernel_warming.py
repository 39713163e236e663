"""The metrics kernels are warmed behind the command's serial start, not in its first sink.

The first sink of ``golden record`` computes the golden's decisions (``harness.compute.metrics.top_two``), the
nightly's live score compares rows (``row_stats``); the first call imported numba, scipy and llvmlite and
loaded or compiled the kernels, 2-12 s in the main thread while the device waited. ``start_warming`` does
that in a background thread (record: at its start; the nightly: once the first calls are queued); the
first use waits for it (it never compiles beside it). A plain ``run`` uses neither kernel and warms nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest

from harness.compute import metrics

ROOT = Path(__file__).resolve().parents[1]


def test_first_use_waits_for_the_warmer_and_never_warms_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("fake_kernels")
    release = threading.Event()
    entered = threading.Event()
    imports: list[str] = []
    warmed: list[str] = []

    def import_kernels() -> types.ModuleType:
        imports.append(threading.current_thread().name)
        return fake

    def call_each(kernels: types.ModuleType) -> None:
        warmed.append(threading.current_thread().name)
        entered.set()
        assert release.wait(60), "the test never released the warmer"

    monkeypatch.setattr(metrics, "_KERNELS", None)
    monkeypatch.setattr(metrics, "_KERNELS_TRIED", False)
    monkeypatch.setattr(metrics, "_import_kernels", import_kernels)
    monkeypatch.setattr(metrics, "_call_each", call_each)

    warmer = metrics.start_warming()
    assert entered.wait(60), "the warmer never started"
    got: list[object] = []
    user = threading.Thread(target=lambda: got.append(metrics._kernels()), name="first-use")
    user.start()
    user.join(0.5)  # correct code blocks here until released; only a defect can finish early
    assert user.is_alive() and not got, (
        "the first use of the kernels returned while the warmer was still compiling them: "
        f"got {got}; it must wait for the warmer (harness.compute.metrics._LOCK)"
    )
    release.set()
    warmer.join(60)
    user.join(60)
    assert got == [fake], f"first use got {got}, expected the warmed kernels"
    assert imports == ["metrics-kernels-warm"] and warmed == ["metrics-kernels-warm"], (
        f"imported in {imports}, warmed in {warmed}: expected once each, in the warmer thread only"
    )
    assert metrics._kernels() is fake


def test_a_failing_warmer_leaves_the_first_use_to_import_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("fake_kernels")
    calls: list[str] = []

    def call_each(kernels: types.ModuleType) -> None:
        calls.append("warm")
        raise RuntimeError("numba broke")

    monkeypatch.setattr(metrics, "_KERNELS", None)
    monkeypatch.setattr(metrics, "_KERNELS_TRIED", False)
    monkeypatch.setattr(metrics, "_import_kernels", lambda: fake)
    monkeypatch.setattr(metrics, "_call_each", call_each)
    metrics.start_warming().join(60)
    assert calls == ["warm"] and not metrics._KERNELS_TRIED, "a failed warm-up must not publish the kernels"
    assert metrics._kernels() is fake  # imported again, in the caller's thread (its error would surface there)


# commands with the null model, in a fresh interpreter: which thread imports numba, and
# how many specialisations each kernel has right after the warm-up and at the end (equal: every layout
# the sinks and scorers pass was compiled by the warmer, none in the main thread).
DRIVER = textwrap.dedent("""
    import json, os, sys, threading
    importer = {}

    class Spy:
        def find_spec(self, name, path=None, target=None):
            if name in ("numba", "reports"):
                importer.setdefault(name, threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Spy())
    from harness.compute import metrics
    after_warm = {}
    real_call_each = metrics._call_each

    def call_each(kernels):
        real_call_each(kernels)
        after_warm.update({n: len(getattr(kernels, n).signatures) for n in ("top_two", "row_stats")})

    metrics._call_each = call_each
    from harness.cli import main
    for argv in json.loads(os.environ["HARNESS_COMMANDS"]):
        try:
            main(argv)
        except SystemExit as exc:
            if exc.code not in (0, None) and not (argv[0] == "nightly" and exc.code == 1):  # 1: unjudged laws
                print(json.dumps({"failed": argv, "code": exc.code}))
                raise SystemExit(1)
    at_end = {"top_two": 0, "row_stats": 0}
    if "harness.compute.metrics_kernels" in sys.modules:  # never imported: no kernel was called
        k = sys.modules["harness.compute.metrics_kernels"]
        at_end = {n: len(getattr(k, n).signatures) for n in ("top_two", "row_stats")}
    print(json.dumps({"importer": importer.get("numba"), "reports_importer": importer.get("reports"),
                      "after_warm": after_warm, "at_end": at_end}))
""")


def _drive(tmp_path: Path, commands: list[list[str]]) -> dict[str, object]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HARNESS_COMMANDS": json.dumps(commands),
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    seen: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def _warmed_in_the_warmer(seen: dict[str, object], where: str) -> None:
    assert seen["importer"] == "metrics-kernels-warm", (
        f"numba was first imported in thread {seen['importer']!r}, expected the warmer ({where})"
    )
    assert seen["after_warm"] and seen["at_end"] == seen["after_warm"], (
        f"kernel specialisations after the warm-up {seen['after_warm']}, at the end {seen['at_end']}: "
        "a layout the commands pass was compiled outside the warmer; add it to metrics._call_each"
    )


# every lane warms up (the default leaves the packed shapes' out on a CPU): the null model's calls take microseconds,
# and the warm-up's are what the device is busy with while the imports this test watches happen beside it
CONFIG = (
    "[model]\nspec = 'lanes.models.null_model:small'\n[shapes]\ncandidates = [2]\n[evidence]\narrangements = 1\n"
    "[lanes]\nwarm_up = 'every-lane'\n"
)
RECORD = [
    ["corpus", "synth", "c.parquet", "--blocks", "4", "--config", "h.toml"],
    ["golden", "record", "--corpus", "c.parquet", "--config", "h.toml", "--release", "r", "--no-progress"],
]
RUN = ["run", "--golden", "goldens/r", "--config", "h.toml", "--no-progress", "--set", "packer.laws_examples=0"]
NIGHTLY = [
    "nightly",
    "--golden",
    "goldens/r",
    "--config",
    "h.toml",
    "--no-progress",
    "--set",
    "packer.laws_examples=0",
    "--out",
    "night",
    "--no-promote",
]


def test_golden_record_imports_and_compiles_the_kernels_in_the_warmer(tmp_path: Path) -> None:
    (tmp_path / "h.toml").write_text(CONFIG)
    _warmed_in_the_warmer(_drive(tmp_path, RECORD), "harness.compute.metrics.start_warming at record_golden's start")


def test_the_nightly_warms_the_kernels_its_score_uses_and_a_plain_run_none(tmp_path: Path) -> None:
    """``run`` scores nothing: warming there took CPU from the lanes for nothing. The nightly scores live, so
    it warms once the first calls are queued (run_lanes' ``on_first_queued``) and compiles nothing after."""
    (tmp_path / "h.toml").write_text(CONFIG)
    _drive(tmp_path, RECORD)
    ran = _drive(tmp_path, [RUN])
    assert ran["importer"] is None and ran["at_end"] == {"top_two": 0, "row_stats": 0}, (
        f"a plain `harness run` imported numba in thread {ran['importer']!r} (kernels {ran['at_end']}): it "
        "scores nothing, so nothing in it should warm or call the scoring kernels"
    )
    night = _drive(tmp_path, [NIGHTLY])
    _warmed_in_the_warmer(night, "harness.pipeline.nightly's _meanwhile, run_shapes' on_first_queued, starts it")
    assert night["reports_importer"] == "import-meanwhile", (
        f"the nightly imported its report's modules in thread {night['reports_importer']!r}: expected them "
        "imported while the lanes run (harness.base.overlap.import_meanwhile, from the nightly's _meanwhile)"
    )
