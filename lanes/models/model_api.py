"""What the harness needs from a model, and how a model is named and loaded.

A model is any object with:

- ``geometry``: a :class:`harness.data.geometry.Geometry` (or a dict of its fields, left as declared: the
  harness reads a parsed copy, :func:`geometry_of`);
- ``fingerprint``: a string that changes whenever its outputs could (weights, config, code);
- ``infer(request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]``: the request contract of docs/models.md
  for a packed or unpacked request alike.

Optional: ``torch_modules() -> dict[str, nn.Module]`` and ``row_modules()`` (for localising
the first diverging layer), ``describe() -> dict``; and how it runs, which the harness cannot see
from outside and which is part of the numerics profile (:func:`harness.numerics.declared_execution`):
``autocast_dtype`` ("float16", "bfloat16", "float32" or a torch.dtype; None, the default: not under
torch.autocast), ``torch_compile`` and ``cuda_graphs`` (bools, default False).

Optional too: ``concurrent_calls`` (a bool: may two threads be inside ``infer`` at once, each call answered as
it would be alone? :mod:`lanes.running.calls_in_flight`; undeclared, the harness asks the model itself) and
``stage(request, to_device) -> compute``, the same answer in two parts, so that a pipelined
backend overlaps them with the calls around it: the host's part now (check the request, cut the windows,
hand each input array to ``to_device``, which returns the device's tensor: on CUDA, copied from pinned
memory on a stream of its own, :mod:`lanes.running.staging`), and ``compute()``, the device's part, later, in the
device queue's thread. It is used only where the class that defines ``stage`` is the one that defines
``infer`` or below it (:func:`staged_entry`): a subclass that overrides ``infer`` alone (a negative control,
a wrapper) is called through its ``infer``.

A model is named by a *spec*: ``full`` / ``small`` (the reference model), ``package.module:factory``
(a callable returning such an object; it receives ``device=`` and ``seed=`` if it accepts them),
or ``path/to/model.pt`` (a TorchScript module, see :mod:`lanes.models.torchscript_model`). A factory's own
keyword arguments ride in the spec, ``package.module:factory?c0_ms=2&c1_ms=0.2`` (values read as TOML
literals: numbers, booleans, quoted or bare strings), so they travel wherever the spec does (the
config, a run's manifest, a Triton model's parameters, a Ray worker).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from harness.base.errors import ModelError, one_line
from harness.data.geometry import Geometry
from harness.numerics import declared_execution
from lanes.models.diar_nn_g import CONFIGS


@runtime_checkable
class Model(Protocol):
    fingerprint: str

    @property
    def geometry(self) -> Geometry | Mapping[str, int]:
        """The model's own attribute, left as the model wrote it (its ``infer`` may read a dict's keys);
        the harness reads it through :func:`geometry_of`."""
        ...

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


Compute = Callable[[], dict[str, np.ndarray]]
DECLARATION = "concurrent_calls"  # the model's own answer: may two threads be inside infer() at once?
Stage = Callable[[Mapping[str, np.ndarray], Callable[[np.ndarray], Any]], Compute]


def staged_entry(model: object) -> Stage | None:
    """The model's ``stage``, if it answers as its ``infer`` does: defined (in the class, not through a
    ``__getattr__``) by the class that defines ``infer`` or by a subclass of it."""
    if "infer" in getattr(model, "__dict__", {}):  # an instance's own infer (set on the object) is its answer
        return None
    mro = type(model).__mro__
    infer_at = next((i for i, k in enumerate(mro) if "infer" in vars(k)), None)
    stage_at = next((i for i, k in enumerate(mro) if "stage" in vars(k)), None)
    if infer_at is None or stage_at is None or stage_at > infer_at:
        return None
    stage = getattr(model, "stage", None)
    return stage if callable(stage) else None


def declared_concurrency(model: object, where: str = "model") -> bool | None:
    """The model's ``concurrent_calls`` (None: not declared); a declaration that is not a bool is refused."""
    try:
        value = getattr(model, DECLARATION)
    except AttributeError:
        return None
    except Exception as exc:  # a property that raises: refused, named
        raise ModelError(f"{where}: {DECLARATION} raised {type(exc).__name__}: {one_line(exc, 160)}") from exc
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ModelError(
            f"{where}: {DECLARATION} must be True (two calls may be inside infer() at once) or False (one at a "
            f"time), got {value!r}"
        )
    return value


def spec_kind(spec: str) -> str:
    """What a spec names: ``reference``, ``torchscript`` or ``factory``; a spec that names no model
    is refused here, so loading and the early check (:func:`check_spec`) read specs alike."""
    if spec in CONFIGS:
        return "reference"
    base = spec.partition("?")[0]  # a factory's arguments (a timeline=x.pt) never make it a TorchScript file
    if base == spec and (spec.endswith((".pt", ".pth", ".ts")) or Path(spec).is_file()):
        return "torchscript"
    module_name, colon, attr = base.partition(":")
    if colon and module_name and attr:
        return "factory"
    raise ModelError(
        f"model spec {spec!r}: expected one of {sorted(CONFIGS)}, 'package.module:factory' or a TorchScript file (.pt)"
    )


def load_model(spec: str, seed: int = 0, device: str = "cpu") -> Model:
    kind = spec_kind(spec)
    if kind == "reference":
        from lanes.models.diar_nn_g import DiarNNG  # deferred: builds the torch network (start-up)

        return DiarNNG(spec, seed=seed, device=device)
    if kind == "torchscript":
        from lanes.models.torchscript_model import TorchScriptModel  # deferred: imports torch (start-up)

        return TorchScriptModel(spec, device=device)
    return _from_factory(spec, seed=seed, device=device)


def check_spec(spec: str) -> None:
    """Refuse a spec that names no model before any slow work starts (an audit's laws): only its
    form and the file it names are checked; building the model may still fail."""
    if spec_kind(spec) == "torchscript" and not Path(spec).is_file():
        raise ModelError(f"TorchScript model {spec!r} not found")


FactoryValue = bool | int | float | str  # a factory argument of a spec: one TOML scalar, or the bare text


def factory_arguments(spec: str) -> tuple[str, dict[str, FactoryValue]]:
    """``module:factory?key=value&...`` -> (``module:factory``, {key: value}); a bare spec has none.

    A value is read as one TOML scalar (``2``, ``0.5``, ``true``, ``'a/b.bin'``, ``"x"``) or else kept as
    the bare text (``timeline=/tmp/x.bin`` is the string ``/tmp/x.bin``); a TOML array, table or date is
    refused rather than guessed at, and so is a value with a line break (it could smuggle a second key).
    ``&`` always separates arguments, even inside quotes: a value cannot hold one. ``device`` and
    ``seed`` come from the config (``--device``, ``[model] seed``), never from the spec."""
    import tomllib

    base, question, query = spec.partition("?")
    if not question:
        return spec, {}
    args: dict[str, FactoryValue] = {}
    for item in query.split("&"):
        key, equals, text = item.partition("=")
        if not equals or not key.isidentifier():
            raise ModelError(
                f"model spec {spec!r}: factory argument {item!r} is not key=value "
                "(expected module:factory?key=value&key=value)"
            )
        if key in ("device", "seed"):
            raise ModelError(
                f"model spec {spec!r}: factory argument {key!r} cannot be given in the spec "
                "(it comes from the config: "
                + ("--device or [release] device)" if key == "device" else "[model] seed)")
            )
        if key in args:
            raise ModelError(f"model spec {spec!r}: factory argument {key!r} given twice")
        if any(c in text for c in "\n\r"):
            raise ModelError(f"model spec {spec!r}: factory argument {key!r} holds a line break")
        try:
            value = tomllib.loads(f"v = {text}")["v"]  # the one key of the TOML document read here
        except tomllib.TOMLDecodeError:
            value = text  # a bare word: a string
        if not isinstance(value, (bool, int, float, str)):
            raise ModelError(
                f"model spec {spec!r}: factory argument {key}={text} is a TOML "
                f"{type(value).__name__}; expected a number, true/false, a quoted string or a bare word"
            )
        args[key] = value
    return base, args


def _from_factory(spec: str, seed: int, device: str) -> Model:
    target, arguments = factory_arguments(spec)
    module_name, _, attr = target.partition(":")
    if os.getcwd() not in sys.path:  # like `python -m`: a factory in the working directory is importable
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(f"model spec {spec!r}: cannot import {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelError(f"model spec {spec!r}: {module_name} has no callable {attr!r}")
    kwargs: dict[str, FactoryValue] = {}  # the factory's keyword arguments: device, seed and the spec's
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    given: tuple[tuple[str, FactoryValue], ...] = (("device", device), ("seed", seed))
    for key, value in given:
        if key in params or accepts_any:
            kwargs[key] = value
    for key, value in arguments.items():
        if key not in params and not accepts_any:
            raise ModelError(
                f"model spec {spec!r}: {module_name}.{attr} takes no argument {key!r} "
                f"(it takes: {', '.join(p for p in params if p not in ('device', 'seed')) or 'none'})"
            )
        kwargs[key] = value
    try:
        model = factory(**kwargs)
    except Exception as exc:  # a user's factory may raise anything; name it
        raise ModelError(f"model spec {spec!r}: factory raised {type(exc).__name__}: {exc}") from exc
    return check_model(model, spec)


def check_model(model: object, where: str) -> Model:
    for attr in ("geometry", "fingerprint", "infer"):
        if not hasattr(model, attr):
            raise ModelError(f"model {where!r} lacks {attr!r} (see lanes/models/model_api.py for the contract)")
    # true: each member was found just above (hasattr, as for any duck-typed model; isinstance(model, Model)
    # would not do: from Python 3.12 it ignores members a __getattr__ provides)
    model = cast(Model, model)
    geometry: object = model.geometry
    if isinstance(geometry, Mapping):
        try:
            Geometry.from_dict(dict(geometry))
        except (TypeError, ValueError) as exc:
            raise ModelError(f"model {where!r}: bad geometry: {exc}") from None
    elif not isinstance(geometry, Geometry):
        raise ModelError(f"model {where!r}: geometry must be a Geometry or a dict, got {type(geometry).__name__}")
    if not isinstance(model.fingerprint, str) or not model.fingerprint:
        raise ModelError(f"model {where!r}: fingerprint must be a non-empty string")
    if not callable(model.infer):
        raise ModelError(f"model {where!r}: infer is not callable")
    declared_execution(model, f"model {where!r}")  # a bad declaration is refused before any work
    declared_concurrency(model, f"model {where!r}")
    return model


def describe(model: Model) -> dict:
    if hasattr(model, "describe"):
        return dict(model.describe())
    return {"name": type(model).__name__, "kind": "plugin", "fingerprint": model.fingerprint}
