"""The nightly's score accumulated while its lanes run (harness.pipeline.live_score), against post-hoc scoring.

The live score must be the post-hoc score's bytes (but ``created`` and the seal over it), with arrangements and
repeats, in both voiceprint modes, with batches cut across the lanes' groups; the run's checks still happen; a
failure in its thread fails the nightly with nothing written and no thread left; groups out of golden order
fall back to post-hoc scoring. The null model's noisy control (every packed answer carries fresh noise) makes
every figure non-trivial: worst blocks, first differing blocks, non-bitwise repeats.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from golden.runs import load_run
from harness.base.errors import ScoringError
from harness.base.jsonio import dumps
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, ModelSection, PackerSection
from harness.data.shape import EXACT
from harness.pipeline import nightly as nightly_module
from harness.pipeline import score as score_module
from harness.pipeline.live_score import LiveScore
from harness.pipeline.nightly import nightly
from harness.pipeline.nightly_job import NightlyJob
from harness.pipeline.record import record_golden
from harness.pipeline.run import plan_for, scoring_fields
from harness.pipeline.score import score_run, write_score
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model

NOISY = "lanes.controls.noisy_control:small?exact=0&scale=1e-5"
BLOCKS = 8
SHAPES = (2, 3)  # the lanes' group is lcm = 6 blocks; the tests cut score batches of 4: batches cross groups


def config_for(mode: str) -> ConfigFile:
    return release_config(
        name="live",
        model=ModelSection(spec=NOISY),
        candidates=SHAPES,
        voiceprint_inputs=mode,
        evidence=EvidenceSection(arrangements=3, repeats=2),
    )


_WORLDS: dict[str, dict] = {}


def quiet_job(cfg: ConfigFile, golden: Path, out: Path) -> NightlyJob:
    """A nightly of ``cfg`` without progress, localisation, promotion nor packing laws (not what is compared)."""
    return NightlyJob(
        cfg.with_overrides(packer=PackerSection(laws_examples=0)),
        golden,
        out,
        progress=False,
        localise=False,
        no_promote=True,
    )


def make_world(mode: str, tmp_path_factory) -> dict:
    """A golden of the noisy control, and one nightly over it (scored live, batches of 4), per voiceprint mode;
    made once per module."""
    if mode not in _WORLDS:
        _WORLDS[mode] = _world(mode, tmp_path_factory)
    return _WORLDS[mode]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world("isolated", tmp_path_factory)


@pytest.fixture(scope="module", params=["isolated", "chained"])
def each_mode(request, tmp_path_factory):
    return make_world(request.param, tmp_path_factory)


def _world(mode: str, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp(f"live-{mode}")
    backend = InProcessBackend(load_model(NOISY), NumericSettings())
    cfg = config_for(mode)
    golden, _ = record_golden(tmp / "goldens", "live", synth_corpus(backend.geometry, BLOCKS).rows(), backend, cfg)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(score_module, "BATCH_BLOCKS", 4)

        def no_post_hoc(*_a, **_k):
            raise AssertionError("the nightly scored post-hoc")

        mp.setattr(nightly_module, "score_run", no_post_hoc)
        outcome = nightly(quiet_job(cfg, golden.path, tmp / "out"), backend)
    finally:
        mp.undo()
    return {
        "tmp": tmp,
        "cfg": cfg,
        "golden": golden,
        "backend": backend,
        "outcome": outcome,
        "run": load_run(outcome.paths["run"]),
    }


def unsealed(text: str) -> str:
    """A score file's text without the two values that differ between two scorings of one run."""
    text = re.sub(r'"created": "[^"]*"', '"created": "-"', text, count=1)
    return re.sub(r'"digest": "[0-9a-f]{64}"', '"digest": "-"', text)


def post_hoc_text(world, path: Path) -> str:
    """The world's run scored post-hoc (batches of 4, as its nightly), the file's text; made once per world."""
    if "post" not in world:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(score_module, "BATCH_BLOCKS", 4)
            score = score_run(world["golden"], world["run"], world["cfg"].tolerances)
        world["post"] = write_score(path, score).read_text()
    return str(world["post"])


def test_the_live_score_is_the_post_hoc_score_byte_for_byte(each_mode, tmp_path):
    """Fails without the live path (no module; or a nightly scoring post-hoc trips the fixture's guard), and
    on any figure the live batches accumulate otherwise (order, batch cuts, a missing empty OP)."""
    world = each_mode
    nightly_text = (world["tmp"] / "out" / "score.json").read_text()
    score = json.loads(nightly_text)
    assert "canaries" in score  # the nightly adds its canaries to the score it accumulated: not what is compared
    live = dumps({k: v for k, v in score.items() if k != "canaries"}, 1) + "\n"
    assert set(score["shapes"]) == {"2", "3"} and score["evidence"] == {"arrangements": 3, "repeats": 2, "seed": 0}
    assert score["shapes"]["2"]["repeats"]["reproducible"] is False  # the noise: non-trivial figures to compare
    post = post_hoc_text(world, tmp_path / "post.json")
    assert unsealed(live) == unsealed(post)
    assert live != post or score["created"] in post  # created (and so the seal) may differ, nothing else


def groups_of(world, size: int, order=None):
    """The run's lanes in groups of ``size`` blocks (read back from its files), as the runner's sink gives them."""
    run, lanes = world["run"], plan_for(world["cfg"]).lanes()
    ids = order or run.block_ids()
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        for lane in lanes:
            yield lane, run.lane(lane).select(chunk)


def fed(world, groups) -> LiveScore:
    cfg = world["cfg"]
    live = LiveScore(world["golden"], scoring_fields(plan_for(cfg), cfg), plan_for(cfg).lanes(), cfg.tolerances)
    try:
        for lane, batch in groups:
            live.sink(lane, batch)
    except BaseException:
        live.abort()
        raise
    return live


def test_groups_of_any_size_are_cut_into_the_post_hoc_batches(world, tmp_path, monkeypatch):
    """Groups of 5 blocks (the runner's were 6) cut into batches of 4: 4 | 1+3 | 2+..."""
    monkeypatch.setattr(score_module, "BATCH_BLOCKS", 4)
    live = fed(world, groups_of(world, 5))
    try:
        score = live.result(world["run"])
    finally:
        live.abort()
    assert live.dropped is None
    assert unsealed(write_score(tmp_path / "live.json", score).read_text()) == unsealed(
        post_hoc_text(world, tmp_path / "post.json")
    )


def test_live_batches_cut_otherwise_give_the_same_file_and_one_ulp_more_another(world, tmp_path, monkeypatch):
    """Where batches are cut does not move a figure (the worst rows are the largest of the whole lane, the plot's
    sample is drawn value by value): a live score batched by the lanes' groups (5 blocks here) is the post-hoc
    file of batches of 4. Negative control: one ULP more in one window of one lane's answer is another file."""
    import dataclasses

    import numpy as np

    monkeypatch.setattr(score_module, "BATCH_BLOCKS", 4)
    post = post_hoc_text(world, tmp_path / "post.json")
    monkeypatch.setattr(score_module, "BATCH_BLOCKS", 5)

    def scored(groups) -> str:
        live = fed(world, groups)
        try:
            score = live.result(world["run"])
        finally:
            live.abort()
        return unsealed(write_score(tmp_path / "live.json", score).read_text())

    assert scored(groups_of(world, 5)) == unsealed(post)

    def one_ulp_more(groups):
        done = False
        for lane, batch in groups:
            if not done and lane == "k2":
                logprobs = batch.segmentation.logprobs.copy()
                logprobs[0, 0, 0, 0] = np.nextafter(logprobs[0, 0, 0, 0], np.float32(np.inf))
                batch = dataclasses.replace(
                    batch, segmentation=dataclasses.replace(batch.segmentation, logprobs=logprobs)
                )
                done = True
            yield lane, batch

    assert scored(one_ulp_more(groups_of(world, 5))) != unsealed(post)


def test_groups_out_of_golden_order_fall_back_to_post_hoc_scoring(world, tmp_path, monkeypatch):
    monkeypatch.setattr(score_module, "BATCH_BLOCKS", 4)
    calls = []
    real = score_module.score_run
    monkeypatch.setattr(score_module, "score_run", lambda *a: calls.append(1) or real(*a))
    live = fed(world, groups_of(world, 3, order=list(reversed(world["run"].block_ids()))))
    try:
        score = live.result(world["run"])
    finally:
        live.abort()
    assert live.dropped is not None and "out of golden order" in live.dropped and calls == [1]
    assert unsealed(write_score(tmp_path / "live.json", score).read_text()) == unsealed(
        post_hoc_text(world, tmp_path / "post.json")
    )


def test_a_live_score_of_other_blocks_than_the_run_holds_is_refused(world):
    ids = world["run"].block_ids()
    live = fed(world, groups_of(world, 3, order=ids[:6]))  # two groups of the run's eight blocks
    try:
        with pytest.raises(ScoringError, match=r"holds 8 blocks, the live score was fed 6"):
            live.result(world["run"])
    finally:
        live.abort()


def light(world) -> ConfigFile:
    """The world's release at one shape, one arrangement, one run: a quick nightly for the failure tests."""
    return world["cfg"].with_overrides(
        candidates=(2,), evidence=EvidenceSection(arrangements=1, repeats=1, neighbours=False, canaries=False)
    )


def test_the_run_is_checked_against_the_golden_before_the_live_score_is_used(world, tmp_path, monkeypatch):
    """check_comparable (run vs golden id, fingerprint, geometry, strays) runs on the written run; when it refuses,
    the nightly fails and writes no score."""
    seen = []

    def refuse(golden, run, lanes):
        seen.append((run.run_id, list(lanes)))
        raise ScoringError("injected: not comparable")

    monkeypatch.setattr(score_module, "check_comparable", refuse)
    out = tmp_path / "out"
    with pytest.raises(ScoringError, match="injected: not comparable"):
        nightly(quiet_job(light(world), world["golden"].path, out), world["backend"])
    assert len(seen) == 1 and seen[0][1] == [EXACT, "k2"]
    assert not (out / "score.json").exists() and not (out / "report").exists()
    assert not [t for t in threading.enumerate() if t.name == "live-score"]


def test_a_failing_live_scorer_fails_the_nightly_leaving_no_thread_and_no_score(world, tmp_path, monkeypatch):
    def broken(self, gold, lanes):
        raise ScoringError("injected: the scorer broke")

    monkeypatch.setattr(score_module.Scoring, "add", broken)
    out = tmp_path / "out"
    with pytest.raises(ScoringError, match="injected: the scorer broke") as caught:
        nightly(quiet_job(light(world), world["golden"].path, out), world["backend"])
    assert "live score" in getattr(caught.value, "harness_step", "")
    assert not [t for t in threading.enumerate() if t.name == "live-score"]
    assert not (out / "score.json").exists() and not (out / "report").exists()
    runs = [p.name for p in (out / "runs").iterdir()] if (out / "runs").is_dir() else []
    assert not [name for name in runs if name.startswith(".")]  # no temporary run left behind


def test_a_live_score_built_for_other_lanes_or_fed_part_of_a_group_is_refused(world):
    """The run's manifest must give the fields the live score was built from (shapes, ops, mode, evidence); the
    lanes must hand over whole groups, each lane once."""
    cfg, lanes = world["cfg"], plan_for(world["cfg"]).lanes()
    other = LiveScore(world["golden"], scoring_fields(plan_for(light(world)), light(world)), lanes, cfg.tolerances)
    try:
        for lane, batch in groups_of(world, 8):
            other.sink(lane, batch)
        with pytest.raises(ScoringError, match="not the ones this score was accumulated for"):
            other.result(world["run"])
    finally:
        other.abort()
    part = fed(world, list(groups_of(world, 8))[:-1])  # the last lane of the only group never comes
    try:
        with pytest.raises(ScoringError, match="the lanes ended mid-group"):
            part.result(world["run"])
        with pytest.raises(ScoringError, match="gave a second batch"):  # the group still holds its exact lane
            part.sink(EXACT, world["run"].lane(EXACT).select(world["run"].block_ids()))
    finally:
        part.abort()


def test_the_golden_rows_of_each_next_batch_are_read_while_the_lanes_run(tmp_path, monkeypatch):
    """A golden of 2-block row groups scored in batches of 2: the live scorer reads only the first batch's rows
    when it scores it; every later batch was read ahead, after the batch before (so the last batch's reading is
    not on the path after the device's last call). The score is still the post-hoc one's bytes."""
    from golden.lane_reader import LaneReader
    from golden.tables import LaneWriter
    from harness.pipeline import record as record_module

    class TwoBlockGroups(LaneWriter):
        def write(self, batch):
            ids = batch.segmentation.block_ids
            for at in range(0, len(ids), 2):
                super().write(batch.select(ids[at : at + 2]))

    monkeypatch.setattr(
        record_module, "new_lane_writer", lambda d, g, ops: TwoBlockGroups(d, g, ops, decisions=True, group_blocks=2)
    )
    backend = InProcessBackend(load_model(NOISY), NumericSettings())
    cfg = config_for("isolated")
    golden, _ = record_golden(
        tmp_path / "goldens", "ahead", synth_corpus(backend.geometry, BLOCKS).rows(), backend, cfg
    )
    assert golden.outputs().groups == BLOCKS // 2
    reads: list[tuple[str, str]] = []  # (how, thread) of every row group the live scorer read
    how = threading.local()
    real_read, real_ahead = LaneReader._read_group, LaneReader.read_ahead

    def read_group(self, i):
        reads.append((getattr(how, "now", "select"), threading.current_thread().name))
        return real_read(self, i)

    def read_ahead(self, ids):
        how.now = "ahead"
        try:
            real_ahead(self, ids)
        finally:
            how.now = "select"

    monkeypatch.setattr(LaneReader, "_read_group", read_group)
    monkeypatch.setattr(LaneReader, "read_ahead", read_ahead)
    monkeypatch.setattr(score_module, "BATCH_BLOCKS", 2)
    monkeypatch.setattr(nightly_module, "score_run", lambda *a, **k: pytest.fail("the nightly scored post-hoc"))
    outcome = nightly(quiet_job(cfg, golden.path, tmp_path / "out"), backend)
    live = [h for h, thread in reads if thread == "live-score"]
    assert live == ["select"] + ["ahead"] * (BLOCKS // 2 - 1), (
        f"the live scorer read its golden row groups as {live}: expected the first batch when scored, every "
        "later one ahead (LiveScore._read_ahead)"
    )
    monkeypatch.undo()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(score_module, "BATCH_BLOCKS", 2)
        post = score_run(golden, load_run(outcome.paths["run"]), cfg.tolerances)
    night = json.loads((tmp_path / "out" / "score.json").read_text())
    night.pop("canaries")  # the nightly adds its canaries to the score it accumulated: not what is compared
    assert unsealed(dumps(night, 1) + "\n") == unsealed(write_score(tmp_path / "post.json", post).read_text())
