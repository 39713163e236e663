"""Memory bounded by size, whatever the load: one module's outputs at a time where modules are hooked, bounded
queues when a consumer is starved, and the process settings that keep shared cores and the allocator sane.

Peak memory is read from a fresh process (``wait4``'s ``ru_maxrss``): the measure of what a user's machine
sees, independent of what this test process has allocated before.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from harness.localisation import lockstep
from harness.localisation.activations import ActivationStore
from harness.progress import PlainLines

REPO = Path(__file__).resolve().parents[1]


PEAK = """
import atexit, os
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            open(os.environ["PEAK_FILE"], "w").write(line.split()[1])
atexit.register(_peak)
"""


def _peak_mib(code: str, env: dict[str, str] | None = None) -> tuple[int, float]:
    """Run ``code`` in a fresh interpreter: its exit status and peak resident memory (MiB), read by the child
    itself at exit (the kernel's high-water mark of its own memory: ``wait4``'s figure would start from this
    test process's, which a fork-and-exec child inherits)."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".peak") as peak:
        full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {}), "PEAK_FILE": peak.name}
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", PEAK + textwrap.dedent(code)], full)
        _, status, _ = os.wait4(pid, 0)
        text = Path(peak.name).read_text().strip()
    return os.waitstatus_to_exitcode(status), (int(text) / 1024 if text else 0.0)


# ---------------------------------------------------------------------------------------------
# the store: written as produced, read back one module at a time


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.float64])
def test_the_store_gives_back_every_module_bit_for_bit_from_memory_and_from_its_file(tmp_path, dtype):
    parts = [
        torch.arange(24).reshape(4, 6).to(dtype),
        (torch.arange(12).reshape(2, 6) * 3).to(dtype),
        torch.zeros((0, 6), dtype=dtype),
    ]
    for budget in (1 << 30, 0):  # all in memory; all in the file
        with ActivationStore(tmp_path, budget=budget) as store:
            store.add("a", parts[0])
            store.add("b", parts[2])
            store.add("a", parts[1])  # a module called twice: its parts concatenated along dim 0
            assert store.names() == ["a", "b"] and store.shape("a") == (6, 6) and store.shape("b") == (0, 6)
            assert torch.equal(store.get("a"), torch.cat(parts[:2])) and store.get("a").dtype == dtype
            assert store.get("b").shape == (0, 6)
            assert [n for n, _ in store.items()] == ["a", "b"]
            assert (store.spilled > 0) == (budget == 0)
        assert list(tmp_path.iterdir()) == []  # the file is unlinked from the start: nothing is ever left


def test_a_copy_is_kept_so_the_call_may_reuse_its_buffers(tmp_path):
    t = torch.ones(3, 4)
    with ActivationStore(tmp_path) as store:
        store.add("m", t)
        t.add_(1)
        assert torch.equal(store.get("m"), torch.ones(3, 4))


# ---------------------------------------------------------------------------------------------
# lockstep: calls side by side, compared module by module


class _Net(torch.nn.Module):
    def __init__(self, layers: int, width: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def _call(net, x):
    @torch.inference_mode()  # per thread, as a model's infer sets it
    def infer():
        return {"y": net(x).numpy()}

    return infer


def test_lockstep_compares_each_module_of_every_call_in_execution_order():
    net = _Net(3).eval()
    x = torch.randn(5, 16)
    seen: list[tuple[str, int]] = []

    def compare(name, outputs):
        assert all(torch.equal(o, outputs[0]) for o in outputs)  # one request, deterministic: bitwise
        seen.append((name, len(outputs)))

    answers = lockstep.run([_call(net, x)] * 3, {"net": net}, compare)
    assert [name for name, _ in seen] == [
        "net <input: windows as the network receives them>",
        "net.layers.0",
        "net.layers.1",
        "net.layers.2",
    ]
    assert all(n == 3 for _, n in seen) and len(answers) == 3


def test_calls_out_of_step_are_refused_and_a_failing_call_stops_them_all():
    net = _Net(3).eval()
    x = torch.randn(2, 16)

    shorter = _call(net.layers[0], x)  # another module order: the net's input never hooked first

    with pytest.raises(lockstep.OutOfStep):
        lockstep.run([_call(net, x), shorter], {"net": net}, lambda name, outs: None)

    def broken():
        raise ValueError("the model failed")

    with pytest.raises(ValueError, match="the model failed"):
        lockstep.run([_call(net, x), broken], {"net": net}, lambda name, outs: None)
    assert not net.layers[0]._forward_hooks  # every hook removed, whatever happened


# ---------------------------------------------------------------------------------------------
# the floors' peak does not grow with the modules or the blocks measured


FLOORS = """
    import torch
    from harness.corpus.synth import synth_corpus
    from harness.data.geometry import Geometry
    from harness.data.ops import Op
    from harness.localisation.module_floors import FloorSampler
    from harness.data.isolation import cut_windows

    # the noise of this measure kept small: one torch thread, and glibc's own allocator settings (the huge pages
    # the harness asks for move the resident figure by their 2 MiB grain); the bound is the harness's, not glibc's
    torch.set_num_threads(1)

    class Deep:
        # a plug-in whose every one of LAYERS modules outputs 16 MiB per call
        def __init__(self):
            torch.manual_seed(0)
            self.geometry = Geometry(window_samples=16_000, frames_per_window=50, frame_step=320, embedding_dim=4)
            self.seg = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(LAYERS)]).eval()
            self.fingerprint = "deep"

        def torch_modules(self):
            return {"segmentation": self.seg}

        @torch.inference_mode()
        def infer(self, request):
            x = cut_windows(request["SPAN"], request["OFFSETS"], request["VALID"], self.geometry.window_samples)
            frames = torch.from_numpy(x[:, :16_000].reshape(x.shape[0], 250, 64)).repeat(1, 33, 1)  # 16 MiB
            return {"SEGMENTATION": self.seg(frames)[:, :50, :7].contiguous().numpy()}

    model = Deep()
    blocks = list(synth_corpus(model.geometry, BLOCKS, seed=0).blocks)
    sampler = FloorSampler(model, model.geometry, [b.id for b in blocks], 0, [Op(0)])
    sampler.spill = SPILL
    from harness.localisation.lockstep import OutOfStep

    def out_of_step(op, request):
        raise OutOfStep("as a model whose calls do not run in step would")

    SEQUENTIAL and setattr(sampler, "_side_by_side", out_of_step)  # the fallback: one pass after another
    floors = sampler._record(blocks)
    assert len(floors["ops"]["0"]) == LAYERS + 2, sorted(floors["ops"]["0"])
"""


# glibc's mmap threshold fixed where the harness's own processes fix it (harness.base.process_settings): by default
# glibc raises it as large blocks are freed, after which freed 16 MiB outputs stay resident in the threads' arenas
# by the threads' timing (under a loaded machine, 130 MiB more at 40 layers than at 8): a figure of the allocator,
# not of what the floors keep alive
FIXED_MMAP = {"MALLOC_MMAP_THRESHOLD_": str(16 << 20)}


def _floors_peak(tmp_path: Path, layers: int, blocks: int, sequential: bool = False) -> float:
    """The lowest of three runs' peaks (one run's peak moves by tens of MiB with the threads' timing)."""
    code = (
        f"LAYERS, BLOCKS, SEQUENTIAL = {layers}, {blocks}, {sequential}\nfrom pathlib import Path\n"
        f"SPILL = Path({str(tmp_path)!r})\n" + textwrap.dedent(FLOORS)
    )
    peaks = []
    for _ in range(3):
        status, peak = _peak_mib(code, FIXED_MMAP)
        assert status == 0
        peaks.append(peak)
    return min(peaks)


@pytest.mark.parametrize("sequential", [False, True], ids=["side-by-side", "one-after-another"])
def test_the_floors_peak_does_not_grow_with_the_modules_or_the_blocks(tmp_path, sequential):
    """8 layers of 16 MiB outputs against 40 (and 1 block against 3): kept whole, three calls' outputs would be
    1.5 GiB more at 40 layers (a negative control measures that the layers do cost that much when kept)."""
    few = _floors_peak(tmp_path, 8, 1, sequential)
    many = _floors_peak(tmp_path, 40, 1, sequential)
    more_blocks = _floors_peak(tmp_path, 8, 3, sequential)
    grain = 3 * 16  # MiB: one module's outputs of the three calls, the bound's own grain
    assert many <= few * 1.10 + grain, (few, many)
    assert more_blocks <= few * 1.10 + grain, (few, more_blocks)
    kept = _peak_mib("import torch\nx = [torch.ones(8, 1650, 320) for _ in range(40)]\n")[1]
    baseline = _peak_mib("import torch\n")[1]
    assert kept - baseline > 500  # what 40 modules' outputs of one call cost when kept whole: the bound matters


# ---------------------------------------------------------------------------------------------
# a starved consumer does not grow the peak


RECORD = """
    import sys
    from harness.cli import program
    sys.argv = ["harness", "golden", "record", "--model", "small", "--corpus", "c.parquet", "--goldens", GOLDENS,
                "--no-progress"]
    program()
"""


def test_a_starved_writer_does_not_grow_the_peak(tmp_path):
    """Every row group the golden's writers write waits 0.3 s (a disk that cannot keep up): the lanes wait for
    it (bounded queues), memory does not pile up behind it."""
    here = f"import os\nos.chdir({str(tmp_path)!r})\n"
    status, _ = _peak_mib(
        here + "import sys\nfrom harness.cli import program\nsys.argv = ['harness', 'corpus', "
        "'synth', 'c.parquet', '--model', 'small', '--blocks', '96']\nprogram()\n"
    )
    assert status == 0
    normal_status, normal = _peak_mib(here + f"GOLDENS = 'g1'\n{textwrap.dedent(RECORD)}")
    slow_status, slow = _peak_mib(
        here + f"GOLDENS = 'g2'\n{textwrap.dedent(RECORD)}",
        env={"HARNESS_FAULT": "slow:parquet:op0.parquet", "HARNESS_FAULT_SLEEP": "0.3"},
    )
    assert normal_status == slow_status == 0
    assert slow <= normal * 1.10 + 16, (normal, slow)


# ---------------------------------------------------------------------------------------------
# the process settings: set unless the user set them, recorded, no result bit changed


RECORD_SMALL = """
    import sys
    from harness.cli import program
    sys.argv = ["harness", "golden", "record", "--model", "small", "--corpus", CORPUS, "--goldens", GOLDENS,
                "--no-progress"]
    program()
"""


def test_the_harness_sets_omp_and_the_allocator_unless_the_user_did_and_no_bit_changes(tmp_path):
    from harness.corpus.synth import synth_corpus
    from harness.data.corpus_schema import write_corpus
    from lanes.models.model_api import load_model

    corpus = tmp_path / "c.parquet"
    geometry = load_model("small").geometry
    write_corpus(corpus, synth_corpus(geometry, 4), geometry)
    runs = {}
    for name, env in (("ours", {}), ("theirs", {"OMP_WAIT_POLICY": "ACTIVE", "MALLOC_ARENA_MAX": "4"})):
        ours = ("OMP_WAIT_POLICY", "GLIBC_TUNABLES", "HARNESS_PROCESS_SET")
        clean = {k: v for k, v in os.environ.items() if k not in ours and not k.startswith("MALLOC_")}
        code = f"CORPUS, GOLDENS = {str(corpus)!r}, {str(tmp_path / name)!r}\n" + textwrap.dedent(RECORD_SMALL)
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", code], {**clean, "PYTHONPATH": str(REPO), **env})
        _, status, _ = os.wait4(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        (golden,) = (tmp_path / name).iterdir()
        runs[name] = json.loads((golden / "manifest.json").read_text())
    from harness.base.process_settings import _huge_pages_on_request

    ours, theirs = runs["ours"]["environment"]["process"], runs["theirs"]["environment"]["process"]
    assert ours["omp_wait_policy"] == "PASSIVE (set by the harness)"
    huge = "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=16777216 (set by the harness)"
    assert ours["malloc"] == (huge if _huge_pages_on_request() else "the C library's defaults"), ours
    assert theirs == {"omp_wait_policy": "ACTIVE (the environment)", "malloc": "the environment's (MALLOC_ARENA_MAX)"}
    for file in ("op0.parquet", "op1.parquet", "op2.parquet"):  # the outputs, bit for bit
        assert runs["ours"]["files"][file]["sha256"] == runs["theirs"]["files"][file]["sha256"], file


# ---------------------------------------------------------------------------------------------
# no silent phase, an honest estimate


def test_a_call_outstanding_says_what_it_waits_for_instead_of_a_growing_estimate():
    now = [0.0]
    lines = PlainLines("nightly 4 blocks", 48, clock=lambda: now[0])
    now[0] = 30.0
    lines(30)  # 1 s per call
    assert lines.line().endswith("30 s elapsed, about 18 s left")
    estimates = []
    for t in (45.0, 120.0, 400.0):  # the 31st call takes minutes (a large shape's voiceprints)
        now[0] = t
        line = lines.line()
        assert "left" not in line.split("waiting")[0] or "about" not in line, line
        estimates.append(line)
    assert estimates[-1].endswith(
        "400 s elapsed, waiting for the next of the 18 calls left (370 s so far; 1.0 s each until now)"
    )
    assert len(set(estimates)) == 3  # never the same text twice


def test_the_module_floors_name_themselves_and_their_progress(tmp_path):
    from harness.corpus.synth import synth_corpus
    from harness.data.ops import Op
    from harness.localisation.module_floors import FloorSampler
    from lanes.models.model_api import load_model

    model = load_model("small")
    blocks = list(synth_corpus(model.geometry, 1).blocks)
    said: list[str | None] = []
    sampler = FloorSampler(model, model.geometry, [blocks[0].id], 0, [Op(0)])
    sampler.progress, sampler.spill = said.append, tmp_path
    sampler._record(blocks)
    assert said[0] is not None and said[0].startswith("module noise floors: OP 0, 3 passes side by side, module 0 of ")
    total = int(said[0].rsplit(" of ", 1)[1])
    assert said[-1] == f"module noise floors: OP 0, 3 passes side by side, module {len(said) - 1} of {total}"
    assert len(said) > 10 and len(set(said)) == len(said)  # a new line every module
