"""Serial host work outside the lanes: a command whose model is not a torch network never
imports torch (2.5-3 s, and 3 s more for the inductor config ``use_deterministic_algorithms`` pulls in)
nor pandas (1.2-1.8 s, which ``pa.array`` imports on its first call), and says honestly that torch's
flags were in force nowhere; a torch model's manifests record what they recorded before."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.data import arrow_build

ROOT = Path(__file__).resolve().parents[1]

# One interpreter runs the commands through the CLI's own main (as `harness ...` would), then prints which of
# the heavy modules it imported; the caller's argv lists are in HARNESS_COMMANDS (JSON).
DRIVER = textwrap.dedent("""
    import json, os, sys
    from harness.cli import main
    for argv in json.loads(os.environ["HARNESS_COMMANDS"]):
        try:
            main(argv)
        except SystemExit as exc:
            if exc.code not in (0, None) and (argv[0], exc.code) != ("nightly", 1):  # 1: unjudged laws, no pass
                print(json.dumps({"failed": argv, "code": exc.code}))
                raise SystemExit(1)
    print(json.dumps({m: m in sys.modules for m in ("torch", "pandas")}))
""")


def _commands(tmp: Path, spec: str) -> dict[str, bool]:
    (tmp / "h.toml").write_text(f"[model]\nspec = '{spec}'\n[numerics]\nthreads = 1\n[shapes]\ncandidates = [2]\n")
    commands = [
        ["corpus", "synth", "c.parquet", "--blocks", "4", "--config", "h.toml"],
        ["golden", "record", "--corpus", "c.parquet", "--config", "h.toml", "--release", "r", "--no-progress"],
        ["run", "--golden", "goldens/r", "--config", "h.toml", "--no-progress", "--set", "packer.laws_examples=0"],
        [
            "nightly",
            "--golden",
            "goldens/r",
            "--config",
            "h.toml",
            "--no-progress",
            "--set",
            "packer.laws_examples=0",
            "--out",
            "n",
            "--no-promote",
            "--no-localise",
        ],
    ]  # a failing night localises: with torch
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp}",
        "HARNESS_COMMANDS": json.dumps(commands),
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    done = subprocess.run([sys.executable, "-c", DRIVER], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _manifests(tmp: Path) -> list[dict]:
    golden = json.loads((tmp / "goldens/r/manifest.json").read_text())
    runs = [json.loads(p.read_text()) for p in (tmp / "runs").glob("*/manifest.json")]
    assert len(runs) == 1
    return [golden, *runs]


def _check_host_share(tmp: Path) -> None:
    """The run records its lanes' wall, the score splits it into calls and the harness's own work,
    and the report says what a lane's timing measures with that share beside it."""
    run = next(iter(json.loads(p.read_text()) for p in (tmp / "n/runs").glob("*/manifest.json")))
    host = json.loads((tmp / "n/score.json").read_text())["host"]
    assert host["lanes_wall_s"] == run["lanes_wall_s"] and host["blocks"] == 4
    assert host["host_s"] == pytest.approx(max(0.0, host["lanes_wall_s"] - host["device_s"]), abs=1e-12)
    assert host["host_ms_per_block"] == pytest.approx(host["host_s"] * 1e3 / 4)
    report = (tmp / "n/report/report.md").read_text()
    assert "is the network call alone, request to answer (device time)" in report
    assert f"{host['host_ms_per_block']:.3g} ms per block" in report


def test_a_model_without_torch_records_and_runs_without_importing_torch_or_pandas(tmp_path):
    """Fails where lanes/backends/backend.py imports torch at its top, numerics.applied() or in_force() imports it
    (and the inductor), or a pa.array call imports pandas."""
    imported = _commands(tmp_path, "lanes.models.null_model:small")
    assert imported == {"torch": False, "pandas": False}, (
        f"a golden record and a run of the null model imported {[m for m, yes in imported.items() if yes]}: "
        "a model that is not a torch network must not pay torch's start-up (harness.numerics.torch_loaded) "
        "nor pandas' (build Arrow arrays with harness.data.arrow_build, not pa.array)"
    )
    for manifest in _manifests(tmp_path):
        in_force = manifest["numerics"]["in_force"]
        assert in_force["torch_loaded"] is False
        absent = [k for k in ("threads", "mkldnn", "deterministic_algorithms", "matmul_precision") if k in in_force]
        assert not absent, f"torch's flags {absent} recorded as in force by a process that never imported torch"
        assert manifest["environment"]["torch"], "the installed torch's version is still recorded"
    _check_host_share(tmp_path)


def test_a_plugin_that_imports_torch_gets_torchs_flags_applied_and_recorded(tmp_path):
    """The negative control of the test above (the driver does see an import) and the other half of the rule:
    a plug-in whose module imports torch is a torch model, so its flags are set and recorded as before."""
    (tmp_path / "torchy.py").write_text("import torch  # noqa: F401\nfrom lanes.models.null_model import small\n")
    imported = _commands(tmp_path, "torchy:small")
    assert imported["torch"] is True
    for manifest in _manifests(tmp_path):
        in_force = manifest["numerics"]["in_force"]
        assert "torch_loaded" not in in_force
        assert (in_force["threads"], in_force["deterministic_algorithms"]) == (1, True), in_force


def test_settings_and_environment_without_torch(tmp_path):
    """In a fresh interpreter: applied() and in_force() leave torch unimported, and environment() reads the same
    torch version and CUDA build from torch's files as torch itself reports once imported."""
    script = textwrap.dedent("""
        import json, sys
        from harness.host.environment import environment
        from harness.numerics import in_force
        from harness.data.numeric_settings import NumericSettings
        with NumericSettings(threads=1).applied():
            before, flags = environment(), in_force()
        loaded = "torch" in sys.modules
        import torch
        with NumericSettings(threads=1).applied():
            after, flags_after = environment(), in_force()
        print(json.dumps({"loaded": loaded, "before": before, "after": after, "flags": flags,
                          "flags_after": flags_after}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["loaded"] is False
    assert out["flags"]["torch_loaded"] is False and "threads" not in out["flags"]
    assert (out["flags_after"]["threads"], "torch_loaded" in out["flags_after"]) == (1, False)
    before, after = out["before"], out["after"]
    assert (before["torch"], before["cuda"]) == (after["torch"], after["cuda"])
    assert {k: v for k, v in before.items() if k != "cudnn"} == {k: v for k, v in after.items() if k != "cudnn"}


# ------------------------------------------------------------------ Arrow arrays built without pa.array


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", write_statistics=True)
    return sink.getvalue()


CASES = [
    ("int32", np.arange(7, dtype=np.int32), pa.int32()),
    ("int8 empty", np.zeros(0, dtype=np.int8), pa.int8()),
    ("float32 strided", np.arange(20, dtype=np.float32)[::3], pa.float32()),
    ("int64 list with None", [3, None, -(2**62), 0], pa.int64()),
    ("float64 list", [0.5, 1e300, -0.0], pa.float64()),
    ("strings", ["blk-0", "", "ünïcode-✓", "x" * 300], pa.string()),
    ("string lists", [["a", "b"], [], ["ü~1"]], pa.list_(pa.string())),
    ("booleans", [True, False, True, True, False, False, True, False, True], pa.bool_()),  # 9: a partial byte
    ("numpy booleans", np.array([False, True] * 5), pa.bool_()),
    ("booleans empty", [], pa.bool_()),
]


@pytest.mark.parametrize(("name", "values", "kind"), CASES, ids=[c[0] for c in CASES])
def test_arrow_build_gives_pa_arrays_values_and_parquet_bytes(name, values, kind):
    ours = arrow_build.column(values, kind)
    theirs = pa.array(values, kind)
    assert ours.type == theirs.type and ours.equals(theirs), f"{name}: {ours} != {theirs}"
    assert ours.null_count == theirs.null_count
    schema = pa.schema([pa.field("c", kind)])
    assert _parquet_bytes(pa.table({"c": ours}, schema=schema)) == _parquet_bytes(
        pa.table({"c": theirs}, schema=schema)
    )


def test_arrow_build_leaves_what_it_does_not_cover_to_pyarrow():
    """A cast, a value out of range, a non-string: pyarrow's own answer and its own refusal."""
    assert arrow_build.numeric(np.arange(3, dtype=np.int64), pa.int32()).equals(pa.array([0, 1, 2], pa.int32()))
    with pytest.raises((pa.ArrowInvalid, OverflowError)):
        arrow_build.numeric([2**40], pa.int32())
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        arrow_build.strings(["a", 3])  # type: ignore[list-item]


def test_arrow_build_does_not_import_pandas_and_pa_array_does():
    """The reason the module exists, both ways (the second line is the negative control)."""
    probe = (
        "import sys, numpy as np, pyarrow as pa\nfrom harness.data import arrow_build\n"
        "arrow_build.table({'a': np.arange(3, dtype=np.int32), 'b': ['x', 'y', 'z'], 'c': [[], ['q'], []]},"
        " pa.schema([('a', pa.int32()), ('b', pa.string()), ('c', pa.list_(pa.string()))]))\n"
        "print('pandas' in sys.modules)\npa.array(np.arange(3))\nprint('pandas' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_a_score_without_the_lanes_wall_says_so_in_the_report():
    """A run without lanes_wall_s (merged shards, or a manifest that predates the key): no ``host`` in its score,
    and the report says the share was not recorded instead of printing a figure (the negative control of the
    above)."""
    from harness.throughput.host_share import host_entry
    from reports.host_line import timing_line

    assert host_entry(None, 1.0, 4) is None
    entry = host_entry(2.0, 3.0, 4)  # overlapping calls (requests in flight together): never a negative share
    assert entry is not None and entry["host_s"] == 0.0

    class Bare:
        host = None

    assert "did not record its lanes' wall" in timing_line(Bare())  # type: ignore[arg-type]
