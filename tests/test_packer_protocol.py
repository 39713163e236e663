"""The packer seam: the wire codec, the external-process adapter and the Python-callable adapter.

The external packers here are real processes: examples/packer_engine_example.py (numpy + pyarrow
only, standing in for the engine), the harness's own packer served over the wire, and
tests/misbehaving_packer.py for every way a packer process can go wrong.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from harness.base.errors import HarnessError, PackingError
from harness.data.blocks import NO_ROWS, Block, BlockRows
from harness.laws import LAW_GEOMETRY, block_lists
from harness.packers import (
    CallablePacker,
    ExternalPacker,
    HarnessPacker,
    PackerAnswerError,
    PackerFailed,
    PackerRefused,
    PackerTimeout,
    PackerUnavailable,
    packer_from_options,
    wire,
)
from harness.packers.packing import PackedRequest, pack, unpack

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EXAMPLE = f"{PY} {ROOT / 'examples' / 'packer_engine_example.py'}"
DEFECTIVE = f"{PY} {ROOT / 'examples' / 'packer_engine_defective.py'}"
SERVED = f"{PY} -m harness.packers.serve"
MISBEHAVING = f"{PY} {ROOT / 'tests' / 'misbehaving_packer.py'} --mode"
PROTOCOL = f"{PY} {ROOT / 'tests' / 'protocol_packer.py'} --mode"


def _same_request(a: PackedRequest, b: PackedRequest) -> None:
    assert a.op is b.op and a.segments == b.segments
    for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)


def _outputs(packed: PackedRequest, seed: int = 0) -> np.ndarray:
    n = packed.rows if packed.op.is_voiceprint else packed.windows
    return np.random.default_rng(seed).standard_normal((n, 4, 3)).astype(np.float32)


def _blocks(k: int = 3, op: int = 0, end_window_at_span_end: bool = False) -> list[Block]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(k):
        span = rng.standard_normal(40 + i).astype(np.float32)
        offsets = np.array([0, 4, 8, 12, 16, 20, 24, 28], np.int64)
        valid = np.array([32, 32, 32, 28, 24, 20, 16, 12 + i if end_window_at_span_end else 5], np.int32)
        rows = NO_ROWS
        if op:
            rows = BlockRows(
                rng.random((3, LAW_GEOMETRY.frames_per_window)).astype(np.float32),
                np.array([0, 3, 7], np.int32),
                np.array([0, 1, 2], np.int32),
            )
        out.append(Block.create(f"blk{i}", op, span, offsets, valid, LAW_GEOMETRY, rows))
    return out


# ------------------------------------------------------------------ the wire codec


@settings(max_examples=40, derandomize=True)
@given(block_lists(max_k=12))
def test_wire_codec_round_trips_blocks_requests_and_outputs(blocks):
    message = wire.read_message(wire.encode_pack(blocks, 5 + len(blocks), LAW_GEOMETRY))
    back, pad_to = wire.decode_pack(message)
    assert message.verb == wire.PACK and pad_to == 5 + len(blocks)
    for a, b in zip(blocks, back, strict=True):
        _same_request(pack([a]), pack([b]))
    packed = pack(blocks, pad_to=pad_to)
    _same_request(wire.decode_packed(wire.read_message(wire.encode_packed(packed))), packed)
    out = _outputs(packed)
    message = wire.read_message(wire.encode_unpack(packed, "X", out, LAW_GEOMETRY))
    op, segments, name, tensor = wire.decode_unpack(message)
    assert op is packed.op and segments == packed.segments and name == "X"
    np.testing.assert_array_equal(tensor, out)
    parts = unpack(packed, {packed.op.output_name: out})
    ids, got = wire.decode_unpacked(wire.read_message(wire.encode_unpacked(packed.block_ids, parts)), out.dtype)
    assert ids == packed.block_ids
    for a, b in zip(parts, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_wire_refuses_other_dtypes_versions_and_verbs():
    packed = pack(_blocks(2))
    table = wire.read_message(wire.encode_packed(packed)).table
    as_double = table.set_column(
        table.schema.get_field_index("SPAN"), "SPAN", table.column("SPAN").cast(pa.list_(pa.float64()))
    )
    with pytest.raises(wire.WireError, match=r"column 'SPAN' has type list<.*double>, expected list<float>"):
        wire.decode_packed(wire.read_message(wire.encode(wire.PACKED, as_double)))
    with pytest.raises(wire.WireError, match="column 'segments' is missing"):
        wire.decode_packed(wire.read_message(wire.encode(wire.PACKED, table.drop_columns(["segments"]))))
    with pytest.raises(wire.WireError, match="verb 'packed', expected unpacked"):
        wire.read_message(wire.encode_packed(packed), expect=(wire.UNPACKED,))
    sink = pa.BufferOutputStream()
    older = table.replace_schema_metadata({"verb": "packed", "version": "1"})
    with pa.ipc.new_stream(sink, older.schema) as writer:
        writer.write_table(older)
    with pytest.raises(wire.WireError, match="wire version '1', expected '2'"):
        wire.read_message(sink.getvalue())


# ------------------------------------------------------------------ external packers that work


@pytest.fixture(scope="module", params=[EXAMPLE, SERVED], ids=["example-script", "served-harness-packer"])
def external(request):
    with ExternalPacker(request.param, LAW_GEOMETRY, timeout_s=30) as packer:
        yield packer
    assert packer._proc is None  # closed: the process is gone


@settings(max_examples=30, derandomize=True)
@given(blocks=block_lists(max_k=16))
def test_external_packer_answers_what_the_harness_packer_answers(external, blocks):
    for pad_to in (None, len(blocks) + 2):
        mine, theirs = pack(blocks, pad_to=pad_to), external.pack(blocks, pad_to=pad_to)
        _same_request(theirs, mine)
        out = _outputs(mine)
        for a, b in zip(
            unpack(mine, {mine.op.output_name: out}), external.unpack(theirs, {mine.op.output_name: out}), strict=True
        ):
            np.testing.assert_array_equal(a, b)
    assert external.starts == 1  # one long-lived process for every message


def test_example_packer_emits_triton_batch_inputs():
    with ExternalPacker(EXAMPLE, LAW_GEOMETRY) as packer:
        packed = packer.pack(_blocks(3))
    assert packed.batch_inputs["BATCH_ACCUMULATED_ELEMENT_COUNT"].tolist() == [40, 81, 123]
    assert packed.batch_inputs["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"].tolist() == [0, 40, 81, 123]


def test_external_packer_refuses_what_no_packer_may_be_asked():
    with ExternalPacker(EXAMPLE, LAW_GEOMETRY) as packer:
        with pytest.raises(PackingError, match="cannot mix OPs"):
            packer.pack(_blocks(1, op=0) + [_blocks(2, op=1)[1]])
        with pytest.raises(PackingError, match="appears twice"):
            packer.pack(_blocks(1) * 2)
        packed = packer.pack(_blocks(2))
        with pytest.raises(PackingError, match="expected 16 windows"):
            packer.unpack(packed, {"SEGMENTATION": np.zeros((15, 2), np.float32)})
        assert packer.starts == 1  # refused before anything was sent


# ------------------------------------------------------------------ external packers that do not


def test_a_contract_breaking_answer_is_one_error_and_the_process_goes_on():
    with ExternalPacker(DEFECTIVE, LAW_GEOMETRY) as packer:
        with pytest.raises(PackerAnswerError) as err:
            packer.pack(_blocks(2, end_window_at_span_end=True))
        text = str(err.value)
        assert DEFECTIVE in text and "OFFSETS + VALID runs past the end of SPAN" in text and "\n" not in text
        assert err.value.packed is not None and err.value.packed.offsets[15] == 28 + 40 + 1
        packer.pack(_blocks(1))  # the stream is still in step: the same process answers
        assert packer.starts == 1


@pytest.mark.parametrize(
    "mode,error,words",
    [
        ("wrong-dtype", PackerAnswerError, "column 'OFFSETS' has type list<int32>, expected list<int64>"),
        ("refuse", PackerRefused, "refused a pack request of 2 OP 0 block(s) ['blk0', 'blk1']: this packer only packs"),
        ("wrong-verb", PackerFailed, "message off the protocol: message verb 'unpacked', expected packed or error"),
    ],
)
def test_answers_off_the_contract_are_named(mode, error, words):
    with ExternalPacker(f"{MISBEHAVING} {mode}", LAW_GEOMETRY, timeout_s=20) as packer:
        with pytest.raises(error) as err:
            packer.pack(_blocks(2))
    assert words in str(err.value) and "misbehaving_packer.py" in str(err.value)


@pytest.mark.parametrize(
    "mode,words",
    [
        ("bad-unpack", "answered blocks ['blk1', 'blk0'], expected ['blk0', 'blk1'] in that order"),
        ("short-unpack", "unpacked output of block 'blk0' is float32[7, 4, 3], expected float32[8, 4, 3]"),
    ],
)
def test_unpack_answers_are_checked(mode, words):
    with ExternalPacker(f"{MISBEHAVING} {mode}", LAW_GEOMETRY, timeout_s=20) as packer:
        packed = packer.pack(_blocks(2))
        with pytest.raises(PackerAnswerError, match=r".") as err:
            packer.unpack(packed, {"SEGMENTATION": _outputs(packed)})
    assert words in str(err.value)


def test_a_packer_that_dies_is_named_with_its_stderr_and_stays_failed():
    with ExternalPacker(f"{MISBEHAVING} die-on-3", LAW_GEOMETRY, timeout_s=20) as packer:
        packer.pack(_blocks(2))
        with pytest.raises(PackerFailed) as err:
            packer.pack(_blocks(3))
        text = str(err.value)
        assert "exited with status 3 before answering a pack request of 3 OP 0 block(s)" in text
        assert "its stderr ends: \"panicked at 'index out of bounds" in text
        with pytest.raises(PackerUnavailable, match="unusable after an earlier failure: .*exited with status 3"):
            packer.pack(_blocks(1))


def test_with_restart_a_dead_packer_is_started_again():
    with ExternalPacker(f"{MISBEHAVING} die-on-3", LAW_GEOMETRY, timeout_s=20, restart=True) as packer:
        with pytest.raises(PackerFailed):
            packer.pack(_blocks(3))
        packer.pack(_blocks(2))
        assert packer.starts == 2


def test_a_packer_that_hangs_is_killed_at_the_timeout():
    """The 1 s is the request's budget; the packer's start-up (Python, pyarrow) is the handshake's, not in it."""
    with ExternalPacker(f"{PROTOCOL} hang-after", LAW_GEOMETRY, timeout_s=1) as packer:
        start = time.monotonic()
        proc = packer._proc
        with pytest.raises(
            PackerTimeout,
            match=r"did not answer a pack request of 2 OP 0 block\(s\) .* within 1 s; "
            r"killed",
        ):
            packer.pack(_blocks(2))
    assert time.monotonic() - start < 20 and proc.poll() is not None  # the 1 s, not the 20 s start-up allowance


def test_a_packer_that_does_not_read_is_killed_at_the_timeout():
    """A request larger than the pipe buffer, to a packer that never reads: the write is bounded too."""
    big = [
        Block.create(
            f"b{i}", 0, np.zeros(200_000, np.float32), np.zeros(8, np.int64), np.zeros(8, np.int32), LAW_GEOMETRY
        )
        for i in range(3)
    ]
    with ExternalPacker(f"{PROTOCOL} hang-after", LAW_GEOMETRY, timeout_s=1) as packer:
        with pytest.raises(PackerTimeout, match="did not read a pack request"):
            packer.pack(big)


def test_garbage_on_stdout_is_named_at_once():
    cmd = f"{PY} -c 'import sys, time; sys.stdin.buffer.read(8); print(\"starting up\", flush=True); time.sleep(60)'"
    start = time.monotonic()
    with pytest.raises(
        PackerUnavailable,
        match=r"answered the hello handshake with bytes that are not an Arrow IPC "
        r"stream \(b'starting up",
    ):
        ExternalPacker(cmd, LAW_GEOMETRY, timeout_s=30)
    assert time.monotonic() - start < 10  # not the 30 s timeout


def test_a_packer_that_ignores_the_end_of_stdin_is_killed_on_close():
    packer = ExternalPacker(f"{MISBEHAVING} ignore-eof", LAW_GEOMETRY, timeout_s=30)
    packer.pack(_blocks(1))
    proc = packer._proc
    packer.close()
    assert proc.poll() is not None
    with pytest.raises(PackerUnavailable, match="already closed"):
        packer.pack(_blocks(1))


@pytest.mark.parametrize(
    "cmd,words",
    [
        ("/nonexistent/engine-packer --serve", "cannot start '/nonexistent/engine-packer': No such file or directory"),
        ("", "packer command is empty"),
        ("python 'unterminated", "cannot be parsed"),
    ],
)
def test_a_packer_that_cannot_start_is_named(cmd, words):
    with pytest.raises(PackerUnavailable, match=words):
        ExternalPacker(cmd, LAW_GEOMETRY)


# ------------------------------------------------------------------ Python callables


def raising_packer(items, pad_to=None):
    raise IndexError("list index out of range")


def wrong_type_packer(items, pad_to=None):
    good = pack(items, pad_to=pad_to)
    return PackedRequest(good.op, good.span, good.offsets.astype(np.int32), good.valid, None, None, None, good.segments)


def test_callable_packer_forms():
    blocks = _blocks(2, op=1)
    as_function = CallablePacker("harness.packers.packing:pack", LAW_GEOMETRY)
    as_class = CallablePacker("harness.packers.packing:HarnessPacker", LAW_GEOMETRY)
    for packer in (as_function, as_class):
        packed = packer.pack(blocks, pad_to=3)
        _same_request(packed, pack(blocks, pad_to=3))
        out = _outputs(packed)
        for a, b in zip(packer.unpack(packed, {"EMBEDDINGS": out}), unpack(packed, {"EMBEDDINGS": out}), strict=True):
            np.testing.assert_array_equal(a, b)
    assert as_function.describe()["unpack"].startswith("harness.packers.packing.unpack")
    assert as_class.describe()["unpack"] == "own" and as_class.accepts_packs


def test_callable_packer_failures_are_one_line():
    with pytest.raises(
        PackerFailed,
        match=r"packer 'tests.test_packer_protocol:raising_packer': raised IndexError "
        r"while packing 2 OP 0 block\(s\) \['blk0', 'blk1'\]: list index out",
    ):
        CallablePacker("tests.test_packer_protocol:raising_packer", LAW_GEOMETRY).pack(_blocks(2))
    with pytest.raises(PackerAnswerError, match="OFFSETS has dtype int32, the contract says int64"):
        CallablePacker("tests.test_packer_protocol:wrong_type_packer", LAW_GEOMETRY).pack(_blocks(2))


@pytest.mark.parametrize(
    "spec,words",
    [
        ("harness.packers.packing", "expected 'package.module:function'"),
        ("no_such_module_xyz:pack", "cannot import 'no_such_module_xyz'"),
        ("harness.packers.packing:no_such", "has no attribute 'no_such'"),
        ("harness.packers.packing:PADDING_PREFIX", "neither a function nor an object with pack() and unpack()"),
    ],
)
def test_callable_packer_specs_are_checked(spec, words):
    with pytest.raises(PackerUnavailable) as err:
        CallablePacker(spec, LAW_GEOMETRY)
    assert words in str(err.value)


def test_packer_from_options():
    assert isinstance(packer_from_options(None, None, LAW_GEOMETRY), HarnessPacker)
    assert isinstance(packer_from_options(None, "harness", LAW_GEOMETRY), HarnessPacker)
    assert isinstance(packer_from_options(None, "harness.packers.packing:pack", LAW_GEOMETRY), CallablePacker)
    with packer_from_options(EXAMPLE, None, LAW_GEOMETRY) as packer:
        assert isinstance(packer, ExternalPacker) and packer.describe()["command"] == EXAMPLE
    with pytest.raises(HarnessError, match="give one packer, not both"):
        packer_from_options(EXAMPLE, "harness.packers.packing:pack", LAW_GEOMETRY)


def test_a_crash_names_the_request_it_was_handling_the_one_before_and_its_last_stderr_line():
    """A packer that dies on its second request: the one line says which request, the one it answered before
    (a packer may go wrong on a request and only die on the next), and the last line of its stderr."""
    with ExternalPacker(f"{PROTOCOL} crash-after", LAW_GEOMETRY, timeout_s=30) as packer:
        packer.pack(_blocks(2))
        with pytest.raises(PackerFailed) as err:
            packer.pack(_blocks(3))
    text = str(err.value)
    assert "\n" not in text and "protocol_packer.py --mode crash-after" in text
    assert "exited with status 7 before answering a pack request of 3 OP 0 block(s) ['blk0', 'blk1', 'blk2']" in text
    assert "(the last request it answered: a pack request of 2 OP 0 block(s) ['blk0', 'blk1'])" in text
    assert text.endswith("its stderr ends: 'note: run with `RUST_BACKTRACE=1` for a backtrace'")


def test_the_example_packers_leak_bug_is_a_window_reading_the_next_block():
    from harness.laws import LAWS_BY_NAME, LawBroken

    offsets = np.array([0, 1, 2, 3, 4, 5, 6, 56], np.int64)
    valid = np.array([64, 64, 64, 64, 64, 64, 64, 14], np.int32)
    blocks = [
        Block.create(f"b{i}", 0, np.full(70, i + 1.0, np.float32), offsets, valid, LAW_GEOMETRY) for i in range(2)
    ]
    with ExternalPacker(f"{EXAMPLE} --bug leak", LAW_GEOMETRY) as packer:
        with pytest.raises(LawBroken, match=r"window 7 of block 'b0' .* first at \[14\]: 2 instead of 0"):
            LAWS_BY_NAME["own-samples"](packer, blocks)
    with ExternalPacker(EXAMPLE, LAW_GEOMETRY) as packer:
        LAWS_BY_NAME["own-samples"](packer, blocks)
