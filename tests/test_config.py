"""harness.toml: every key known, bad values refused with the key named."""

from __future__ import annotations

import pytest

from harness.config import config_from_dict, load_config
from harness.data.errors import ConfigError
from harness.data.ops import Op


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
voiceprint_inputs = "chained"
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
    ({"releese": {}}, "releese: unknown key"),
    ({"model": {"spek": "x"}}, "model.spek: unknown key (did you mean 'spec'?) (got 'x')"),
    ({"shapes": {"candidates": [2, 0]}}, "shapes.candidates.1: Input should be greater than or equal to 1 (got 0)"),
    ({"shapes": {"candidates": [2, 2]}}, "shapes.candidates: a shape is listed twice"),
    ({"shapes": {"candidates": "2,4"}}, "shapes.candidates: Input should be a valid list (got '2,4')"),
    ({"shapes": {"release": {"op0": [1]}}}, "shapes.release.op1: missing (required)"),
    ({"shapes": {"release": [2]}}, "shapes.release: every OP's release shapes must include 1"),
    ({"lanes": {"mode": "chained"}}, "lanes.mode: unknown key"),
    ({"lanes": {"voiceprint_inputs": "parallel"}}, "lanes.voiceprint_inputs: Input should be 'isolated' or 'chained'"),
    ({"numerics": {"threads": -1}}, "numerics.threads: Input should be greater than or equal to 0 (got -1)"),
    ({"numerics": {"tf32": True}}, "numerics.tf32: unknown key"),
    ({"numerics": {"matmul_precision": "low"}}, "numerics.matmul_precision: Input should be 'highest'"),
    ({"tolerances": {"op0": {"max_abs": "small"}}}, "tolerances.op0.max_abs: Input should be a valid number (got "
                                                    "'small')"),
    ({"tolerances": {"op0": {"max_abs": float("inf")}}}, "tolerances.op0.max_abs: Input should be a finite number"),
    ({"tolerances": {"op0": {"max_abs": float("nan")}}}, "tolerances.op0.max_abs: Input should be a finite number"),
    ({"tolerances": {"op1": {"min_cosine": 1.5}}}, "tolerances.op1.min_cosine: Input should be less than or equal "
                                                   "to 1"),
    ({"tolerances": {"op0": {"mode": "lenient"}}}, "tolerances.op0.mode: Input should be 'bitwise', 'tolerance' or "
                                                   "'noise-floor' (got 'lenient')"),
    ({"tolerances": {"op3": {}}}, "tolerances.op3: unknown key"),
    ({"tolerances": {"op0": {"max_flip_rate": 2.0}}}, "tolerances.op0.max_flip_rate: Input should be less than or "
                                                      "equal to 1 (got 2.0)"),
    ({"tolerances": {"op0": {"noise_floor_factor": 0.5}}}, "noise_floor_factor: Input should be greater than or equal "
                                                           "to 1"),
    ({"masks": {"min_active_fraction": -0.1}}, "masks.min_active_fraction: Input should be greater than 0"),
    ({"masks": {"min_active_fraction": 1.5}}, "masks.min_active_fraction: Input should be less than or equal to 1"),
    ({"masks": {"min_active_frames": -1}}, "masks.min_active_frames: Input should be greater than or equal to 1"),
    ({"corpus": {"source": "wav"}}, "corpus.source: Input should be 'synth'"),
    ({"corpus": {"blocks": 0}}, "corpus.blocks: Input should be greater than or equal to 1 (got 0)"),
    ({"model": {"seed": True}}, "model.seed: Input should be a valid integer (got True)"),
    ({"model": {"seed": 2**40}}, "model.seed: Input should be less than or equal to 4294967295"),
    ({"release": {"name": "../x"}}, "release.name: String should match pattern"),
    ({"release": {"name": ""}}, "release.name: String should match pattern"),
    ({"release": {"device": "gpu"}}, "release.device: String should match pattern"),
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
    (tmp_path / "latin1.toml").write_bytes("[release]\nname = 'caf\xe9'\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin1.toml: not UTF-8 text"):
        load_config(tmp_path / "latin1.toml")
    with pytest.raises(ConfigError, match="found a directory"):
        load_config(tmp_path)


def test_the_shipped_example_is_the_default_with_comments():
    """harness.toml.example documents every key and loads to exactly the embedded default."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "harness.toml.example"
    assert load_config(example).to_dict() == load_config(None).to_dict()
