"""The simulated device (lanes.simulation.simulated_device), the device-time wrapper (lanes.running.device_timeline)
and a
factory's keyword arguments in a model spec (lanes.models.model_api.factory_arguments).

The simulated device answers as the null model does and sleeps C0 + C1 x windows per call; the
benchmark that reads its timeline (benchmarks/bench_device_busy.py) is only as right as the facts
checked here: the answers are the null's, every call is one interval at least as long as its cost,
and the busy fraction counts overlapping calls once. Only lower bounds of time are asserted (a sleep
never returns early; a loaded machine may make it late).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import ModelError
from lanes.models.model_api import factory_arguments, load_model, spec_kind
from lanes.running.device_timeline import DeviceTimeline
from lanes.simulation.simulated_device import SimulatedDevice, busy_fraction, read_timeline
from tests.cli_run import harness_cli

REPO = Path(__file__).resolve().parents[1]
FREE = "lanes.simulation.simulated_device:small?c0_ms=0&c1_ms=0"


@pytest.fixture(scope="module")
def small_corpus():
    """3 synthetic blocks at the small geometry (the null model's: no reference network is built)."""
    from harness.corpus.synth import synth_corpus

    return synth_corpus(load_model("lanes.models.null_model:small").geometry, 3)


def _requests(model, corpus, n: int = 3):
    return [b.tensors() for b in corpus.blocks[:n]]


# ------------------------------------------------------------------------------------------ the model


def test_outputs_and_fingerprint_are_the_null_models_bitwise(small_corpus):
    null = load_model("lanes.models.null_model:small", seed=3)
    sim = load_model(FREE, seed=3)
    assert isinstance(sim, SimulatedDevice)
    assert sim.fingerprint == null.fingerprint and sim.geometry == null.geometry
    assert load_model(FREE, seed=4).fingerprint != sim.fingerprint, "the seed must still reach the null answers"
    for request in _requests(sim, small_corpus):
        mine, theirs = sim.infer(request), null.infer(request)
        assert mine.keys() == theirs.keys()
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name], strict=True)


def test_each_call_is_one_interval_at_least_its_cost(small_corpus, tmp_path):
    path = tmp_path / "t.bin"
    sim = load_model(f"lanes.simulation.simulated_device:small?c0_ms=3&c1_ms=0.5&timeline='{path}'")
    requests = _requests(sim, small_corpus)
    for request in requests:
        sim.infer(request)
    sim.write_timeline()
    sim.write_timeline()  # a second write (atexit's) adds nothing already written
    iv = read_timeline(path)
    assert iv.shape == (len(requests), 2)
    for (start, end), request in zip(iv, requests, strict=True):
        windows = request["OFFSETS"].shape[0]
        assert end - start >= 3e-3 + 0.5e-3 * windows, (start, end, windows)
    assert (iv[1:, 0] >= iv[:-1, 1]).all(), "calls in one thread follow each other"


def test_the_timeline_is_written_at_exit_and_appended_to(tmp_path):
    path = tmp_path / "t.bin"
    script = (
        "from lanes.models.model_api import load_model\nfrom harness.corpus.synth import synth_corpus\n"
        f"m = load_model(\"lanes.simulation.simulated_device:small?c0_ms=0&c1_ms=0&timeline='{path}'\")\n"
        "for b in synth_corpus(m.geometry, 2).blocks:\n    m.infer(b.tensors())\n"
    )
    for _ in range(2):  # two processes (two Ray workers, two runs) on one path: both kept
        subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True)
    assert read_timeline(path).shape == (4, 2)


@pytest.mark.parametrize(
    "spec, says",
    [
        (
            "lanes.simulation.simulated_device:small?c0_ms=-1",
            "c0_ms must be a number of milliseconds in [0, 60000], got -1",
        ),
        (
            "lanes.simulation.simulated_device:small?c1_ms=fast",
            "c1_ms must be a number of milliseconds in [0, 60000], got 'fast'",
        ),
        ("lanes.simulation.simulated_device:small?c1_ms=nan", "c1_ms must be"),
        ("lanes.simulation.simulated_device:small?timeline=3", "timeline must be a file path (a string), got 3"),
        (
            "lanes.simulation.simulated_device:small?timeline='/no/such/folder/t.bin'",
            "folder '/no/such/folder' does not exist",
        ),
        (
            "lanes.simulation.simulated_device:small?c2_ms=1",
            "takes no argument 'c2_ms' (it takes: c0_ms, c1_ms, timeline, concurrent)",
        ),
        ("lanes.simulation.simulated_device:small?concurrent=2", "concurrent must be true or false, got 2"),
    ],
)
def test_bad_arguments_are_one_line_model_errors(spec, says):
    with pytest.raises(ModelError) as err:
        load_model(spec)
    assert says in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------ busy fraction


def test_busy_fraction_counts_overlaps_once():
    iv = np.array([[0.0, 1.0], [0.5, 1.5], [3.0, 4.0], [3.2, 3.4]])
    busy, span, ratio = busy_fraction(iv)
    assert (busy, span) == (2.5, 4.0) and ratio == 2.5 / 4.0
    assert busy_fraction(iv[::-1].copy()) == (busy, span, ratio), "the order of calls does not matter"
    assert busy_fraction(np.zeros((0, 2))) == (0.0, 0.0, 0.0)
    assert busy_fraction(np.array([[1.0, 2.0], [2.0, 3.0]]))[2] == 1.0, "touching calls leave no gap"


interval = st.tuples(st.floats(0, 100), st.floats(0, 10)).map(lambda t: (t[0], t[0] + t[1]))
intervals = st.lists(interval, min_size=1, max_size=30).map(lambda x: np.array(x, dtype=np.float64))


@given(intervals, intervals)
def test_busy_is_within_span_and_obeys_the_union_law(a, b):
    busy_a, span_a, _ = busy_fraction(a)
    assert 0 <= busy_a <= span_a + 1e-9 and busy_a <= float((a[:, 1] - a[:, 0]).sum()) + 1e-9
    busy_b = busy_fraction(b)[0]
    busy_ab = busy_fraction(np.concatenate([a, b]))[0]
    assert max(busy_a, busy_b) - 1e-9 <= busy_ab <= busy_a + busy_b + 1e-9  # |A u B| <= |A| + |B|
    assert busy_fraction(np.concatenate([a, a]))[0] == pytest.approx(busy_a)  # A u A = A


def test_a_truncated_timeline_is_refused(tmp_path):
    (tmp_path / "t.bin").write_bytes(np.arange(3, dtype=np.float64).tobytes())
    with pytest.raises(ModelError, match="truncated"):
        read_timeline(tmp_path / "t.bin")


# ------------------------------------------------------------------------------------------ factory arguments


def test_factory_arguments_are_read_as_toml_scalars_or_bare_words():
    base, args = factory_arguments("m.x:f?i=2&f=0.5&b=true&q='/a b/t.bin'&d=\"x\"&w=/tmp/x.bin&e=")
    assert base == "m.x:f"
    assert args == {"i": 2, "f": 0.5, "b": True, "q": "/a b/t.bin", "d": "x", "w": "/tmp/x.bin", "e": ""}
    assert [type(args[k]) for k in ("i", "f", "b")] == [int, float, bool]
    assert factory_arguments("m.x:f") == ("m.x:f", {})


@pytest.mark.parametrize(
    "spec, says",
    [
        ("m:f?c0_ms", "factory argument 'c0_ms' is not key=value"),
        ("m:f?", "factory argument '' is not key=value"),
        ("m:f?a=1&&b=2", "factory argument '' is not key=value"),
        ("m:f?1a=2", "factory argument '1a=2' is not key=value"),
        ("m:f?device='cuda'", "'device' cannot be given in the spec (it comes from the config: --device"),
        ("m:f?seed=1", "'seed' cannot be given in the spec (it comes from the config: [model] seed)"),
        ("m:f?a=1&a=2", "factory argument 'a' given twice"),
        ("m:f?a=[1, 2]", "is a TOML list; expected a number"),
        ("m:f?a=1979-05-27", "is a TOML date"),
        ("m:f?a=1\nb = 2", "holds a line break"),
    ],
)
def test_malformed_factory_arguments_are_refused(spec, says):
    with pytest.raises(ModelError) as err:
        factory_arguments(spec)
    assert says in str(err.value)


def test_an_argument_ending_like_a_torchscript_file_keeps_the_spec_a_factory():
    assert spec_kind("lanes.simulation.simulated_device:full?timeline=/tmp/x.pt") == "factory"
    assert spec_kind("model.pt") == "torchscript"


# ------------------------------------------------------------------------------------------ the device-time wrapper


def test_the_wrapper_answers_as_its_inner_model_and_times_each_call_on_the_cpu(small_corpus, tmp_path):
    path = tmp_path / "d.bin"
    wrapped = load_model(f"lanes.running.device_timeline:wrap?inner='{FREE.split('?')[0]}'&timeline='{path}'")
    inner = load_model(FREE.split("?")[0])
    assert isinstance(wrapped, DeviceTimeline) and wrapped.clock == "perf_counter"
    assert wrapped.fingerprint == inner.fingerprint and wrapped.describe() == inner.describe()
    requests = _requests(inner, small_corpus)
    for request in requests:
        for name, value in wrapped.infer(request).items():
            np.testing.assert_array_equal(value, inner.infer(request)[name], strict=True)
    wrapped.write_timeline()
    iv = read_timeline(path)
    assert iv.shape == (len(requests), 2) and (iv[:, 1] >= iv[:, 0] + 2e-3 + 0.2e-3 * 8).all()  # small's cost


def test_the_wrapper_refuses_an_inner_spec_with_arguments():
    with pytest.raises(ModelError, match="inner must be a model spec without"):
        load_model("lanes.running.device_timeline:wrap?inner='x:y?a=1'")


# ------------------------------------------------------------------------------------------ the CLI


def test_a_cli_run_on_the_simulated_device_works_end_to_end(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    quiet = ("--no-progress",)
    for argv in (
        ("corpus", "synth", "c.parquet", "--model", FREE, "--blocks", "4"),
        ("golden", "record", "--corpus", "c.parquet", "--model", FREE, "--release", "r", *quiet),
        ("run", "--golden", "goldens/r", "--model", FREE, "--shapes", "2", "--set", "packer.laws_examples=0", *quiet),
    ):  # the packing laws are another test's business (and 10 s of CPU)
        code, out, err = harness_cli(capsys, monkeypatch, *argv)
        assert code == 0, (argv, out, err)
    manifest = next((tmp_path / "runs").glob("*/manifest.json")).read_text()
    assert "c0_ms=0&c1_ms=0" in manifest, "the run records the spec with its arguments"


def test_a_bad_factory_argument_through_the_cli_is_one_line_exit_2(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = harness_cli(
        capsys,
        monkeypatch,
        "corpus",
        "synth",
        "c.parquet",
        "--model",
        "lanes.simulation.simulated_device:small?c0_ms=2&speed=9",
        "--blocks",
        "4",
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("harness: error: ") and "takes no argument 'speed'" in lines[0]
    assert not (tmp_path / "c.parquet").exists()


# ------------------------------------------------------------------------------------------ where a spec travels

SPEC = "lanes.simulation.simulated_device:full?c0_ms=2&c1_ms=0.2&timeline='/tmp/a b.bin'&note=\"x\\\\y\""


def test_a_spec_with_arguments_survives_the_config_file(tmp_path):
    from harness.release_config import load_config, parse_set

    (tmp_path / "h.toml").write_text(f"[model]\nspec = '''{SPEC}'''\n")
    assert load_config(tmp_path / "h.toml").model.spec == SPEC
    assert load_config(None, [parse_set(f"model.spec='''{SPEC}'''")]).model.spec == SPEC


def test_a_spec_with_arguments_survives_a_triton_model_repository():
    """The server reads MODEL_SPEC back from config.pbtxt: quotes and backslashes must be escaped there."""
    text_format = pytest.importorskip("google.protobuf.text_format")
    from lanes.backends.triton.repository import fill_config

    line = next(x for x in fill_config('name: "m"\n', {"MODEL_SPEC": SPEC}, 1).splitlines() if "MODEL_SPEC" in x)
    tokens, strings = text_format.Tokenizer([line]), []
    while not tokens.AtEnd():
        if tokens.token.startswith('"'):
            strings.append(tokens.ConsumeString())
        else:
            tokens.NextToken()
    assert strings == ["MODEL_SPEC", SPEC]


# ------------------------------------------------------------------------------------------ the benchmark's reading


def _bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_device_busy", REPO / "benchmarks" / "bench_device_busy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_reads_timelines_and_builds_specs_as_the_models_do(tmp_path):
    bench = _bench()
    iv = np.array([[5.0, 6.0], [0.0, 1.0], [0.5, 2.0]])
    iv.tofile(tmp_path / "t.bin")
    busy, span, _ = busy_fraction(iv)
    assert bench.busy_of(tmp_path / "t.bin") == (busy, span, 3, 0.0, 6.0)  # and the first start, the last end
    timeline = tmp_path / "a b" / "t.bin"
    assert factory_arguments(bench.timed(bench.MODEL, 2.0, 0.05, timeline))[1] == {
        "c0_ms": 2.0,
        "c1_ms": 0.05,
        "timeline": str(timeline),
    }
    wrapped = bench.timed("lanes.running.device_timeline:wrap?inner='full'", 2.0, None, timeline)
    assert factory_arguments(wrapped)[1] == {"inner": "full", "timeline": str(timeline)}
    with pytest.raises(SystemExit, match="unknown command 'score'"):
        bench.main(["--commands", "run,score"])
