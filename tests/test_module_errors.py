"""Where the error grows: per-module error along the network, normalised by each module's
noise floor recorded with the golden, and the first module over ``[localise] floor_multiple`` x its floor.

- the golden records module floors (the exact lane's two passes of a few sampled blocks, every OP);
- the negative control (``lanes.controls.module_control``): an error injected in a middle module of each network, and
  one ulp of noise in an earlier module: the old evidence (first *diverging* module) names the harmless early
  one, the new (first *exceeding*) names the injected one; without the injection it names none;
- a golden without floors still localises (ulp floors, said so); a plug-in with ``torch_modules()`` works;
- the report's section exists only when modules were measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from harness.base.errors import ConfigError
from harness.corpus.synth import synth_corpus
from harness.data.geometry import Geometry
from harness.data.isolation import cut_windows
from harness.data.masks import voiceprint_rows
from harness.data.ops import Op
from harness.data.schemas.base import validate
from harness.data.schemas.config_file import EvidenceSection, LocaliseSection
from harness.data.schemas.results import LocalisationFile
from harness.data.tolerances import Tolerances
from harness.localisation.first_divergence import localise
from harness.localisation.module_errors import ULP, ulp_of
from harness.localisation.module_floors import NO_MODULES, FloorSampler, floor_sampler
from harness.pipeline.localise import localise_failures
from harness.pipeline.score import score_run
from harness.release_config import config_from_dict, release_config
from lanes.controls.module_control import perturbed
from tests.pipeline import record, run_shapes

CONTROL = "lanes.controls.module_control:perturbed?noise='segmentation.sincnet'"
INJECTED = {"0": "segmentation.lstm", "1": "voiceprint.trunk.stages.2", "2": "voiceprint.trunk.stages.2"}


@dataclass
class Control:
    model: object
    golden: object
    run: object
    score: object


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    """The control recorded (2 blocks, 1 sampled for floors), run at k=2 (one arrangement: lean) and scored;
    its failing OPs localised."""
    tmp = tmp_path_factory.mktemp("module-control")
    cfg = release_config(evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False))
    backend, _, golden = record(CONTROL, tmp, blocks=2, config=cfg)
    run = run_shapes(backend, golden, tmp, (2,), cfg)
    p = Control(backend.model, golden, run, score_run(golden, run, Tolerances()))
    return p, localise_failures(p.score, p.golden, p.run, lambda: p.model)


def test_the_golden_records_each_modules_noise_floor(control):
    p, _ = control
    floors = p.golden.manifest.model_dump(mode="json")["module_floors"]
    assert floors["passes"] == 2 and len(floors["blocks"]) == 1 and floors.get("skipped") is None
    assert set(floors["ops"]) == {"0", "1", "2"}
    seg = floors["ops"]["0"]
    assert "segmentation.lstm" in seg and "<output: the model's answer>" in seg
    assert all(f["max_abs"] == 0.0 and f["scale"] > 0 for f in seg.values())  # CPU, alone twice: bitwise here
    assert seg["segmentation.lstm"]["jitter"] > 0.0  # one ulp at every leaf module, grown through the network
    assert "voiceprint.pooling" in floors["ops"]["1"]


def test_the_injected_middle_module_is_named_where_first_diverging_names_the_noise(control):
    p, loc = control
    assert p.score.shapes["2"].verdict == "fail"
    for op, module in INJECTED.items():
        found = loc["2"][op]
        assert found["available"] and found["floor_source"] == "golden" and found["floor_multiple"] == 4.0
        assert found["first_exceeding"] == module, (op, found["first_exceeding"])
        names = [m["module"] for m in found["modules"]]
        before = names[: names.index(module)]
        assert all(m["ratio"] <= 4.0 for m in found["modules"] if m["module"] in before)
    # the old evidence: ulp-level noise in an earlier module makes it the first *diverging* one
    assert loc["2"]["0"]["first_diverging_layer"] == "segmentation.sincnet"
    lstm = next(m for m in loc["2"]["0"]["modules"] if m["module"] == "segmentation.lstm")
    assert lstm["ratio"] > 25 and lstm["max_rel"] > 1e-4  # ~100 x the floor: the grown noise is far below
    # what the nightly writes validates against the localisation schema
    validate(
        LocalisationFile,
        {"kind": "harness.localisation", "format": 1, "score_digest": p.score.digest, "shapes": loc},
        "localisation.json",
    )


def _pack(model, n=2):
    return list(synth_corpus(model.geometry, n, seed=0).blocks)


def _floors(model, blocks, op=Op(0)):
    """The golden's module floors of ``model`` over ``blocks`` (what golden record stores), for one OP."""
    return FloorSampler(model, model.geometry, [b.id for b in blocks], 0, [op])._record(blocks)["ops"][str(int(op))]


def test_noise_alone_diverges_but_exceeds_nothing():
    """Negative control: the same ulp noise, no injection. First diverging still names a module (the old
    evidence); first exceeding names none: the golden's jitter floor covers noise grown through the LSTM."""
    model = perturbed(size=0.0, noise="segmentation.sincnet")
    blocks = _pack(model)
    floors = _floors(model, blocks)
    assert floors["segmentation.lstm"]["max_abs"] == 0.0 and floors["segmentation.lstm"]["jitter"] > 0.0
    found = localise(model, blocks, target=blocks[1].id, floors=floors)
    assert found["first_diverging_layer"] == "segmentation.sincnet"
    assert found["first_exceeding"] is None, [(m["module"], m["ratio"]) for m in found["modules"]]
    noisy = localise(perturbed(size=1e-3, noise="segmentation.sincnet"), blocks, target=blocks[1].id, floors=floors)
    assert noisy["first_diverging_layer"] == "segmentation.sincnet"
    assert noisy["first_exceeding"] == "segmentation.lstm"


def test_a_golden_without_floors_normalises_by_ulps_and_says_so():
    model = perturbed(size=1e-3)
    blocks = _pack(model)
    found = localise(model, blocks, target=blocks[1].id)  # floors=None: a golden recorded before them
    assert found["floor_source"] == ULP and "no module floors" in found["floor_note"]
    assert found["first_exceeding"] == "segmentation.lstm"
    lstm = next(m for m in found["modules"] if m["module"] == "segmentation.lstm")
    assert lstm["floor"] == float(np.spacing(np.float32(0.5)))  # one ulp of the LSTM's scale (|tanh| < 1)


def test_a_larger_multiple_needs_a_larger_error():
    model = perturbed(size=1e-6)  # ~17 ulps of the LSTM's scale: over 4 x its floor, under 1000 x
    blocks = _pack(model)
    assert localise(model, blocks, target=blocks[1].id)["first_exceeding"] == "segmentation.lstm"
    assert localise(model, blocks, target=blocks[1].id, multiple=1000.0)["first_exceeding"] is None


def test_a_golden_floor_raises_the_bar():
    model = perturbed(size=1e-6)
    blocks = _pack(model)
    loose = {"segmentation.lstm": {"max_abs": 1.0, "max_rel": 1.0, "scale": 1.0}}
    found = localise(model, blocks, target=blocks[1].id, floors=loose)
    assert found["floor_source"] == "golden"
    assert found["first_exceeding"] != "segmentation.lstm"  # the LSTM's own noise is larger than the error


def test_ulp_of_is_numpys_spacing_for_float32():
    for x in (1.0, 0.75, 3.0, 1e-3, 22.05, 1e30):
        assert ulp_of(x, torch.float32) == float(np.spacing(np.float32(x))), x
    assert ulp_of(1.0, torch.float64) == float(np.spacing(1.0))
    assert ulp_of(7.0, torch.int64) == 1.0
    assert 0 < ulp_of(0.0, torch.float32) < 1e-40


class _Corpus:
    """What floor_sampler reads of a corpus when it samples nothing: its geometry and ids."""

    def __init__(self, geometry, ids):
        self.g, self._ids = geometry, ids

    def ids(self):
        return self._ids


def test_floors_off_or_unavailable_are_said(geometry):
    corpus = _Corpus(geometry, ["a", "b"])
    off = floor_sampler(object(), corpus, LocaliseSection(floor_blocks=0), [Op(0)])
    assert off.fields(corpus) == {}  # [localise] floor_blocks = 0: no key, the golden as before
    plain = floor_sampler(object(), corpus, LocaliseSection(), [Op(0)])  # a plug-in without torch_modules()
    assert plain.fields(corpus)["module_floors"]["skipped"] == NO_MODULES
    remote = floor_sampler(None, corpus, LocaliseSection(), [Op(0)])
    assert "does not run in this process" in remote.fields(corpus)["module_floors"]["skipped"]
    with pytest.raises(ConfigError, match="localise.floor_multiple"):
        config_from_dict({"localise": {"floor_multiple": 0.5}})


class TinyPlugin:
    """A plug-in with torch modules of its own: per-frame MLPs (segmentation) and a per-frame projection
    pooled over the row's weights (voiceprint). ``bump``: added to ``segmentation.1``'s output when packed."""

    def __init__(self, bump: float = 0.0) -> None:
        torch.manual_seed(0)
        self.geometry = Geometry(window_samples=16_000, frames_per_window=50, frame_step=320, embedding_dim=4)
        g = self.geometry
        self.seg = torch.nn.Sequential(
            torch.nn.Linear(g.frame_step, 16), torch.nn.Tanh(), torch.nn.Linear(16, g.classes)
        ).eval()
        self.vp = torch.nn.Sequential(
            torch.nn.Linear(g.frame_step, 8), torch.nn.Tanh(), torch.nn.Linear(8, g.embedding_dim)
        ).eval()
        self.fingerprint, self.bump, self._packed = f"tiny-plugin-{bump}", bump, False
        self.seg[1].register_forward_hook(lambda m, a, out: out + self.bump if self._packed else None)

    def torch_modules(self):
        return {"segmentation": self.seg, "voiceprint": self.vp}

    @torch.inference_mode()
    def infer(self, request):
        g = self.geometry
        x = cut_windows(request["SPAN"], request["OFFSETS"], request["VALID"], g.window_samples)
        self._packed = x.shape[0] > g.windows_per_block
        frames = torch.from_numpy(
            x[:, : g.frames_per_window * g.frame_step].reshape(x.shape[0], g.frames_per_window, g.frame_step)
        )
        if int(np.asarray(request["OP"]).reshape(-1)[0]) == 0:
            return {"SEGMENTATION": torch.log_softmax(self.seg(frames), -1).numpy()}
        per_frame = self.vp(frames)  # [N, F, E]
        w = torch.from_numpy(np.asarray(request["WEIGHTS"]))
        rows = per_frame[torch.from_numpy(np.asarray(request["IDX"]).astype(np.int64))]
        return {"EMBEDDINGS": ((w[..., None] * rows).sum(1) / (w.sum(1, keepdim=True) + 1e-6)).numpy()}


def test_a_plugin_with_torch_modules_is_localised_per_module():
    model = TinyPlugin(bump=1e-2)
    blocks = _pack(model)
    found = localise(model, blocks, target=blocks[1].id)
    assert found["first_exceeding"] == "segmentation.1" and found["first_diverging_layer"] == "segmentation.1"
    assert localise(TinyPlugin(), blocks, target=blocks[1].id)["first_exceeding"] is None
    sampler = FloorSampler(model, model.geometry, [b.id for b in blocks], 0, [Op(0), Op(1)])
    (lp,) = model.infer(blocks[0].tensors()).values()
    sampler.rows[Op(1)][blocks[0].id] = voiceprint_rows(lp, blocks[0].valid, Op(1), model.geometry)
    floors = sampler._record(blocks)
    assert {"segmentation.0", "segmentation.1", "segmentation.2"} <= set(floors["ops"]["0"])
    assert "voiceprint.2" in floors["ops"]["1"] and floors["ops"]["0"]["segmentation.2"]["max_abs"] == 0.0


def test_the_report_plots_error_over_floor_only_when_measured(tmp_path, control):
    from reports.signoff import ReportContext, write_report

    p, loc = control
    paths = write_report(tmp_path / "with", p.score, ReportContext(localisation=loc, promoted=False))
    page, md = paths["html"].read_text(), paths["md"].read_text()
    assert 'id="module-errors"' in page and 'id="module-errors-plot-0"' in page and "(log)" in page
    assert '<code class="first-exceeding">segmentation.lstm</code>' in page
    assert "## Where the error grows" in md and "`segmentation.lstm`" in md
    import json

    facts = json.loads(paths["json"].read_text())["module_errors"]
    assert [(line["shape"], line["op"]) for line in facts["lines"]] == [(2, 0), (2, 1), (2, 2)]
    assert all(math.isfinite(m["ratio"]) for line in facts["lines"] for m in line["modules"])
    # negative control: localisation without per-module figures (an older localisation.json): no section
    old = {
        k: {
            op: {key: v for key, v in item.items() if key not in ("modules", "first_exceeding")}
            for op, item in ops.items()
        }
        for k, ops in loc.items()
    }
    paths = write_report(tmp_path / "without", p.score, ReportContext(localisation=old, promoted=False))
    assert 'id="module-errors"' not in paths["html"].read_text()
    assert "module_errors" not in json.loads(paths["json"].read_text())


def test_the_report_command_reads_a_localisation_file_with_module_errors(tmp_path, control):
    """``harness report --localisation``: the file validates (typed per-module entries) and is rendered as
    written, so the pages carry the same section the nightly's do."""
    from harness.base.jsonio import dumps
    from harness.pipeline.commands.lane import report
    from harness.pipeline.score import write_score

    p, loc = control
    write_score(tmp_path / "score.json", p.score)
    (tmp_path / "localisation.json").write_text(
        dumps({"kind": "harness.localisation", "format": 1, "score_digest": p.score.digest, "shapes": loc})
    )
    report(tmp_path / "score.json", tmp_path / "report", None, None, None, tmp_path / "localisation.json")
    page = (tmp_path / "report" / "report.html").read_text()
    assert '<code class="first-exceeding">voiceprint.trunk.stages.2</code>' in page


def test_golden_record_says_in_one_line_when_a_model_has_no_modules_to_hook(capsys, monkeypatch, tmp_path):
    from tests.cli_run import harness_cli

    monkeypatch.chdir(tmp_path)
    code, out, _ = harness_cli(
        capsys,
        monkeypatch,
        "golden",
        "record",
        "--model",
        "lanes.models.null_model:small",
        "--release",
        "null",
        "--set",
        "corpus.blocks=2",
        "--no-progress",
    )
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("module noise floors not recorded: ")]
    assert lines == [
        "module noise floors not recorded: the model exposes no torch modules to hook (torch_modules()); "
        "localisation will use one ulp of each scale"
    ]


def test_shard_goldens_merge_their_module_floors_worst_of():
    from harness.localisation.module_floors import merge_module_floors, skipped

    def part(block, max_abs, jitter):
        return {
            "format": 1,
            "passes": 2,
            "seed": 0,
            "blocks": [block],
            "ops": {"0": {"m": {"max_abs": max_abs, "max_rel": 0.0, "scale": 1.0, "jitter": jitter}}},
        }

    merged = merge_module_floors([part("a", 0.0, 3e-7), part("b", 1e-7, 1e-7)])["module_floors"]
    assert merged["blocks"] == ["a", "b"]
    assert merged["ops"]["0"]["m"] == {"max_abs": 1e-7, "max_rel": 0.0, "scale": 1.0, "jitter": 3e-7}
    assert merge_module_floors([None, None]) == {}  # shards recorded before floors existed: no key
    why = merge_module_floors([part("a", 0.0, 0.0), skipped("no modules", 0)])["module_floors"]
    assert why["skipped"] == "no modules" and why["ops"] == {}
    assert "records no module floors" in merge_module_floors([part("a", 0.0, 0.0), None])["module_floors"]["skipped"]
