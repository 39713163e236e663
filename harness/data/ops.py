"""The OP switch and the wire names of the request contract (docs/models.md, "The request contract")."""

from __future__ import annotations

from enum import IntEnum


class Op(IntEnum):
    """What one request asks the model for; one request carries exactly one OP."""

    SEGMENTATION = 0
    VOICEPRINT = 1
    VOICEPRINT_CLEAN = 2  # overlapped frames weigh 0

    @property
    def is_voiceprint(self) -> bool:
        return self is not Op.SEGMENTATION

    @property
    def output_name(self) -> str:
        return SEGMENTATION_OUTPUT if self is Op.SEGMENTATION else EMBEDDING_OUTPUT

    @classmethod
    def parse(cls, value: object) -> Op:
        """Accept 0/1/2, "0", or a member; raise ValueError naming the value otherwise."""
        try:
            # int() itself decides what it accepts (str, float, numpy scalars, ...): its refusal is the check
            return cls(int(value))  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise ValueError(f"unknown OP {value!r}: expected 0 (segmentation), 1 or 2 (voiceprint)") from None


ALL_OPS: tuple[Op, ...] = (Op.SEGMENTATION, Op.VOICEPRINT, Op.VOICEPRINT_CLEAN)

# Wire (Triton tensor) names.
SPAN = "SPAN"
OFFSETS = "OFFSETS"
VALID = "VALID"
OP = "OP"
WEIGHTS = "WEIGHTS"
IDX = "IDX"
SEGMENTATION_OUTPUT = "SEGMENTATION"
EMBEDDING_OUTPUT = "EMBEDDINGS"

INPUT_NAMES: tuple[str, ...] = (SPAN, OFFSETS, VALID, OP, WEIGHTS, IDX)
OUTPUT_NAMES: tuple[str, ...] = (SEGMENTATION_OUTPUT, EMBEDDING_OUTPUT)
