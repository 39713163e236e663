"""``plain`` builds the JSON round trip's value directly: the same value for every input the encoder
takes, the same refusal for every input it does not."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.jsonio import json_default, plain


class Colour(enum.IntEnum):
    RED = 1


class Name(str, enum.Enum):  # noqa: UP042 - its str() is "Name.A", not its value: plain must not use str()
    A = "a"


def round_trip(data: object) -> object:
    return json.loads(json.dumps(data, default=json_default))


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, and of the same plain type at every level."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(-(2**62), 2**62).map(np.int64),
    st.floats(width=32).map(np.float32),
    st.floats().map(np.float64),
    st.booleans().map(np.bool_),
    st.just(Colour.RED),
    st.just(Name.A),
    st.just(Path("/a/b")),
    st.lists(st.floats(width=32), max_size=4).map(lambda v: np.array(v, np.float32)),
    st.lists(st.integers(-5, 5), max_size=4).map(lambda v: np.array(v, np.int64).reshape(-1, 1)),
)
keys = st.one_of(
    st.text(max_size=3), st.integers(-3, 3), st.floats(), st.booleans(), st.none(), st.just(Colour.RED), st.just(Name.A)
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple), st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=20,
)


@given(documents)
def test_plain_is_the_json_round_trip(data: object) -> None:
    assert same(plain(data), round_trip(data))


@pytest.mark.parametrize("data", [{(1, 2): 1}, {np.int64(1): 1}, {1: object()}, [set()], b"bytes"])
def test_plain_refuses_what_json_refuses(data: object) -> None:
    with pytest.raises(TypeError):
        round_trip(data)
    with pytest.raises(TypeError):
        plain(data)


def test_plain_copies_containers() -> None:
    inner = [1, 2]
    data = {"a": inner}
    out = plain(data)
    assert out == data and out is not data and out["a"] is not inner  # type: ignore[index]
