"""harness.toml: every key known, bad values refused with the key named."""

from __future__ import annotations

import pytest

from harness.base.errors import ConfigError
from harness.data.ops import Op
from harness.release_config import config_from_dict, load_config, parse_set


def test_embedded_default():
    cfg = load_config(None)
    assert cfg.model.spec == "full" and cfg.release.device == "cpu" and cfg.lanes.voiceprint_inputs == "isolated"
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
    assert cfg.release.name == "diar-2026.12" and cfg.model.seed == 3 and cfg.release_shapes[Op.VOICEPRINT] == (1, 2)
    assert (
        cfg.shapes.candidates == [2, 4, 8, 16, 32]
        and cfg.shapes.pad_to_fixed
        and cfg.lanes.voiceprint_inputs == "chained"
    )
    assert not cfg.numerics.mkldnn and cfg.numerics.threads == 2 and cfg.numerics.allow_tf32
    assert cfg.tolerances.op0.mode == "noise-floor" and cfg.tolerances.op1.min_cosine == 0.9999
    assert cfg.tolerances.op2.min_cosine == 0.99999 and cfg.masks.min_active_frames == 20
    assert cfg.corpus.blocks == 32
    assert config_from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()  # round trip


@pytest.mark.parametrize(
    "data,key",
    [
        ({"releese": {}}, "releese: unknown key"),
        ({"model": {"spek": "x"}}, "model.spek: unknown key (did you mean 'spec'?) (got 'x')"),
        ({"shapes": {"candidates": [2, 0]}}, "shapes.candidates.1: Input should be greater than or equal to 1 (got 0)"),
        ({"shapes": {"candidates": [2, 2]}}, "shapes.candidates: a shape is listed twice"),
        ({"shapes": {"candidates": "2,4"}}, "shapes.candidates: Input should be a valid list (got '2,4')"),
        ({"shapes": {"release": {"op0": [1]}}}, "shapes.release.op1: missing (required)"),
        ({"shapes": {"release": [2]}}, "shapes.release: every OP's release shapes must include 1"),
        ({"lanes": {"mode": "chained"}}, "lanes.mode: unknown key"),
        (
            {"lanes": {"voiceprint_inputs": "parallel"}},
            "lanes.voiceprint_inputs: Input should be 'isolated' or 'chained'",
        ),
        ({"numerics": {"threads": -1}}, "numerics.threads: Input should be greater than or equal to 0 (got -1)"),
        ({"numerics": {"tf32": True}}, "numerics.tf32: unknown key"),
        ({"numerics": {"matmul_precision": "low"}}, "numerics.matmul_precision: Input should be 'highest'"),
        (
            {"tolerances": {"op0": {"max_abs": "small"}}},
            "tolerances.op0.max_abs: Input should be a valid number (got 'small')",
        ),
        ({"tolerances": {"op0": {"max_abs": float("inf")}}}, "tolerances.op0.max_abs: Input should be a finite number"),
        ({"tolerances": {"op0": {"max_abs": float("nan")}}}, "tolerances.op0.max_abs: Input should be a finite number"),
        (
            {"tolerances": {"op1": {"min_cosine": 1.5}}},
            "tolerances.op1.min_cosine: Input should be less than or equal to 1",
        ),
        (
            {"tolerances": {"op0": {"mode": "lenient"}}},
            "tolerances.op0.mode: Input should be 'bitwise', 'tolerance' or 'noise-floor' (got 'lenient')",
        ),
        ({"tolerances": {"op3": {}}}, "tolerances.op3: unknown key"),
        (
            {"tolerances": {"op0": {"max_flip_rate": 2.0}}},
            "tolerances.op0.max_flip_rate: Input should be less than or equal to 1 (got 2.0)",
        ),
        (
            {"tolerances": {"op0": {"noise_floor_factor": 0.5}}},
            "noise_floor_factor: Input should be greater than or equal to 1",
        ),
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
    ],
)
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


# --- one way in: command-line values are merged into the file's tables and validated with them


def _flag(flag, key, value):
    from harness.release_config import Override

    return Override(flag, key, value, repr(value) if isinstance(value, str) else str(value))


def test_a_flag_is_validated_by_the_files_validator_and_named(tmp_path):
    """The flag's value meets the rule the file's key meets (the one ConfigFile), and the line names the flag."""
    path = tmp_path / "harness.toml"
    path.write_text("[model]\nseed = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, [parse_set("model.seed=-1")])
    assert str(info.value) == "--set 'model.seed=-1': model.seed: Input should be greater than or equal to 0 (got -1)"
    path.write_text("[model]\nseed = -1\n")  # negative control: the same value from the file names the file
    with pytest.raises(ConfigError, match=r"harness.toml: model.seed: Input should be greater than or equal to 0"):
        load_config(path)
    with pytest.raises(ConfigError) as flag_refusal:
        load_config(None, [_flag("--tolerance", f"tolerances.op{op}.mode", "lenient") for op in range(3)])
    with pytest.raises(ConfigError) as file_refusal:
        config_from_dict({"tolerances": {"op0": {"mode": "lenient"}}}, "harness.toml")
    # one rule, one wording: the flag's refusal is the file's, prefixed with the flag
    assert str(flag_refusal.value).startswith("--tolerance 'lenient': " + str(file_refusal.value).split(": ", 1)[1])


def test_flags_override_the_file_and_the_last_one_wins(tmp_path):
    path = tmp_path / "harness.toml"
    path.write_text("[model]\nseed = 3\n[tolerances.op0]\nmode = 'bitwise'\nmax_abs = 0.5\n[backend]\nshm = true\n")
    cfg = load_config(
        path,
        [
            parse_set("model.seed=5"),
            parse_set("model.seed=7"),
            _flag("--tolerance", "tolerances.op0.mode", "tolerance"),
        ],
    )
    assert cfg.model.seed == 7 and cfg.tolerances.op0.mode == "tolerance" and cfg.tolerances.op0.max_abs == 0.5
    assert cfg.backend.shm and cfg.backend.url == "in-process"


def test_set_parses_toml_values_and_refuses_by_name():
    from harness.release_config import parse_set

    cfg = load_config(
        None,
        [
            parse_set("backend.concurrency=4"),
            parse_set("ray.workers=2"),
            parse_set("backend.url=http://127.0.0.1:8000"),
            parse_set("shapes.candidates=[2, 8]"),
            parse_set("backend.shm=true"),
            parse_set("packer.cmd = 'python p.py'"),
        ],
    )
    assert cfg.backend.concurrency == 4 and cfg.ray.workers == 2 and cfg.backend.shm
    assert (
        cfg.backend.url == "http://127.0.0.1:8000"
        and cfg.shapes.candidates == [2, 8]
        and cfg.packer.cmd == "python p.py"
    )
    for text, says in (
        ("ray.workers=0", "--set 'ray.workers=0': ray.workers: Input should be greater than or equal to 1 (got 0)"),
        (
            "backend.concurency=4",
            "--set 'backend.concurency=4': backend.concurency: unknown key (did you mean 'concurrency'?)",
        ),
        ("model.seed=abc", "--set 'model.seed=abc': model.seed: Input should be a valid integer"),
        ("packer.laws_examples=-1", "packer.laws_examples: Input should be greater than or equal to 0"),
    ):
        with pytest.raises(ConfigError) as info:
            load_config(None, [parse_set(text)])
        assert str(info.value).startswith(says) or says in str(info.value), info.value
    for bad in ("seed", "model.seed", ".seed=1", "model.=1", "model. seed=1"):
        with pytest.raises(ConfigError, match="expected TABLE.KEY=VALUE"):
            parse_set(bad)


def test_the_transport_tables_are_checked_and_stay_out_of_what_runs_record(tmp_path):
    """[backend], [ray], [packer], [nightly] are declared (every key known) but are how a job runs, not what the
    release is: a run's manifest (config.to_dict()) is byte-for-byte what it was before them."""
    path = tmp_path / "harness.toml"
    path.write_text(
        "[backend]\nurl = 'http://h:8000'\nconcurrency = 3\nmodel_label = 'm'\n[ray]\naddress = 'local'\n"
        "workers = 2\nshards = 8\nretries = 0\naccelerator = 'H100'\n[packer]\nlaws_examples = 0\n"
        "[nightly]\nshard = '1/2'\nledger = 'l.json'\n"
    )
    cfg = load_config(path)
    assert (cfg.backend.concurrency, cfg.ray.address, cfg.ray.retries, cfg.packer.laws_examples) == (3, "local", 0, 0)
    assert cfg.nightly.shard == "1/2" and cfg.nightly.ledger == "l.json" and cfg.nightly.manifest is None
    assert cfg.to_dict() == load_config(None).to_dict()
    for data, says in (
        ({"backend": {"concurrency": 0}}, "backend.concurrency: Input should be greater than or equal to 1"),
        ({"ray": {"retries": -1}}, "ray.retries: Input should be greater than or equal to 0"),
        ({"ray": {"worker": 2}}, "ray.worker: unknown key (did you mean 'workers'?)"),
        ({"backend": {"shm": "yes"}}, "backend.shm: Input should be a valid boolean"),
    ):
        with pytest.raises(ConfigError) as info:
            config_from_dict(data, "harness.toml")
        assert str(info.value).startswith("harness.toml: " + says), info.value


# ---------------------------------------------------------------------------- every count has an upper bound
def _bounded_counts() -> dict[str, int]:
    """Every int key of the configuration (as ``table.key``, a list's items as ``table.key[]``) and its bound."""
    from harness.data.schemas.config_file import ConfigFile

    out = {}
    for table, section in ConfigFile.model_fields.items():
        model = section.annotation
        for key in getattr(model, "model_fields", {}):
            schema = model.model_json_schema()["properties"][key]
            for branch in schema.get("anyOf", [schema]):
                item = branch.get("items", branch)
                if item.get("type") == "integer":
                    assert "maximum" in item, f"{table}.{key}: a count without an upper bound"
                    out[f"{table}.{key}" + ("[]" if "items" in branch else "")] = item["maximum"]
    return out


def test_every_count_a_user_can_set_has_an_upper_bound():
    """A count past its bound would run for ever (``--set packer.laws_examples=100000000000000000000`` hung
    the run): every integer key has one, and the documented ones are the declared ones."""
    from harness.data import limits

    bounds = _bounded_counts()
    assert bounds["packer.laws_examples"] == limits.MAX_LAWS_EXAMPLES == 1_000_000
    assert bounds["evidence.arrangements"] == bounds["evidence.repeats"] == limits.MAX_EVIDENCE_RUNS == 64
    assert bounds["backend.concurrency"] == bounds["load.concurrency[]"] == limits.MAX_CONCURRENCY == 1024
    assert bounds["corpus.blocks"] == bounds["load.blocks"] == limits.MAX_BLOCKS == 10_000_000
    assert (bounds["ray.workers"], bounds["ray.shards"], bounds["ray.retries"]) == (4096, 100_000, 100)


@pytest.mark.parametrize("key", sorted(_bounded_counts()))
def test_a_count_at_its_bound_is_accepted_and_one_more_is_refused_naming_the_bound(key):
    bound = _bounded_counts()[key]
    table, name = key.rstrip("[]").split(".")

    def value(v: int) -> object:  # a list's item (the release's shapes must include 1)
        return ([1] if key == "shapes.release[]" else []) + [v] if key.endswith("[]") else v

    config_from_dict({table: {name: value(bound)}})  # at the bound: accepted (negative control)
    with pytest.raises(ConfigError, match=f"less than or equal to {bound}"):
        config_from_dict({table: {name: value(bound + 1)}})
    with pytest.raises(ConfigError, match=f"less than or equal to {bound}"):
        config_from_dict({table: {name: value(10**20)}})  # the run that hung: refused at once
