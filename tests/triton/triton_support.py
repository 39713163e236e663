"""Helpers shared by the Triton tests (a module, so test files can import them)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from harness.data.numeric_settings import NumericSettings
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas.config_file import ModelSection
from harness.packers.packing import pack
from harness.release_config import release_config
from lanes.backends.triton.server import ServerOptions, TritonServer

MODEL = "small"
BLOCKS = 12
# One torch thread on both sides: the lanes stay comparable (same settings), and on a small shared
# machine two OpenMP threads per process wait on each other's barriers (calls 10x slower, measured).
NUMERICS = NumericSettings(threads=1)
CONFIG = release_config(name="r-test", model=ModelSection(spec=MODEL), numerics=NUMERICS)


def blocks_of(golden) -> list:
    """The golden's corpus blocks (a small corpus: all in memory)."""
    return list(golden.corpus())


def run_shapes(golden, backend, root, shapes: tuple[int, ...], progress=None):
    """The lanes (the exact lane and ``shapes``) over the golden's corpus into a run directory, as `harness run`."""
    from harness.pipeline.run import RunOptions, plan_for
    from harness.pipeline.run import run_shapes as run

    cfg = CONFIG.with_overrides(candidates=shapes)
    return run(golden, backend, plan_for(cfg), root, cfg, RunOptions(progress=progress))


@contextlib.contextmanager
def serving(options: ServerOptions) -> Iterator[TritonServer]:
    """A server for one test (or the session); asserts on exit that its stop left nothing behind:
    no process of its group, no temporary folder, no shared-memory region."""
    server = TritonServer(options)
    server.start()
    assert server.leftovers(), "a running server should show up in leftovers()"
    try:
        yield server
    finally:
        server.stop()
        assert server.leftovers() == []


def packed_calls(golden, ks: tuple[int, ...] = (1, 2, 4), ops: tuple[Op, ...] = ALL_OPS) -> list[tuple]:
    """(op, request, windows, rows, where) for every pack of the golden's corpus at each k and OP,
    voiceprint requests from the golden's WEIGHTS/IDX (packs without rows are left out, as the
    engine sends nothing for them)."""
    blocks = blocks_of(golden)
    inputs = golden.voiceprint_inputs([b.id for b in blocks])
    calls = []
    for op in ops:
        if op.is_voiceprint:
            members = [
                b.with_voiceprint(op, r.weights, r.idx, r.speakers, golden.geometry)
                for b in blocks
                if (r := inputs[op].get(b.id)) is not None
            ]
        else:
            members = blocks
        for k in ks:
            for i in range(0, len(members), k):
                packed = pack(members[i : i + k])
                if op.is_voiceprint and packed.rows == 0:
                    continue
                calls.append(
                    (
                        packed.op,
                        packed.tensors(),
                        packed.windows,
                        packed.rows,
                        f"k={k} OP {int(op)} blocks {packed.block_ids[0]}..",
                    )
                )
    return calls
