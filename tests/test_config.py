"""harness.toml: every key known, bad values refused with the key named."""

from __future__ import annotations

import pytest

from harness.config import config_from_dict, load_config
from harness.errors import ConfigError
from harness.ops import Op


def test_embedded_default():
    cfg = load_config(None)
    assert cfg.model.spec == "full" and cfg.device == "cpu" and cfg.mode == "isolated"
    assert cfg.release_shapes == {op: (1,) for op in Op}
    assert cfg.tolerances.op0.max_abs == 1e-4 and cfg.tolerances.op1.min_cosine == 0.99999


def test_full_file(tmp_path):
    path = tmp_path / "harness.toml"
    path.write_text("""
[release]
name = "diar-2026.12"
device = "cuda:0"
[model]
spec = "small"
seed = 3
[shapes]
release = {op0 = [1], op1 = [1, 2], op2 = [1]}
candidates = [2, 4, 8, 16, 32]
pad_to_fixed = true
[lanes]
mode = "chained"
[numerics]
mkldnn = false
threads = 2
allow_tf32 = true
cudnn_benchmark = true
[tolerances.op0]
mode = "noise-floor"
max_flip_rate = 0.01
[tolerances.op1]
min_cosine = 0.9999
[masks]
min_active_frames = 20
[corpus]
blocks = 32
""")
    cfg = load_config(path)
    assert cfg.name == "diar-2026.12" and cfg.model.seed == 3 and cfg.release_shapes[Op.VOICEPRINT] == (1, 2)
    assert cfg.candidates == (2, 4, 8, 16, 32) and cfg.pad_to_fixed and cfg.mode == "chained"
    assert not cfg.numerics.mkldnn and cfg.numerics.threads == 2 and cfg.numerics.allow_tf32
    assert cfg.tolerances.op0.mode == "noise-floor" and cfg.tolerances.op1.min_cosine == 0.9999
    assert cfg.tolerances.op2.min_cosine == 0.99999 and cfg.masks.min_active_frames == 20
    assert cfg.corpus.blocks == 32
    assert config_from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()  # round trip


@pytest.mark.parametrize("data,key", [
    ({"releese": {}}, "unknown section [releese]"),
    ({"model": {"spek": "x"}}, "model.spek: unknown key"),
    ({"shapes": {"candidates": [2, 0]}}, "shapes.candidates: bad value 0"),
    ({"shapes": {"candidates": [2, 2]}}, "shapes.candidates: a shape is listed twice"),
    ({"shapes": {"candidates": "2,4"}}, "shapes.candidates: bad value '2,4'"),
    ({"shapes": {"release": {"op0": [1]}}}, "shapes.release.op1: missing"),
    ({"lanes": {"mode": "parallel"}}, "lanes.mode: bad value 'parallel'"),
    ({"numerics": {"threads": -1}}, "numerics.threads"),
    ({"numerics": {"tf32": True}}, "numerics.tf32: unknown key"),
    ({"numerics": {"matmul_precision": "low"}}, "numerics.matmul_precision"),
    ({"tolerances": {"op0": {"max_abs": "small"}}}, "tolerances.op0.max_abs: bad value 'small'"),
    ({"tolerances": {"op1": {"min_cosine": 1.5}}}, "min_cosine: bad value 1.5"),
    ({"tolerances": {"op0": {"mode": "lenient"}}}, "mode: bad value 'lenient'"),
    ({"tolerances": {"op3": {}}}, "tolerances.op3: unknown key"),
    ({"tolerances": {"op0": {"max_flip_rate": 2.0}}}, "max_flip_rate: bad value 2.0"),
    ({"corpus": {"source": "wav"}}, "corpus.source"),
    ({"model": {"seed": True}}, "model.seed: bad value True"),
])
def test_bad_keys_and_values_are_refused_by_name(data, key):
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, "harness.toml")
    assert key in str(info.value) and "harness.toml" in str(info.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[release\nname=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")
