"""The numerics key is complete: what can change results on a GPU is recorded in every
manifest's ``numerics.in_force`` and is part of the numerics profile promotions are keyed by, so a
promotion made under one CUBLAS_WORKSPACE_CONFIG, compute capability or autocast dtype (or cuDNN,
cuBLAS, driver, torch.compile, CUDA graphs) is not used under another. On CPU the GPU-only fields
are None/False and the profile is stable from run to run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.base.errors import ModelError
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas import Score
from harness.host import environment as env_mod
from harness.host.environment import DEVICE_NUMERIC_KEYS, PROFILE_KEYS, device_numerics, numerics_profile
from harness.ledger.promoted_manifest import derive_manifest, may_use
from harness.ledger.promotion import apply_score, empty_ledger
from harness.numerics import declared_execution, in_force
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import check_model, load_model
from tests.test_promotion import RELEASE, world  # noqa: F401 (fixture)
from tests.test_promotion_truth import changed, cli, promote

# One other value per field the issue names (27.4), as a GPU run would record it.
OTHER_VALUE: dict[str, Any] = {
    "cublas_workspace_config": ":16:8",
    "compute_capability": "8.0",
    "autocast_dtype": "bfloat16",
    "torch_compile": True,
    "cuda_graphs": True,
    "cudnn_version": 90100,
    "cublas_version": "12.4.5",
    "driver_version": "550.54.15",
}


def _with(in_force_: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**in_force_, key: value}


@pytest.mark.parametrize("key", sorted(OTHER_VALUE))
def test_a_profile_differing_in_one_gpu_field_is_another_profile(key):
    base = in_force()
    assert key in base, f"in_force() does not record {key!r}: it cannot be part of a profile"
    assert numerics_profile(_with(base, key, OTHER_VALUE[key])) != numerics_profile(base), (
        f"numerics_profile ignores {key!r}: a promotion made under {key}={base[key]!r} would be used under "
        f"{key}={OTHER_VALUE[key]!r}; add it to harness.host.environment.PROFILE_KEYS"
    )


def test_a_key_outside_the_profile_does_not_change_it():
    """Negative control of the test above: the profile is a digest of PROFILE_KEYS only."""
    base = in_force()
    assert "note" not in PROFILE_KEYS
    assert numerics_profile(_with(base, "note", "anything")) == numerics_profile(base)


def _score_under(score: Score, key: str, value: Any) -> Score:
    """The same evidence as if recorded with one numerics field other (its profile re-derived)."""

    def edit(s: dict) -> None:
        s["numerics"]["in_force"][key] = value
        s["numerics_profile"] = numerics_profile(s["numerics"]["in_force"])

    return changed(score, edit)


@pytest.fixture(scope="module")
def passing(world):  # noqa: F811
    path = world["scored"]((2,))
    return path, Score.model_validate(json.loads(path.read_text()))


@pytest.mark.parametrize("key", ["cublas_workspace_config", "compute_capability", "autocast_dtype"])
def test_a_promotion_made_under_one_profile_is_not_used_under_another(passing, key):
    _, score = passing
    other = _score_under(score, key, OTHER_VALUE[key])
    assert other.numerics_profile != score.numerics_profile
    book, _ = apply_score(empty_ledger(), score, score.run.created, RELEASE)
    manifest = derive_manifest(book)
    packer = score.packer["identity"]
    used, why = may_use(manifest, packer, 2, "0", score.device_kind, score.fingerprint, score.numerics_profile)
    assert used, why  # positive control: under its own profile the promotion is used
    used, why = may_use(manifest, packer, 2, "0", score.device_kind, score.fingerprint, other.numerics_profile)
    assert not used and why.startswith("no:"), (
        f"k=2 promoted under {key}={score.numerics.in_force.get(key)!r} is used under {OTHER_VALUE[key]!r}: {why}"
    )


def test_shapes_may_answers_no_under_another_cublas_workspace_config(world, passing, tmp_path):  # noqa: F811
    path, score = passing
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    done = promote(path, ledger, manifest, world["default"])
    assert done.returncode == 0, done.stdout + done.stderr
    other = _score_under(score, "cublas_workspace_config", OTHER_VALUE["cublas_workspace_config"])
    base = (
        "shapes",
        "--may",
        "--ledger",
        str(ledger),
        "--manifest",
        str(manifest),
        "--k",
        "2",
        "--op",
        "0",
        "--device",
        score.device_kind,
        "--packer",
        score.packer["identity"],
        "--fingerprint",
        score.fingerprint,
    )
    yes = cli(*base, "--profile", score.numerics_profile)
    assert yes.returncode == 0 and yes.stdout.startswith("yes:"), yes.stdout + yes.stderr
    no = cli(*base, "--profile", other.numerics_profile)
    assert no.returncode == 1 and no.stdout.startswith("no:"), no.stdout + no.stderr


def test_on_cpu_the_profile_is_stable_and_every_field_is_recorded(world, passing):  # noqa: F811
    golden = world["golden"].manifest.model_dump(mode="json")  # the JSON it was read from
    second = Score.model_validate(json.loads(world["scored"]((2,)).read_text()))
    first = passing[1]
    assert first.numerics_profile == second.numerics_profile == golden["numerics_profile"]
    runs = sorted(Path(world["tmp"]).glob("r*/runs/*/manifest.json"))
    assert runs, "no run manifest found beside the scores"
    for where, record in [("golden", golden), *((str(p), json.loads(p.read_text())) for p in runs)]:
        recorded = record["numerics"]["in_force"]
        missing = [k for k in PROFILE_KEYS if k not in recorded]
        assert not missing, f"{where}: numerics.in_force lacks {missing} (of {len(PROFILE_KEYS)} profile keys)"
        assert record["numerics_profile"] == numerics_profile(recorded), where
        assert {k: recorded[k] for k in DEVICE_NUMERIC_KEYS} == dict.fromkeys(DEVICE_NUMERIC_KEYS), where
        assert (recorded["autocast_dtype"], recorded["torch_compile"], recorded["cuda_graphs"]) == (
            None,
            False,
            False,
        ), where
    assert in_force() == in_force(), "two readings of the numerics in force differ on CPU"


def test_on_cpu_the_device_fields_are_none_whatever_cuda_libraries_torch_carries(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    assert device_numerics("cpu") == dict.fromkeys(DEVICE_NUMERIC_KEYS)


def test_on_cuda_the_device_fields_are_recorded(monkeypatch):
    """A CUDA device as torch reports it (no GPU here: torch's answers stand in for one)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev: (9, 0))
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    monkeypatch.setattr(env_mod, "_cublas_version", lambda: "12.4.5")
    monkeypatch.setattr(env_mod, "_driver_version", lambda: "550.54.15")
    assert device_numerics("cuda:0") == {
        "compute_capability": "9.0",
        "cudnn_version": 90100,
        "cublas_version": "12.4.5",
        "driver_version": "550.54.15",
    }
    assert numerics_profile(in_force("cuda:0")) != numerics_profile(in_force("cpu"))


def test_the_loaded_cublas_is_found_in_the_process_maps(tmp_path, monkeypatch):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libcublasLt.so.12\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /opt/nvidia/cublas/lib/libcublas.so.12\n"
        "7f04-7f05 rw-p 00000000 00:00 0\n"
    )
    assert env_mod._loaded_library("libcublas.so", maps) == "/opt/nvidia/cublas/lib/libcublas.so.12"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libcublasLt.so.12\n")
    assert env_mod._loaded_library("libcublas.so", maps) is None
    # neither a loaded library nor a wheel: unknown, not guessed
    monkeypatch.setattr(env_mod.importlib.metadata, "version", _no_distribution)
    assert env_mod._cublas_version(maps) is None


def _no_distribution(name: str) -> str:
    raise env_mod.importlib.metadata.PackageNotFoundError(name)


class _Declaring:
    """The reference model, declaring how it runs (as a plug-in would)."""

    def __init__(self, **declared: Any) -> None:
        self._model = load_model("small")
        self.geometry, self.fingerprint = self._model.geometry, self._model.fingerprint
        self.infer = self._model.infer
        for key, value in declared.items():
            setattr(self, key, value)


def test_a_models_declared_autocast_and_compile_are_recorded_by_the_backend():
    plain = InProcessBackend(check_model(_Declaring(), "plain"), NumericSettings(threads=1))
    declared = InProcessBackend(
        check_model(_Declaring(autocast_dtype=torch.bfloat16, torch_compile=True), "declared"),
        NumericSettings(threads=1),
    )
    a, b = plain.environment()["numerics_in_force"], declared.environment()["numerics_in_force"]
    assert (a["autocast_dtype"], a["torch_compile"], a["cuda_graphs"]) == (None, False, False)
    assert (b["autocast_dtype"], b["torch_compile"], b["cuda_graphs"]) == ("bfloat16", True, False)
    assert numerics_profile(a) != numerics_profile(b)


@pytest.mark.parametrize(
    ("declared", "needle"),
    [
        ({"autocast_dtype": "fp8"}, "autocast_dtype 'fp8' is not one of"),
        ({"torch_compile": "yes"}, "torch_compile must be true or false"),
        ({"cuda_graphs": 1}, "cuda_graphs must be true or false"),
    ],
)
def test_a_bad_declaration_is_refused_when_the_model_loads(declared, needle):
    with pytest.raises(ModelError, match=needle):
        check_model(_Declaring(**declared), "plugin:make")
    assert declared_execution(None) == {"autocast_dtype": None, "torch_compile": False, "cuda_graphs": False}


def test_a_golden_whose_kind_comes_late_in_its_manifest_is_still_sealed(tmp_path):
    """The numerics recorded here made a golden manifest's "kind" (keys are sorted) move past the first
    4096 bytes, where sealed_directory (then fsio's) looked: a score could then overwrite the golden manifest."""
    from harness.base.destinations import sealed_directory

    golden = tmp_path / "golden"
    golden.mkdir()
    manifest = {"backend": {"numerics_in_force": {f"k{i:04d}": None for i in range(400)}}, "kind": "harness.golden"}
    (golden / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    assert (golden / "manifest.json").read_text().find('"harness.golden"') > 4096
    assert sealed_directory(golden / "score.json") == golden
    (golden / "manifest.json").write_text(json.dumps({**manifest, "kind": "harness.score"}, indent=2))
    assert sealed_directory(golden / "score.json") is None  # negative control: not a golden or run
