"""One shape type (harness.data.shape): its three spellings round-trip, its range lives in one place,
and every bad value is refused in one line naming where it came from."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from harness.base.errors import HarnessError
from harness.data.shape import EXACT, MAX_K, MIN_K, Shape, ShapeError, ShapeInt, lane_name, parse_shapes

valid_k = st.integers(MIN_K, MAX_K)
out_of_range = st.one_of(st.integers(max_value=MIN_K - 1), st.integers(min_value=MAX_K + 1))


def _one_line(exc: pytest.ExceptionInfo[ShapeError], where: str) -> str:
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{where} "), message
    assert isinstance(exc.value, HarnessError)  # exit 2 through the command line
    return message


@given(valid_k)
def test_every_spelling_round_trips(k: int) -> None:
    shape = Shape(k)
    assert shape.lane_name == f"k{k}" and shape.key == str(k) and shape.k == k
    assert Shape.parse(shape.lane_name) == Shape.parse(shape.key) == Shape.parse(k) == k
    assert Shape.parse(Shape.parse(shape.lane_name).lane_name).key == shape.key
    assert lane_name(k) == lane_name(shape.key) == lane_name(shape.lane_name) == shape.lane_name


@given(valid_k)
def test_a_shape_is_still_the_number_everywhere_it_is_written(k: int) -> None:
    shape = Shape(k)
    assert json.dumps({"shapes": [shape], shape.key: shape}) == json.dumps({"shapes": [k], str(k): k})
    assert f"{shape}" == str(shape) == str(k) and hash(shape) == hash(k)
    restored = pickle.loads(pickle.dumps(shape))
    assert type(restored) is Shape and restored == k
    assert Shape(np.int64(k)) == k


@given(out_of_range)
def test_out_of_range_is_refused_in_one_line(k: int) -> None:
    for value in (k, str(k), f"k{k}"):
        if isinstance(value, str) and value.lstrip("k").startswith("-"):
            continue  # "-3" is malformed, not out of range: the next test
        with pytest.raises(ShapeError) as exc:
            Shape.parse(value, where="--shapes")
        message = _one_line(exc, "--shapes")
        assert f"largest shape, {MAX_K}" in message or f"smallest shape, {MIN_K}" in message, message


@given(st.text(max_size=12).filter(lambda t: not t.removeprefix("k").isdecimal() or not t.removeprefix("k").isascii()))
def test_malformed_text_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ShapeError) as exc:
        Shape.parse(text, where="score.json shapes")
    assert f"{text!r}" in _one_line(exc, "score.json shapes")


@pytest.mark.parametrize(
    "value", ["04", "k04", "+4", " 4", "K4", "4.0", "exact", "k", "", "kk4", 4.0, True, None, "9" * 5000]
)
def test_each_spelling_has_one_form(value: object) -> None:
    """ "04" and "4" as two keys of one score would be one shape twice: only the canonical forms parse."""
    with pytest.raises(ShapeError) as exc:
        Shape.parse(value)
    _one_line(exc, "shape")


def test_the_exact_lane_is_named_not_a_shape() -> None:
    assert lane_name(EXACT) == "exact" and lane_name(EXACT, 1) == "exact#2"
    with pytest.raises(ShapeError):
        Shape.parse(EXACT)


def _lane_spellings(path: Path) -> list[str]:
    """Where ``path`` defines a lane-name function or spells a lane name itself (``f"k{k}"``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name in ("lane_name", "lane_dir"):
            found.append(f"{path.name}:{node.lineno} def {node.name}")
        if (
            isinstance(node, ast.JoinedStr)
            and len(node.values) == 2
            and isinstance(node.values[0], ast.Constant)
            and node.values[0].value == "k"
            and isinstance(node.values[1], ast.FormattedValue)
        ):
            found.append(f'{path.name}:{node.lineno} f"k{{...}}"')
    return found


def test_there_is_one_lane_name_function() -> None:
    """golden/runs.py's lane_dir and lanes/running/runner.py's lane_name were two copies of one rule; the
    runner, the run folders, scoring and the run manifest's schema now all call harness.data.shape's."""
    import lanes.running.runner

    root = Path(__file__).resolve().parents[1]
    ours = root / "harness" / "data" / "shape.py"
    others = [
        hit
        for package in ("harness", "lanes", "golden", "reports")
        for path in sorted((root / package).rglob("*.py"))
        if path != ours and "packers" not in path.parts  # packers/vectors.py: block ids "k0", not lanes
        for hit in _lane_spellings(path)
    ]
    assert others == [], f"lane names spelt outside harness.data.shape: {others}; use harness.data.shape.lane_name"
    assert any(hit.endswith(" def lane_name") for hit in _lane_spellings(ours))
    assert lanes.running.runner.lane_name is lane_name


def test_the_lane_spelling_check_finds_a_copy(tmp_path: Path) -> None:
    """Negative control: the check above finds the copy that used to be in golden/runs.py."""
    copy = tmp_path / "runs.py"
    copy.write_text('def lane_dir(shape):\n    return "exact" if shape == "exact" else f"k{int(shape)}"\n')
    assert _lane_spellings(copy) == ["runs.py:1 def lane_dir", 'runs.py:2 f"k{...}"']


def test_the_toml_range_is_the_shape_range() -> None:
    """harness.toml's shapes take the same range as Shape (one place: MIN_K, MAX_K)."""

    class Section(BaseModel):
        k: ShapeInt

    assert Section(k=MAX_K).k == MAX_K and Section(k=MIN_K).k == MIN_K
    for bad in (MIN_K - 1, MAX_K + 1):
        with pytest.raises(ValidationError):
            Section(k=bad)
    from harness.data.schemas.config_file import ShapesSection

    with pytest.raises(ValidationError):
        ShapesSection(candidates=[MAX_K + 1])
    assert ShapesSection(candidates=[MAX_K]).candidates == [MAX_K]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2,x", "expected comma-separated blocks per call"),
        ("0", "0 blocks per call is under the smallest shape, 1"),
        (f"2,{MAX_K + 1}", f"{MAX_K + 1} blocks per call is over the largest shape, {MAX_K}"),
        ("2,2", "2 listed twice"),
        ("2,,4", "an empty entry is not a shape"),
    ],
)
def test_shape_lists_are_refused_in_one_line_naming_the_flag(text: str, why: str) -> None:
    with pytest.raises(ShapeError) as exc:
        parse_shapes(text)
    message = _one_line(exc, "--shapes")
    assert message.startswith(f"--shapes {text!r}: ") and why in message, message


def test_shape_lists_keep_the_flags_spellings_and_order() -> None:
    assert parse_shapes("8, 2,04") == (8, 2, 4)
    assert all(type(k) is Shape for k in parse_shapes("2,4"))


def test_the_plan_refuses_shapes_out_of_range() -> None:
    from harness.base.errors import LaneError
    from lanes.running.run_plan import RunPlan

    for bad in (0, MAX_K + 1):
        with pytest.raises(LaneError, match=f"{bad} blocks per call is"):
            RunPlan(shapes=(2, bad))
    assert RunPlan(shapes=(2, MAX_K)).shapes == (2, MAX_K)


def test_score_and_ledger_keys_take_the_shape_range() -> None:
    """score.json's and the ledger's shape keys: the pattern alone let "200000" through, a k no command can run."""
    import re

    from harness.data.schemas.base import ShapeKey

    class Keys(BaseModel):
        shapes: dict[ShapeKey, int]

    assert Keys(shapes={str(MAX_K): 1, "4": 2}).shapes == {str(MAX_K): 1, "4": 2}
    too_big = str(MAX_K * 2)
    assert re.fullmatch(r"[1-9][0-9]{0,5}", too_big)  # what the pattern alone accepts: the defect
    for bad in (too_big, "04", "k4", "0"):
        with pytest.raises(ValidationError):
            Keys(shapes={bad: 1})


def test_a_shape_is_one_type_from_parsing_to_the_ledger() -> None:
    """--shapes, the configuration, the plan, the run manifest's layout, a score's shape, a ledger entry: every
    one holds a Shape, and every file still holds the number."""
    from harness.data.schemas.files import RunLayout, RunManifest, VariantEntry
    from harness.data.schemas.history import HistoryRow
    from harness.data.schemas.records import LedgerEntry
    from harness.data.schemas.results import ShapeScore
    from harness.pipeline.run import plan_for
    from harness.release_config import Override, load_config

    given = parse_shapes("2,4")
    cfg = load_config(None, [Override("--shapes", "shapes.candidates", list(given), "'2,4'")])
    plan = plan_for(cfg)
    layout = RunLayout.model_validate({"shapes": [2, 4], "ops": [0, 1, 2], "mode": "isolated"})
    held = [*given, *cfg.shapes.candidates, *cfg.release_shapes[0], *plan.shapes, *layout.shapes]
    assert held and all(type(k) is Shape for k in held)
    assert json.dumps(layout.model_dump()["shapes"]) == "[2, 4]" and cfg.to_dict()["shapes"]["candidates"] == [2, 4]
    for model, name in ((RunManifest, "shapes"), (VariantEntry, "k"), (ShapeScore, "shape"), (HistoryRow, "shape")):
        annotation = model.model_fields[name].annotation
        assert annotation in (Shape, list[Shape]), f"{model.__name__}.{name} is {annotation}"
    assert LedgerEntry.model_fields["shape"].annotation is Shape
    assert LedgerEntry.model_json_schema()["properties"]["shape"]["minimum"] == 2  # k = 1 is never promoted
    for bad in (0, MAX_K + 1, True, 2.0, "4"):  # the negative control: what is no shape in a file is refused
        with pytest.raises(ValidationError):
            RunLayout.model_validate({"shapes": [bad], "ops": [0], "mode": "isolated"})


def test_a_shape_reads_as_its_number_in_every_line() -> None:
    """A progress line or a message listing the plan's shapes must read [2, 4], as before shapes were one type."""
    shapes = parse_shapes("2,4")
    assert f"{list(shapes)}" == "[2, 4]" == str(list(shapes)) and repr(shapes[0]) == "2" and f"k={shapes[1]}" == "k=4"
