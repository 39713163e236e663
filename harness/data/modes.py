"""The two switches a verdict turns on, as enums with their own names in code.

- :class:`ToleranceMode`, per OP: how close a lane must be to the golden (``bitwise``: every bit;
  ``tolerance``: absolute limits; ``noise-floor``: the golden's own noise times a factor).
- :class:`VoiceprintInputs`, per run: whose segmentation the voiceprint network is fed (``isolated``: the
  golden's WEIGHTS/IDX, so the voiceprint network is judged alone; ``chained``: the lane's own, as in
  production). The run, score and golden files call it ``mode`` (their contract); the models read and
  write that key and name the field ``voiceprint_inputs``.

Each is a ``StrEnum``: its members are the files' words, so a member compares equal to its word, dumps to
it and prints as it. The field types parse a file's word to the member even in the strict models (a
TOML or JSON file holds words, never members).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field


class ToleranceMode(StrEnum):
    BITWISE = "bitwise"
    TOLERANCE = "tolerance"
    NOISE_FLOOR = "noise-floor"


class VoiceprintInputs(StrEnum):
    ISOLATED = "isolated"
    CHAINED = "chained"


# a file's word parses to its member in a strict model (strict mode would ask for the member itself)
ToleranceModeField = Annotated[ToleranceMode, Field(strict=False)]
VoiceprintInputsField = Annotated[VoiceprintInputs, Field(strict=False)]

# the description of a file's ``mode`` key, the field ``voiceprint_inputs`` of the models that read it
VOICEPRINT_INPUTS_KEY = (
    "the voiceprint inputs: isolated (the golden's WEIGHTS/IDX) or chained (the lane's own segmentation); "
    "voiceprint_inputs in code"
)
# what a model with such a field reads (the file's key, or the field's name: code builds models too) and writes
BY_ALIAS = ConfigDict(validate_by_alias=True, validate_by_name=True, serialize_by_alias=True)

TOLERANCE_MODES = tuple(m.value for m in ToleranceMode)  # in the order the docs list them
VOICEPRINT_INPUTS = tuple(v.value for v in VoiceprintInputs)
