"""The packing test vectors' files (``harness laws --export-vectors``): ``index.json``, one file per vector and
``sessions.json`` (what a packer answers to each message of a session).

Written by :mod:`harness.packers.vector_files` (validated against these models before they are written),
read by an engine's own tests; docs/packer-protocol.md, "Test vectors", says how they are used.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness.data.schemas.base import Count, Number, Positive, Sha256, Strict

Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,99}$")]
# 2: index.json names sessions.json (the session vectors); the packing vectors are as in 1
FORMAT: Literal[2] = 2


class VectorGeometry(Strict):
    window_samples: Positive
    frames_per_window: Positive
    windows_per_block: Positive
    weights_frames: Positive = Field(description="F, the width of a WEIGHTS row")
    sample_rate: Positive
    embedding_dim: Positive


class VectorBlock(Strict):
    block_id: str
    OP: Literal[0, 1, 2]
    SPAN: list[Number] = Field(description="float32 values, each written as its exact decimal")
    OFFSETS: list[Count]
    VALID: list[Count]
    WEIGHTS: list[list[Number]] | None = Field(
        description="OP 1/2: one row of F weights per voiceprint row; null for OP 0"
    )
    IDX: list[Count] | None = Field(description="OP 1/2: the block's window of each row; null for OP 0")
    speakers: list[Count] | None = Field(description="OP 1/2: each row's speaker; null when unknown")


class VectorRequest(Strict):
    pad_to: Positive | None = Field(description="k to pad the request to; null: no padding")
    blocks: list[VectorBlock]


class VectorSegment(Strict):
    block_id: str
    padding: bool
    span_start: Count
    span_length: Count
    window_start: Count
    windows: Count
    row_start: Count
    rows: Count


class VectorPacked(Strict):
    OP: Literal[0, 1, 2]
    k: Positive = Field(description="blocks in the request, padding included")
    SPAN: list[Number]
    OFFSETS: list[Count]
    VALID: list[Count]
    WEIGHTS: list[list[Number]] | None
    IDX: list[Count] | None
    speakers: list[Count] | None = Field(description="null for OP 0, or when a block's speakers are unknown")
    segments: list[VectorSegment] = Field(description="the layout, one entry per block, padding included")
    ragged_index: dict[str, list[int]] = Field(description="Triton's six ragged-batching index tensors, flattened")


class VectorUnpack(Strict):
    # a Literal type: the one unpacking function a vector may name, not a key read
    function: Literal["per-window-v1"] = Field(description="what computed `data` from the packed request")
    output: Literal["SEGMENTATION", "EMBEDDINGS"]
    dtype: Literal["float32"]  # a Literal type: the one value the file holds here, not a key read
    shape: list[Count]
    data: list[Number] = Field(description="the output, flattened row-major: what unpack is given")


class VectorPart(Strict):
    block_id: str
    shape: list[Count]
    data: list[Number]


class Vector(Strict):
    """One packing test vector: a request, its one correct packed request, an output and its unpacked parts."""

    vector_format: Literal[2]
    wire_version: str
    name: Name
    what: str
    geometry: VectorGeometry
    request: VectorRequest
    packed: VectorPacked
    unpack: VectorUnpack
    unpacked: list[VectorPart] = Field(description="per real block, in pack order")


class VectorEntry(Strict):
    file: str
    name: Name
    what: str
    sha256: Sha256


class SessionsEntry(Strict):
    file: Literal["sessions.json"]  # a Literal type: the one value the file holds here, not a key read
    sha256: Sha256


class VectorIndex(Strict):
    """``index.json`` of the packing test vectors: what each file covers and its sha256."""

    vector_format: Literal[2]
    wire_version: str
    harness_version: str
    derived_by: str = Field(description="the identity of the harness packer whose answers these are")
    geometry: VectorGeometry
    function: str = Field(description="the per-window function of `unpack.data`, in words")
    vectors: list[VectorEntry]
    sessions: SessionsEntry = Field(
        description="the session vectors: the verb each message of a session is answered with"
    )


class SessionStep(Strict):
    metadata: dict[str, str] = Field(
        description="the message's schema metadata as sent: verb, version, the geometry "
        "and the verb's own keys (values are strings, as on the wire)"
    )
    vector: Name | None = Field(
        description="pack: the packing vector whose request's blocks are the message's rows; "
        "unpack: the one whose packed layout and unpack output it carries; "
        "null: a message without columns"
    )
    answer: Literal["hello", "packed", "unpacked", "error"] = Field(
        description="the verb of the one correct answer (packed / unpacked: the named vector's packed / unpacked)"
    )


class SessionCase(Strict):
    name: Name
    what: str
    steps: list[SessionStep] = Field(description="the messages of one packer process, in order, from its start")


class SessionVectors(Strict):
    """``sessions.json``: sessions of messages, each with the verb of its one correct answer."""

    vector_format: Literal[2]
    wire_version: str
    rules: str = Field(description="the session rules the answers follow, in words")
    sessions: list[SessionCase]
