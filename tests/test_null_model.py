"""The null network (lanes.models.null_model): the model contract at near-zero cost, for the cost benchmark."""

from __future__ import annotations

import numpy as np
import pytest

from harness.base.errors import BlockError
from harness.data.blocks import Block
from harness.data.masks import voiceprint_rows
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from harness.packers.packing import pack, unpack
from lanes.backends.backend import InProcessBackend
from lanes.models.diar_nn_g.config import CONFIGS
from lanes.models.model_api import load_model
from tests.pipeline import pipeline


@pytest.fixture(scope="module")
def null_small():
    return load_model("lanes.models.null_model:small")


def test_it_declares_the_reference_geometries():
    assert load_model("lanes.models.null_model:full").geometry == CONFIGS["full"].geometry()
    assert load_model("lanes.models.null_model:small").geometry == CONFIGS["small"].geometry()
    assert (
        load_model("lanes.models.null_model:full").fingerprint
        != load_model("lanes.models.null_model:small").fingerprint
    )
    assert (
        load_model("lanes.models.null_model:small", seed=1).fingerprint
        != load_model("lanes.models.null_model:small").fingerprint
    )


def test_answers_have_the_contract_shapes_and_depend_on_the_audio(null_small, small_corpus):
    g = null_small.geometry
    a, b = small_corpus.blocks[:2]
    out_a = null_small.infer(a.tensors())["SEGMENTATION"]
    out_b = null_small.infer(b.tensors())["SEGMENTATION"]
    assert out_a.shape == (8, g.frames_per_window, g.classes) and out_a.dtype == np.float32
    assert np.isfinite(out_a).all() and np.abs(out_a).max() > 0
    assert not np.array_equal(out_a, out_b)
    louder = Block.create(a.id, Op.SEGMENTATION, a.span * np.float32(2), a.offsets, a.valid, g)
    assert not np.array_equal(null_small.infer(louder.tensors())["SEGMENTATION"], out_a)
    rows = voiceprint_rows(out_a, a.valid, Op.VOICEPRINT, g)
    assert rows.idx.size > 0, "the masks of a null answer must yield voiceprint rows"
    vp = a.with_voiceprint(Op.VOICEPRINT, rows.weights, rows.idx, rows.speakers, g)
    emb = null_small.infer(vp.tensors())["EMBEDDINGS"]
    assert emb.shape == (rows.idx.size, g.embedding_dim) and emb.dtype == np.float32 and np.abs(emb).max() > 0


def test_packed_and_alone_agree_bitwise(null_small, small_corpus):
    g = null_small.geometry
    blocks = small_corpus.blocks[:5]
    alone = [null_small.infer(b.tensors())["SEGMENTATION"] for b in blocks]
    packed = pack(blocks)
    for mine, theirs in zip(unpack(packed, null_small.infer(packed.tensors())), alone, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    vps = []
    for b, seg in zip(blocks, alone, strict=True):
        r = voiceprint_rows(seg, b.valid, Op.VOICEPRINT_CLEAN, g)
        vps.append(b.with_voiceprint(Op.VOICEPRINT_CLEAN, r.weights, r.idx, r.speakers, g))
    vp_packed = pack(vps)
    for v, got in zip(vps, unpack(vp_packed, null_small.infer(vp_packed.tensors())), strict=True):
        np.testing.assert_array_equal(got, null_small.infer(v.tensors())["EMBEDDINGS"])
    # and it is the audio a window sees that counts: a wrong rebase (a packing bug) changes answers
    broken = dict(packed.tensors())
    broken["OFFSETS"] = np.where(packed.offsets > 0, packed.offsets - 1, packed.offsets)
    assert not np.array_equal(
        null_small.infer(broken)["SEGMENTATION"], null_small.infer(packed.tensors())["SEGMENTATION"]
    )


def test_it_validates_requests_as_a_model_adapter_does(null_small, small_corpus):
    bad = dict(small_corpus.blocks[0].tensors())
    bad["SPAN"] = bad["SPAN"].copy()
    bad["SPAN"][3] = np.nan
    with pytest.raises(BlockError, match=r"SPAN\[3\].*NaN or Inf"):
        null_small.infer(bad)


def test_the_pipeline_promotes_every_shape_of_the_null_network(tmp_path, small_corpus):
    model = load_model("lanes.models.null_model:small")
    result = pipeline(model, tmp_path, shapes=(2, 3), corpus=small_corpus, numerics=NumericSettings(threads=1))
    assert result.score.verdict == "pass"
    assert result.golden.manifest.reproducibility.bitwise
    for shape in result.score.shapes.values():
        assert all(op.metrics["bitwise"] for op in shape.ops.values())
    assert isinstance(result.backend, InProcessBackend)
