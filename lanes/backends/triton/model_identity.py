"""What a Triton server can tell about the model it serves: verified, or only labelled.

- **Verified**: the model has this project's ``MODEL_INFO`` output (``model_repository/``):
  fingerprint (hash of the weights), geometry, numerics and the server's machine come from the
  model the server actually loaded.
- **Unverified**: a team's own ``diar_nn_g`` without ``MODEL_INFO``. Nothing on the wire can
  hash its weights, so the fingerprint is derived from what the server does say -- its model
  config (canonical JSON), the loaded versions -- and a label the user gives (the release or
  checkpoint name). A changed config, version or label changes the fingerprint; **changed
  weights under the same config, version and label do not**: that is why the label is required
  and why every result of this mode says ``weights_verified: false``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.base.errors import BackendError
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.response import expected_shape
from harness.data.schemas.base import describe_error

INFO_OUTPUT = "MODEL_INFO"
UNVERIFIED_KIND = "triton-unverified/1"
WEIGHTS_NOTE = (
    "the weights cannot be verified remotely: the served model has no MODEL_INFO output, so the "
    "fingerprint is derived from its Triton config, version(s) and the given label only"
)
UNKNOWN_DEVICE = "unknown"


class ModelInfoAnswer(BaseModel):
    """The MODEL_INFO output of this project's ``diar_nn_g`` (``model_repository/``): what the server's model
    says of itself; the JSON objects in it are recorded as they are (provenance), the geometry checked by
    :meth:`Geometry.from_dict`."""

    model_config = ConfigDict(extra="ignore", frozen=True, coerce_numbers_to_str=True)

    fingerprint: str
    geometry: dict
    model: dict
    device: str = "cpu"
    device_kind: str = "cpu"
    numerics_requested: dict | None = None
    numerics_in_force: dict | None = None
    environment: dict | None = None


@dataclass(frozen=True)
class ServerModel:
    """What the server says about the model it loaded."""

    fingerprint: str
    geometry: Geometry
    describe: dict
    device: str
    device_kind: str
    numerics_requested: dict | None
    numerics_in_force: dict | None
    environment: dict | None = None
    weights_verified: bool = True

    @classmethod
    def parse(cls, raw: Any, where: str) -> ServerModel:
        """From the MODEL_INFO output (JSON) of this project's model repository, typed (:class:`ModelInfoAnswer`)
        where it is read (a missing or malformed key is named in the error)."""
        try:
            value = raw.reshape(-1)[0] if isinstance(raw, np.ndarray) else raw
            text = value.decode() if isinstance(value, bytes) else str(value)
            info = ModelInfoAnswer.model_validate(json.loads(text))
            geometry = Geometry.from_dict(info.geometry)
        except ValidationError as exc:
            raise BackendError(f"{where}: {INFO_OUTPUT} is not the expected JSON ({describe_error(exc)})") from None
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise BackendError(
                f"{where}: {INFO_OUTPUT} is not the expected JSON ({type(exc).__name__}: {exc})"
            ) from None
        return cls(
            info.fingerprint,
            geometry,
            info.model,
            info.device,
            info.device_kind,
            info.numerics_requested,
            info.numerics_in_force,
            info.environment,
        )

    @classmethod
    def unverified(
        cls, model_name: str, config: dict, versions: list[str], label: str, geometry: Geometry, server_version: str
    ) -> ServerModel:
        """For a model without MODEL_INFO: fingerprint from config + versions + label (see the module doc)."""
        fingerprint = unverified_fingerprint(model_name, config, versions, label)
        describe = {
            "name": label,
            "kind": "triton-remote",
            "label": label,
            "model_name": model_name,
            "versions": list(versions),
            "fingerprint": fingerprint,
            "fingerprint_from": "sha256 of the Triton model config (canonical JSON), versions and label",
            "weights_verified": False,
            "note": WEIGHTS_NOTE,
        }
        environment = {
            "device": UNKNOWN_DEVICE,
            "device_name": UNKNOWN_DEVICE,
            "cpu": None,
            "torch": None,
            "numpy": None,
            "cuda": None,
            "cudnn": None,
            "driver": None,
            "triton_server": server_version,
            "note": "not observable: the served model has no MODEL_INFO output",
        }
        return cls(
            fingerprint,
            geometry,
            describe,
            UNKNOWN_DEVICE,
            UNKNOWN_DEVICE,
            None,
            None,
            environment,
            weights_verified=False,
        )


def canonical_config(config: dict) -> str:
    """The server's model config as canonical JSON (sorted keys, no spaces): the same config, the same text."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def unverified_fingerprint(model_name: str, config: dict, versions: list[str], label: str) -> str:
    payload = json.dumps(
        {
            "kind": UNVERIFIED_KIND,
            "model_name": model_name,
            "label": label,
            "versions": sorted(str(v) for v in versions),
            "config": canonical_config(config),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()  # plain hex, like every model fingerprint


@dataclass(frozen=True)
class ServerAnswers:
    """What the server said of a model without MODEL_INFO: its Triton model config and loaded versions, the
    shape of its one-window OP 0 answer (each None: not asked, without a label and a geometry) and the server's
    version."""

    config: dict | None
    versions: list[str] | None
    answer_shape: tuple | None
    server_version: str


def unverified_model(
    where: str, url: str, model_name: str, label: str | None, geometry, answers: ServerAnswers
) -> ServerModel:
    """A served model without MODEL_INFO, accepted only with a label and a geometry that its own
    one-window answer agrees with (its weights cannot be verified remotely)."""
    config, versions, answer_shape = answers.config, answers.versions, answers.answer_shape

    lacks = f"{where}: the model at {url} has no {INFO_OUTPUT} output, so its weights cannot be verified remotely"
    if not label:
        raise BackendError(
            f"{lacks}; give a label naming the model you serve (--set backend.model_label=NAME, e.g. the release or "
            "checkpoint) to run it unverified"
        )
    if geometry is None:
        raise BackendError(f"{lacks}; its geometry must come from the configuration (the model spec)")
    want = expected_shape(Op.SEGMENTATION, 1, 0, geometry)
    if answer_shape != want:
        raise BackendError(
            f"{where} (Triton {url}, geometry probe): a one-window OP 0 request was answered with "
            f"{Op.SEGMENTATION.output_name} shape {list(answer_shape) if answer_shape else None}, "
            f"the configured geometry says {list(want)} (frames_per_window={geometry.frames_per_window},"
            f" classes={geometry.classes}): configure the model spec the server runs"
        )
    # the caller fetches both whenever a label and a geometry are given (checked just above)
    assert config is not None and versions is not None, "the model config and versions were not fetched"
    return ServerModel.unverified(model_name, config, versions, label, geometry, answers.server_version)
