"""Write a production capture without an engine: synthetic blocks, packed k at a time, served by a model.

    python examples/capture_simulated_engine.py capture.parquet --model small --blocks 12 --k 4
    harness audit capture.parquet --golden-model small             # exit 0: the harness packer, the same model
    python examples/capture_simulated_engine.py bad.parquet --model small --packer idx-not-rebased
    harness audit bad.parquet --golden-model small                 # exit 1: a packing law is broken

It does what the engine does (harness/pipeline/capture.py): OP 0 requests of k blocks through the packer,
the served segmentation unpacked by the request's layout, the voiceprint rows derived from it (the engine's
mask function) and served as OP 1 and OP 2 requests; every request and its served output goes into the
capture (docs/audit.md, "The capture schema"). ``--packer`` packs with another packer (one of the two
below, or any ``module:function``), used as it is (unchecked, as an engine would); ``--seed`` serves with
other weights (another model).

Two packers with rebase bugs a server does not notice (it serves them; the audit's laws catch them):
``one-short`` (OFFSETS of every block after the first rebased one sample short: its first window
starts on the previous block's last sample; send ``--full-blocks`` so that no block ends on padding windows,
whose offsets would then decrease and the server would refuse the request) and ``idx-not-rebased``
(the IDX of every block after the first left unrebased: its voiceprint rows embed the first block's windows).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from pathlib import Path

from harness.corpus.synth import synth_corpus
from harness.data.blocks import Block
from harness.data.numeric_settings import NumericSettings
from harness.packers.packing import PackedRequest, pack
from harness.pipeline.capture import serve_and_capture
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model


def one_short_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """The harness's packing, but the OFFSETS of every block after the first are rebased one sample short."""
    good = pack(items, pad_to=pad_to)
    offsets = good.offsets.copy()
    for seg in good.segments[1:]:
        offsets[seg.window_slice] -= 1
    return PackedRequest(good.op, good.span, offsets, good.valid, good.weights, good.idx, good.speakers, good.segments)


def idx_not_rebased_packer(items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
    """The harness's packing, but IDX is left as each block had it (not shifted by the windows before it)."""
    good = pack(items, pad_to=pad_to)
    if good.idx is None:
        return good
    idx = good.idx.copy()
    for seg in good.segments[1:]:
        idx[seg.row_slice] -= seg.window_start
    return PackedRequest(good.op, good.span, good.offsets, good.valid, good.weights, idx, good.speakers, good.segments)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path, help="capture file to write (Parquet)")
    parser.add_argument("--model", default="small", help="model that serves the requests (a model spec)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the serving model's weights")
    parser.add_argument("--blocks", type=int, default=12, help="synthetic blocks to send")
    parser.add_argument("--k", type=int, default=4, help="blocks per request")
    parser.add_argument(
        "--packer",
        default="harness",
        help="'harness' (default), 'one-short', 'idx-not-rebased' or a pack function 'module:function'",
    )
    parser.add_argument("--full-blocks", action="store_true", help="send only blocks without padding windows")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the serving model")
    args = parser.parse_args(argv)
    packers = {"harness": pack, "one-short": one_short_packer, "idx-not-rebased": idx_not_rebased_packer}
    if args.packer in packers:
        pack_fn = packers[args.packer]
    else:
        module, _, attr = args.packer.partition(":")
        pack_fn = getattr(importlib.import_module(module), attr)
    model = load_model(args.model, seed=args.seed)
    backend = InProcessBackend(model, NumericSettings(threads=args.threads))
    blocks = synth_corpus(model.geometry, args.blocks * (3 if args.full_blocks else 1)).blocks
    if args.full_blocks:
        blocks = [b for b in blocks if (b.valid > 0).all()][: args.blocks]
    n = serve_and_capture(args.capture, blocks, backend, args.k, pack_fn)
    print(f"wrote {args.capture}: {n} requests of {len(blocks)} blocks, k={args.k}, served by {model.fingerprint[:16]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
