"""The schema building blocks: scalar types every file uses, strict and open models, and the one
validation entry point that turns a pydantic error into one line naming file, key and value."""

from __future__ import annotations

import datetime as dt
import difflib
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from harness.base.errors import HarnessError, SchemaError
from harness.base.keyhints import Problem
from harness.data.shape import Shape


def _timestamp(value: str) -> str:
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("not an ISO 8601 time") from None
    return value


def _relative(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in value:
        raise ValueError("not a plain relative path inside the directory")
    return value


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
SafeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")]
GoldenId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}@[0-9a-f]{12}$")]
Timestamp = Annotated[str, AfterValidator(_timestamp)]
RelPath = Annotated[str, AfterValidator(_relative)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Number = Annotated[float, Field(allow_inf_nan=False)]
# a team's kind of evidence by import path (harness.evidence.kind_registry.load_kind): 'package.module:Attr'
KindSpec = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$", max_length=300)]
KIND_SPECS = (
    "the evidence kinds, by spec ('package.module:Attr'), beside the harness's own that made it ([evidence] kinds; "
    "absent: none)"
)
OpKey = Literal["0", "1", "2"]
# a shape's key ("4"): its form by the pattern, its range by Shape (harness.data.shape, the one place it lives)
ShapeKey = Annotated[str, Field(pattern=r"^[1-9][0-9]{0,5}$"), AfterValidator(lambda v: Shape(v, "shape key").key)]
Verdict = Literal["pass", "fail"]
State = Literal["candidate", "promoted", "revoked"]


class Strict(BaseModel):
    """Every key known, every type exact."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Open(BaseModel):
    """Known keys typed; other keys kept (records written by other software, e.g. a server)."""

    model_config = ConfigDict(extra="allow", strict=True)


class OptionalKeys:
    """Keys a file holds only when they were given (``optional_keys``): left out of ``model_dump()``
    while not set, so a model dumps to exactly the JSON it was built or read from (a noise floor's
    OP 0 has no ``min_cosine``; a shape without its packing effect has no ``vs_exact``) and a digest
    taken over that JSON still matches."""

    optional_keys: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # the return is left unannotated so that the serialization JSON Schema stays the model's own
        data = handler(self)
        assert isinstance(self, BaseModel)
        for key in self.optional_keys:
            if key not in self.model_fields_set and isinstance(data, dict):
                data.pop(key, None)
        return data


class Frozen(Strict):
    """A strict model that cannot change after it is built (a document judged or recorded)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def validate(model: type[BaseModel], data: object, where: str, error: type[HarnessError] = SchemaError) -> Any:
    """The validated model, or one line: '<where>: <key.path>: <what> (got <value>)'."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{where}: {describe_error(exc)}") from None


def describe_error(exc: ValidationError) -> str:
    """The most specific problem, as '<key.path>: <what> (got <value>)'."""
    errors = Problem.all_of(exc)
    deepest = max(len(e.loc) for e in errors)  # in a union, the branch that got furthest
    # an unknown key before a missing one: a misspelt key is both, and its spelling is what to fix
    first = min((e for e in errors if len(e.loc) == deepest), key=lambda e: e.type != "extra_forbidden")
    loc = ".".join(str(p) for p in first.loc if not _type_tag(p))
    msg = first.msg
    if first.type in ("model_type", "model_attributes_type", "dict_type"):
        msg = "must be a JSON object"
    elif first.type == "extra_forbidden":
        msg = "unknown key"
        missing = [str(e.loc[-1]) for e in errors if e.type == "missing" and e.loc[:-1] == first.loc[:-1]]
        close = difflib.get_close_matches(str(first.loc[-1]), missing, n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
    elif first.type == "missing":
        msg = "missing (required)"
    elif first.type.startswith("literal_error") and first.loc and first.loc[-1] in ("format", "version"):
        msg = f"unknown format version ({msg})"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    shown = repr(first.input)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    more = len(errors) - 1
    whole = isinstance(first.input, dict) and first.type.startswith("value_error")  # a check of a whole
    got = "" if first.type == "missing" or whole else f" (got {shown})"  # object: its message says what
    head = f"{loc}: " if loc else ""
    return f"{head}{msg}{got}" + (f" [+{more} more problem(s)]" if more else "")


def _type_tag(part: object) -> bool:
    """Pydantic's union branch names in an error location ('list[int]', 'PerOpShapes'): not keys."""
    return isinstance(part, str) and ("[" in part or part in _model_names())


def _model_names() -> set[str]:
    names, stack = set(), [BaseModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__name__ not in names:
                names.add(sub.__name__)
                stack.append(sub)
    return names


# "harness/<ver>+<12hex>", "external:<name>/<version>@sha256:<16hex>", "callable:<spec>@sha256:<16hex>":
# printable, no "|" (the ledger's key separator), no spaces
PackerIdentity = Annotated[str, Field(pattern=r"^[!-{}~]{1,300}$")]
ReleaseOps = dict[OpKey, list[Positive]]  # the release's own shapes per OP
