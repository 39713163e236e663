"""The lanes' voiceprint-inputs setting (isolated | chained) has its own name in code,
``voiceprint_inputs``, from harness.toml to the plan; files keep their key ``mode``."""

from __future__ import annotations

import pytest

from harness.data.schemas.config_file import VOICEPRINT_INPUTS
from harness.judging.judges.judge_base import TOLERANCE_MODES
from harness.pipeline.record import exact_plan
from harness.pipeline.run import plan_for
from harness.release_config import ReleaseConfig, config_from_dict


@pytest.mark.parametrize("inputs", VOICEPRINT_INPUTS)
def test_the_setting_reaches_both_plans_under_its_own_name(inputs: str) -> None:
    cfg = config_from_dict({"lanes": {"voiceprint_inputs": inputs}})
    assert cfg.voiceprint_inputs == inputs
    assert plan_for(cfg).voiceprint_inputs == inputs and exact_plan(cfg, 2).voiceprint_inputs == inputs
    assert cfg.to_dict()["lanes"] == {"voiceprint_inputs": inputs}  # what a run's manifest records as its config


def test_no_mode_attribute_is_left_to_confuse_with_the_tolerance_mode() -> None:
    """``cfg.mode`` and ``plan.mode`` were the voiceprint inputs while ``tolerances.op0.mode`` was the
    tolerance mode: the two now have distinct names and distinct value sets."""
    cfg = ReleaseConfig(voiceprint_inputs="chained")
    assert not hasattr(cfg, "mode") and not hasattr(plan_for(cfg), "mode")
    assert not set(VOICEPRINT_INPUTS) & set(TOLERANCE_MODES)
    assert cfg.tolerances.op0.mode in TOLERANCE_MODES  # the tolerance mode keeps its file key, "mode"
