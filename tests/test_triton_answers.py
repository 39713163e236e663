"""Triton's JSON answers are parsed once into typed models: a well-formed answer reads by attribute (unknown
keys ignored, absent ones at the lane's defaults), and one that is not Triton's is refused in one line that
names the key, as a BackendError (no server needed: the answers are plain JSON)."""

from __future__ import annotations

import pytest

from harness.base.errors import BackendError
from lanes.backends.triton.triton_json import (
    ModelMetadata,
    ServerMetadata,
    StatisticsAnswer,
    TensorMetadata,
    parsed,
)


def test_a_well_formed_answer_reads_by_attribute():
    meta = parsed(
        ModelMetadata,
        {"name": "m", "versions": ["1"], "platform": "python", "outputs": [{"name": "SEG", "datatype": "FP32"}]},
        "model metadata",
    )
    assert meta.versions == ["1"] and meta.output_names == {"SEG"}
    assert parsed(ServerMetadata, {"name": "triton", "version": "2.51.0"}, "server").version == "2.51.0"
    stats = parsed(StatisticsAnswer, {"model_stats": [{"name": "m", "inference_stats": {}}]}, "stats")
    assert [s.name for s in stats.model_stats] == ["m"]
    assert parsed(TensorMetadata, {}, "output").shape == []  # absent: the lane's default


@pytest.mark.parametrize(
    ("model", "answer", "key"),
    [
        (ModelMetadata, {"versions": "1"}, "versions"),
        (ModelMetadata, {"outputs": [{"shape": ["x"]}]}, "shape"),
        (StatisticsAnswer, {"model_stats": {"name": "m"}}, "model_stats"),
        (ServerMetadata, ["not", "an", "object"], ""),
    ],
)
def test_an_answer_that_is_not_tritons_is_refused_naming_the_key(model, answer, key):
    with pytest.raises(BackendError) as caught:
        parsed(model, answer, "GET /v2")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("GET /v2: the server's answer is not Triton's (")
    assert key in message
