"""The lanes' voiceprint-inputs setting (isolated | chained) has its own name in code,
``voiceprint_inputs``, from harness.toml to the plan; files keep their key ``mode``."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from harness.base.errors import LaneError
from harness.data.modes import TOLERANCE_MODES, VOICEPRINT_INPUTS, ToleranceMode, VoiceprintInputs
from harness.data.schemas.files import RunLayout
from harness.data.tolerances import Tolerances
from harness.pipeline.record import exact_plan
from harness.pipeline.run import plan_for
from harness.release_config import config_from_dict, release_config
from lanes.running.run_plan import RunPlan


@pytest.mark.parametrize("inputs", VOICEPRINT_INPUTS)
def test_the_setting_reaches_both_plans_under_its_own_name(inputs: str) -> None:
    cfg = config_from_dict({"lanes": {"voiceprint_inputs": inputs}})
    assert cfg.lanes.voiceprint_inputs == inputs
    assert plan_for(cfg).voiceprint_inputs == inputs and exact_plan(cfg, 2).voiceprint_inputs == inputs
    assert cfg.to_dict()["lanes"] == {"voiceprint_inputs": inputs}  # what a run's manifest records as its config


def test_no_mode_attribute_is_left_to_confuse_with_the_tolerance_mode() -> None:
    """``cfg.mode`` and ``plan.mode`` were the voiceprint inputs while ``tolerances.op0.mode`` was the
    tolerance mode: the two now have distinct names and distinct value sets."""
    cfg = release_config(voiceprint_inputs="chained")
    assert not hasattr(cfg, "mode") and not hasattr(plan_for(cfg), "mode")
    assert not set(VOICEPRINT_INPUTS) & set(TOLERANCE_MODES)
    assert cfg.tolerances.op0.mode in TOLERANCE_MODES  # the tolerance mode keeps its file key, "mode"


@pytest.mark.parametrize("inputs", VOICEPRINT_INPUTS)
def test_both_switches_are_enum_members_in_code_and_words_in_files(inputs: str) -> None:
    """From harness.toml to the plan, the run's layout and a score's field, the voiceprint inputs are a
    :class:`VoiceprintInputs` member named ``voiceprint_inputs``; the files keep the word under ``mode``."""
    cfg = config_from_dict({"lanes": {"voiceprint_inputs": inputs}, "tolerances": {"op1": {"mode": "noise-floor"}}})
    member = VoiceprintInputs(inputs)
    assert cfg.lanes.voiceprint_inputs is member and plan_for(cfg).voiceprint_inputs is member
    assert cfg.tolerances.op1.mode is ToleranceMode.NOISE_FLOOR and cfg.tolerances.op0.mode is ToleranceMode.TOLERANCE
    layout = RunLayout.model_validate({"shapes": [2], "ops": [0, 1, 2], "mode": inputs})  # as a run manifest holds it
    assert layout.voiceprint_inputs is member
    assert layout.model_dump(mode="json")["mode"] == inputs and "voiceprint_inputs" not in layout.model_dump()
    assert json.loads(json.dumps(cfg.to_dict()))["lanes"] == {"voiceprint_inputs": inputs}


def test_a_word_that_is_no_member_is_refused() -> None:
    """The negative control: the enums hold exactly the files' words."""
    with pytest.raises(ValidationError, match="'isolated' or 'chained'"):
        RunLayout.model_validate({"shapes": [2], "ops": [0], "mode": "both"})
    with pytest.raises(ValidationError, match="'bitwise', 'tolerance' or 'noise-floor'"):
        Tolerances.model_validate({"op0": {"mode": "close-enough"}})
    with pytest.raises(LaneError, match="unknown voiceprint inputs 'both'"):
        RunPlan(voiceprint_inputs="both")  # type: ignore[arg-type]
