"""What a model declares about itself, checked before any work: its description and its geometry.

A golden's and a run's manifest record the model as its ``describe()`` gives it
(:func:`lanes.models.model_api.describe`),
and every later command finds the golden of a model by the ``fingerprint`` recorded there. A description without
one used to be found only when the recorded golden's manifest was sealed, after the whole exact lane: the command
then failed naming the harness's own manifest and left the golden behind. Here it is checked when the model is
built, by every command that builds one (:func:`refuse_broken_model`, from ``harness.pipeline.backends``), and
shown as a line of ``harness model check``; the same function answers both.

The model's answers (output names, shapes, dtypes) are checked on every call by every backend
(:mod:`harness.data.response`), before anything is stored; ``harness model check`` calls the model to check them
at once, with the rest of the contract (:mod:`lanes.models.model_check`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from harness.base.errors import ModelError, one_line
from harness.base.jsonio import dumps
from harness.data.geometry import Geometry
from harness.data.schemas.base import validate
from harness.data.schemas.files import ModelInfo

REQUIRED = ("name", "fingerprint")  # the keys every description must hold (docs/models.md)
DOCS = "docs/models.md, 'What a model must have'"


def description(model: object) -> ModelInfo:
    """The model's description as every manifest records it (its JSON object: ``model_dump()``), or ModelError
    saying what is wrong with it.

    A model without ``describe()`` is described by the harness (its class name and its fingerprint); one with it
    must return a JSON object holding a non-empty ``name`` and the model's own ``fingerprint``."""
    fingerprint = getattr(model, "fingerprint", None)
    if not hasattr(model, "describe"):
        # as the harness describes it, unchecked (lanes.models.model_api.describe): its fingerprint is the model's
        return ModelInfo.model_construct(name=type(model).__name__, kind="plugin", fingerprint=fingerprint)
    describe = model.describe
    if not callable(describe):
        raise ModelError(f"describe is a {type(describe).__name__}, not a method returning a dict")
    try:
        found = describe()
    except Exception as exc:  # a user's method may raise anything; name it
        raise ModelError(f"describe() raised {type(exc).__name__}: {one_line(exc, 160)}") from None
    if not isinstance(found, Mapping):
        raise ModelError(f"describe() returned a {type(found).__name__}, not a dict")
    data = dict(found)
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ModelError(
            f"describe() has no {' and no '.join(repr(k) for k in missing)} (it must hold {' and '.join(REQUIRED)}; "
            f"the fingerprint is the model's own: describe()['fingerprint'] = self.fingerprint)"
        )
    for key in REQUIRED:
        if not isinstance(data[key], str) or not data[key]:
            raise ModelError(f"describe()[{key!r}] is {one_line(repr(data[key]), 60)}: a non-empty string is required")
    info: ModelInfo = validate(ModelInfo, data, "describe()", ModelError)  # holds the two, checked just above
    if info.fingerprint != fingerprint:
        raise ModelError(
            f"describe()['fingerprint'] {one_line(info.fingerprint, 24)!r} is not the model's fingerprint "
            f"{one_line(str(fingerprint), 24)!r} (goldens are found by the one the manifest records)"
        )
    try:
        dumps(data)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"describe() holds a value a manifest cannot record ({exc})") from None
    return info


def refuse_broken_model(model: object, spec: str) -> None:
    """ModelError naming the spec and the part of the contract ``model`` breaks (before any work); None: it holds."""
    try:
        description(model)
    except ModelError as exc:
        raise ModelError(
            f"model {spec!r}: {exc} ({DOCS}; `harness model check --model {shlex.quote(spec)}` checks it all)"
        ) from None


def geometry_problems(geometry: Geometry) -> list[str]:
    """What a parsed geometry still gets wrong: frames that can never hold audio are never judged."""
    problems = []
    last = (geometry.frames_per_window - 1) * geometry.frame_step
    if last >= geometry.window_samples:
        never = geometry.frames_per_window - -(-geometry.window_samples // geometry.frame_step)
        problems.append(
            f"the last {never} of {geometry.frames_per_window} frames start past the window "
            f"((frames_per_window - 1) x frame_step = {last:,} >= window_samples = {geometry.window_samples:,}): "
            "they never hold audio, so no flip on them is ever judged; check frame_step"
        )
    return problems
