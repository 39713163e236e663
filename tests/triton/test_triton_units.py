"""Laws of the Triton lane's pure parts (no server, no tritonclient: these run in the main suite too).

- the unverified fingerprint depends on the config's content, never on its key order, and on
  every one of model name, versions and label;
- shared-memory layouts are aligned and never overlap; regions grow in powers of two;
- the sweep removes regions of dead processes only;
- ``make_backend`` refuses Triton-only options for the in-process backend, and knows the
  reference specs' geometry without building weights.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import BackendError, HarnessError
from harness.data.schemas.config_file import ModelSection
from harness.pipeline.backends import BackendChoice, make_backend, model_geometry
from harness.release_config import release_config
from lanes.backends.triton import shm
from lanes.backends.triton.model_identity import canonical_config, unverified_fingerprint
from lanes.backends.triton.server import copy_verbatim

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=8))
configs = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=5)),
    max_leaves=20,
)


def reordered(value, rng: random.Random):
    """The same JSON value with every object's keys in another insertion order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: reordered(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [reordered(v, rng) for v in value]
    return value


@given(st.dictionaries(st.text(max_size=6), configs, min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_fingerprint_ignores_key_order(config, seed):
    shuffled = reordered(config, random.Random(seed))
    assert canonical_config(shuffled) == canonical_config(config)
    same = unverified_fingerprint("m", config, ["1", "2"], "x")
    assert unverified_fingerprint("m", shuffled, ["2", "1"], "x") == same


@given(st.dictionaries(st.text(max_size=6), configs, min_size=1, max_size=6), st.text(min_size=1, max_size=8))
def test_fingerprint_changes_with_every_input(config, label):
    base = unverified_fingerprint("m", config, ["1"], label)
    assert len(base) == 64 and int(base, 16) >= 0
    assert unverified_fingerprint("m", config, ["1"], label + "!") != base
    assert unverified_fingerprint("m", config, ["1", "2"], label) != base
    assert unverified_fingerprint("n", config, ["1"], label) != base
    assert unverified_fingerprint("m", {**config, "__changed__": 1}, ["1"], label) != base


@given(
    st.lists(st.tuples(st.sampled_from([np.float32, np.int64, np.int32]), st.integers(0, 5000)), min_size=1, max_size=6)
)
def test_layout_is_aligned_and_never_overlaps(specs):
    arrays = {f"t{i}": np.zeros(n, dtype) for i, (dtype, n) in enumerate(specs)}
    offsets, used = shm.layout(arrays)
    spans = sorted((offsets[k], offsets[k] + a.nbytes) for k, a in arrays.items())
    assert all(start % 64 == 0 for start, _ in spans)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:], strict=False))
    assert used >= spans[-1][1] and used % 64 == 0


@given(st.integers(0, 2**33))
def test_regions_grow_in_powers_of_two(needed):
    size = shm.region_size(needed)
    assert size >= max(needed, 2**20) and size & (size - 1) == 0
    assert size == 2**20 or size // 2 < needed


def test_sweep_removes_regions_of_dead_processes_only(tmp_path: Path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    alive, dead, other = (f"{shm.PREFIX}{pid}_x_0_1" for pid in (os.getpid(), gone.pid, "nopid"))
    for name in (alive, dead, other, "unrelated_123_x"):
        (tmp_path / name).write_bytes(b"")
    assert shm.sweep_dead(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive, other, "unrelated_123_x"])


def test_copy_verbatim_refuses_a_missing_or_empty_repository(tmp_path: Path):
    with pytest.raises(BackendError, match="does not exist"):
        copy_verbatim(tmp_path / "nope", tmp_path / "dest")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README").write_text("no model here")
    with pytest.raises(BackendError, match="holds no model folder"):
        copy_verbatim(tmp_path / "empty", tmp_path / "dest")


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"shm": True}, "backend.shm"),
        ({"model_label": "x"}, "backend.model_label"),
        ({"concurrency": 2}, "backend.concurrency"),
    ],
)
def test_triton_options_are_refused_in_process(kwargs, option):
    with pytest.raises(HarnessError, match=f"^{option}: applies to a Triton backend"):
        make_backend(release_config(), BackendChoice("in-process", **kwargs))


def test_reference_geometry_without_weights():
    from lanes.models.diar_nn_g.config import CONFIGS

    for spec in ("small", "full"):
        config = release_config(model=ModelSection(spec=spec))
        assert model_geometry(config) == CONFIGS[spec].geometry()
