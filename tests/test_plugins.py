"""Bring-your-own-model paths: a factory by import path and a TorchScript file, end to end."""

from __future__ import annotations

import numpy as np
import pytest

from examples import byo_torchscript
from harness.base.errors import ModelError
from harness.corpus.synth import synth_corpus
from harness.data.geometry import geometry_of
from lanes.models.model_api import load_model
from tests.pipeline import pipeline


def _end_to_end(model, tmp_path):
    p = pipeline(model, tmp_path, shapes=(2, 5), blocks=10)
    assert p.golden.manifest.model.fingerprint == model.fingerprint
    return p.score


def test_factory_by_import_path(tmp_path):
    model = load_model("examples.byo_factory:make_model")
    assert model.geometry.frames_per_window == 50
    score = _end_to_end(model, tmp_path)
    assert set(score.shapes) == {"2", "5"}
    assert all(s.ops["0"].metrics["max_abs"] < 1e-4 for s in score.shapes.values())


DICT_GEOMETRY_FACTORY = """
from lanes.models.diar_nn_g import DiarNNG

class DictGeometry:
    # a model that declares its geometry as a dict, and reads it as one in infer
    def __init__(self, seed=0):
        self.inner = DiarNNG("small", seed=seed)
        self.geometry = self.inner.geometry.to_dict()
        self.fingerprint = "dict-geometry/" + self.inner.fingerprint

    def infer(self, request):
        assert self.geometry["window_samples"] == self.inner.geometry.window_samples
        return self.inner.infer(request)

def make():
    return DictGeometry()
"""


def test_a_dict_geometry_is_left_as_the_model_declared_it(tmp_path, monkeypatch):
    """The loader parses a dict geometry for the harness but never replaces the model's attribute: the
    model's own infer indexes it, through a whole record, run and score."""
    (tmp_path / "dictgeo.py").write_text(DICT_GEOMETRY_FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = load_model("dictgeo:make")
    declared = model.geometry
    assert type(declared) is dict
    assert geometry_of(model) == model.inner.geometry
    p = pipeline(model, tmp_path, shapes=(2,), blocks=4)
    assert model.geometry is declared
    assert p.golden.manifest.model.fingerprint == model.fingerprint
    assert set(p.score.shapes) == {"2"} and p.score.shapes["2"].ops["0"].metrics["max_abs"] < 1e-4


def test_torchscript_file(tmp_path):
    path = byo_torchscript.build(str(tmp_path / "tiny.pt"))
    model = load_model(path)
    assert model.geometry.embedding_dim == 8 and len(model.fingerprint) == 64
    score = _end_to_end(model, tmp_path)
    assert all(s.ops["0"].metrics["non_finite"] == 0 for s in score.shapes.values())
    assert "1" in score.shapes["2"].ops


def test_torchscript_file_that_is_not_torchscript(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a loadable TorchScript module"):
        load_model(str(bad))


def test_factory_returning_an_object_without_the_contract(tmp_path, monkeypatch):
    mod = tmp_path / "badfactory.py"
    mod.write_text("def make():\n    return object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelError, match="lacks 'geometry'"):
        load_model("badfactory:make")


def test_factory_that_raises_is_named(tmp_path, monkeypatch):
    mod = tmp_path / "raisingfactory.py"
    mod.write_text("def make():\n    raise RuntimeError('weights missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelError, match="factory raised RuntimeError: weights missing"):
        load_model("raisingfactory:make")


def test_plugin_output_is_float32():
    model = load_model("examples.byo_factory:make_model")
    corpus = synth_corpus(model.geometry, 1)
    out = model.infer(corpus.blocks[0].tensors())
    assert next(iter(out.values())).dtype == np.float32
