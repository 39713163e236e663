"""A wire-protocol packer that misbehaves on purpose (one way per --mode), for the adapter's tests.

Built on examples/packer_engine_example.py (numpy + pyarrow, no harness import), like a real
external packer would be. Modes:

  wrong-dtype   answers pack with OFFSETS as list<int32> (the contract says int64)
  wrong-verb    answers pack with an 'unpacked' message
  refuse        answers every request with an 'error' message
  bad-unpack    packs correctly; answers unpack with the blocks in reverse order
  short-unpack  packs correctly; answers unpack with one row missing from the first block
  die-on-3      packs correctly, exits with status 3 (and a line on stderr) on a request of 3 blocks
  die-every-3rd answers correctly, but exits with status 3 (and a line on stderr) on its 3rd message
  die-3rd-pack  the same on its 3rd pack request (past the laws' smoke test: during a law)
  ignore-eof    answers correctly, but never exits when stdin ends

Every mode names itself misbehaving/0.1 (the mode is on the command line, which the identity covers).
With $START_LOG set, the pid is appended to that file at start (how often the packer was started).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402
from packer_engine_example import lists, pack, unpack, write  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    mode = parser.parse_args().mode
    if os.environ.get("START_LOG"):
        with open(os.environ["START_LOG"], "a") as out:
            out.write(f"{os.getpid()}\n")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    messages = 0
    while stdin.peek(1):
        table = ipc.open_stream(stdin).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        messages += mode != "die-3rd-pack" or meta.get("verb") == "pack"
        if mode in ("die-every-3rd", "die-3rd-pack") and messages == 3:
            print(f"fatal: message {messages}: segmentation fault (core dumped)", file=sys.stderr)
            sys.stderr.flush()
            return 3
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if meta.get("verb") == "hello":  # wire protocol 2's handshake: every mode answers it properly
            write(stdout, "hello", packer_name="misbehaving", packer_version="0.1")
            continue
        if mode == "refuse":
            write(stdout, "error", message="this packer only packs on Tuesdays")
            continue
        if meta["verb"] == "pack":
            if mode == "die-on-3" and table.num_rows == 3:
                print("panicked at 'index out of bounds: the len is 2 but the index is 2'", file=sys.stderr)
                sys.stderr.flush()
                return 3
            pad_to = int(meta["pad_to"]) if meta.get("pad_to") else None
            packed = pack(table, pad_to, None)
            if mode == "wrong-dtype":
                offsets = packed.column("OFFSETS")[0].values.to_numpy().astype(np.int32)
                packed = packed.set_column(
                    packed.schema.get_field_index("OFFSETS"), "OFFSETS", lists([offsets], np.int32, pa.int32())
                )
            write(stdout, "unpacked" if mode == "wrong-verb" else "packed", packed)
        else:
            answer = unpack(table)
            if mode == "bad-unpack":
                answer = answer.take(list(reversed(range(answer.num_rows))))
            if mode == "short-unpack":
                data = [np.asarray(answer.column("data")[i].values) for i in range(answer.num_rows)]
                shapes = [list(answer.column("shape")[i].as_py()) for i in range(answer.num_rows)]
                width = int(np.prod(shapes[0][1:]))
                data[0], shapes[0][0] = data[0][width:], shapes[0][0] - 1
                answer = pa.table(
                    {
                        "block_id": answer.column("block_id"),
                        "data": lists(data, data[0].dtype, pa.from_numpy_dtype(data[0].dtype)),
                        "shape": lists([np.array(s, np.int64) for s in shapes], np.int64, pa.int64()),
                    }
                )
            write(stdout, "unpacked", answer)
    if mode == "ignore-eof":
        time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
