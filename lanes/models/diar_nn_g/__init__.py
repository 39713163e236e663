"""The reference ``diar_nn_g`` model: segmentation (OP 0) and voiceprint (OP 1/2) networks.

``DiarNNG`` (and torch with it) is imported on first use: the configurations and their geometry
are needed by commands that never run the networks.
"""

from lanes.models.diar_nn_g.config import CONFIGS, DiarConfig, SegmentationConfig, VoiceprintConfig

__all__ = ["CONFIGS", "DiarConfig", "DiarNNG", "SegmentationConfig", "VoiceprintConfig"]


def __getattr__(name: str):
    if name == "DiarNNG":
        from lanes.models.diar_nn_g.model import DiarNNG  # deferred: imports pydantic, torch (start-up)

        return DiarNNG
    raise AttributeError(name)
