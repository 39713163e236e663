"""What every packing law (:mod:`harness.laws.laws`) is built from: how a law says it is broken
(:class:`LawBroken`) or cannot be judged (:class:`NotJudged`), which packer errors end the run instead
(``FATAL``), calling the packer (its checked ``pack``, its ``unpack``: a malformed answer or a refusal
breaks the law being judged), the reference per-window function whose value packing must not change,
and the first difference between two arrays, in words. The law runner and the capture audit use these
without judging any law, so they live apart from the laws themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from harness.data import ops
from harness.data.blocks import Block
from harness.data.isolation import request_window
from harness.laws.strategies import LAW_GEOMETRY, W
from harness.packers.inputs import describe_items
from harness.packers.packer_errors import PackerError, PackerFailed, PackerUnavailable
from harness.packers.packing import PackedRequest, Packer
from harness.packers.validate import check_packed

# The packer cannot be run (it exited, stalled, raised, cannot start): no law can be judged, and
# the error (which names the request it was answering) ends the run with exit 2.
FATAL = (PackerUnavailable, PackerFailed)


class LawBroken(Exception):
    """A law does not hold for these blocks: ``what`` says what differed, ``packed`` is the request.

    ``malformed``: broken because the answer was malformed (not a failure of the law's own kind).
    ``answer_error``: where the packer's answer was off the contract or a refusal (for any law, well-formed
    too), what was wrong with it, without the packer's name and the request (the same finding, however many
    laws and requests it broke, reads the same: the report groups by it).
    """

    def __init__(
        self,
        law: str,
        what: str,
        packed: PackedRequest | None = None,
        malformed: bool = False,
        answer_error: str | None = None,
    ) -> None:
        self.law, self.what, self.packed, self.malformed = law, what, packed, malformed
        self.answer_error = answer_error
        super().__init__(f"law {law} broken: {what}")


class NotJudged(Exception):
    """A custom law's way to say "this example cannot judge me"; the kit's own laws never raise it.

    The runner counts such examples, and a law with any of them is "not judged": never "held".
    """


# ------------------------------------------------------------------ calling the packer


def packed_by(packer: Packer, blocks: Sequence[Block], law: str, pad_to: int | None = None) -> PackedRequest:
    """The packer's checked request for ``blocks``; a malformed answer or a refusal breaks ``law``.

    FATAL errors propagate, and so does anything else a packer object raises (a bug of the
    packer object itself, or of the harness's adapters: the CLI's exit 3, a test's error).
    """
    what = f"packing {describe_items(blocks)}" + ("" if pad_to is None else f" padded to k={pad_to}")
    prefix = "" if law == "well-formed" else "malformed answer (law well-formed): "
    try:
        packed = packer.pack(list(blocks), pad_to=pad_to)
        return check_packed(packed, blocks, pad_to, LAW_GEOMETRY, f"{_label(packer)}: answer to {what}")
    except FATAL:
        raise
    except PackerError as exc:  # it answered, off the contract, or refused: this example breaks the law
        kept = getattr(exc, "packed", None)
        raise LawBroken(
            law,
            f"{prefix}{exc}",
            kept if isinstance(kept, PackedRequest) else None,
            malformed=bool(prefix),
            answer_error=answer_error(str(exc), blocks),
        ) from exc


def answer_error(message: str, blocks: Sequence[Block]) -> str:
    """What was wrong with an answer, from the packer's error ``message``: the text after the request it
    names (``packer 'P': answer to a pack request of 3 OP 0 block(s) ['a', 'b', 'c'] padded to k=4: <what>``);
    the whole message where it names none."""
    described = describe_items(blocks)
    at = message.find(described)
    if at < 0:
        return message
    rest = message[at + len(described) :]
    cut = rest.find(": ")
    return rest[cut + 2 :] if cut >= 0 else message


def unpacked_by(packer: Packer, packed: PackedRequest, output: np.ndarray, law: str) -> list[np.ndarray]:
    """The packer's ``unpack`` of ``output``; a wrong answer breaks ``law``, a crash (FATAL) propagates."""
    try:
        return packer.unpack(packed, {packed.op.output_name: output})
    except FATAL:
        raise
    except PackerError as exc:
        raise LawBroken(law, f"unpack failed: {exc}", packed) from exc


def _label(packer: Packer) -> str:
    return f"packer {getattr(packer, 'name', type(packer).__name__)!r}"


# ------------------------------------------------------------------ helpers


def window_fn(samples: np.ndarray) -> np.ndarray:
    """A per-window function sensitive to every sample and its position (float32, like a network)."""
    pos = np.arange(samples.shape[0], dtype=np.float64) + 1.0
    x = samples.astype(np.float64)
    return np.array([x.sum(), (x * pos).sum(), np.abs(x).max(initial=0.0)], dtype=np.float32)


def model_fn(request: Mapping[str, np.ndarray]) -> np.ndarray:
    """``window_fn`` per window (OP 0: [N, 3]) or per voiceprint row (OP 1/2: [R, 3]) of any request."""
    n = request[ops.OFFSETS].shape[0]
    per_window = (
        np.stack([window_fn(request_window(request, i, W)) for i in range(n)]) if n else np.zeros((0, 3), np.float32)
    )
    if int(request[ops.OP][0]) == 0:
        return per_window
    weights = request[ops.WEIGHTS]
    rows: np.ndarray = per_window[request[ops.IDX]] * weights.sum(axis=1, keepdims=True, dtype=np.float32)
    return rows.astype(np.float32)


def _first_difference(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"shape {list(got.shape)} instead of {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} instead of {want.dtype}"
    diff = np.argwhere(got != want)  # NaN never equals: none is drawn, and none may be invented
    if not diff.size:
        return ""
    at = tuple(int(v) for v in diff[0])
    where = ",".join(str(v) for v in at)
    return (
        f"{len(diff)} of {got.size} values differ, first at [{where}]: {_value(got[at])} instead of {_value(want[at])}"
    )


def _value(x: np.generic) -> str:
    return f"{float(x):.7g}" if np.asarray(x).dtype.kind == "f" else str(x.item())
