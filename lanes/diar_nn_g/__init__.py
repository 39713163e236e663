"""The reference ``diar_nn_g`` model: segmentation (OP 0) and voiceprint (OP 1/2) networks."""

from lanes.diar_nn_g.config import CONFIGS, DiarConfig, SegmentationConfig, VoiceprintConfig
from lanes.diar_nn_g.model import DiarNNG

__all__ = ["CONFIGS", "DiarConfig", "DiarNNG", "SegmentationConfig", "VoiceprintConfig"]
