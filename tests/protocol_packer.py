"""Wire-protocol packers for the process-hygiene and handshake tests (one behaviour per --mode).

Built on examples/packer_engine_example.py (numpy + pyarrow, no harness import). Modes:

  fork-child     answers correctly; at start forks a child (its pid written to $CHILD_PID_FILE) that
                 sleeps and ignores the end of stdin: the harness must end it with the packer's group
  no-hello       answers the handshake with an 'error' message (a version-1 packer does this)
  old-version    answers every message as wire version 1 would
  nameless       answers hello without packer_version
  crash-after    answers hello and one pack request, writes a line on stderr and exits with status 7
  hang-after     answers hello, then never reads nor answers again
  record-meta    answers correctly; appends every request's metadata as one JSON line to $RECORD_META
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import pyarrow as pa  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402
from packer_engine_example import pack, unpack, write  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    mode = parser.parse_args().mode
    if mode == "fork-child":
        pid = os.fork()
        if pid == 0:  # the child: holds no pipe open, lives on until killed
            os.closerange(0, 3)
            time.sleep(300)
            os._exit(0)
        with open(os.environ["CHILD_PID_FILE"], "w") as out:
            out.write(str(pid))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    answered = 0
    while stdin.peek(1):
        table = ipc.open_stream(stdin).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if mode == "record-meta":
            with open(os.environ["RECORD_META"], "a") as log:
                log.write(json.dumps({**meta, "WEIGHTS type": str(table.schema.field("WEIGHTS").type)
                                      if "WEIGHTS" in table.column_names else None}) + "\n")
        if mode == "old-version":  # what a version-1 packer answers to anything of version 2
            schema = pa.schema([]).with_metadata({"verb": "error", "version": "1",
                                                  "message": "wire version '2' not supported (this packer speaks 1)"})
            with ipc.new_stream(stdout, schema):
                pass
            stdout.flush()
            continue
        if meta["verb"] == "hello":
            if mode == "no-hello":
                write(stdout, "error", message="unknown verb 'hello'")
            else:
                write(stdout, "hello", packer_name="protocol-test", **({} if mode == "nameless" else
                                                                       {"packer_version": "0.1"}))
            if mode == "hang-after":
                time.sleep(300)
            continue
        if mode == "crash-after" and answered == 1:
            print("thread 'main' panicked at src/pack.rs:42: attempt to subtract with overflow", file=sys.stderr)
            print("note: run with `RUST_BACKTRACE=1` for a backtrace", file=sys.stderr, flush=True)
            return 7
        if meta["verb"] == "pack":
            write(stdout, "packed", pack(table, int(meta["pad_to"]) if meta.get("pad_to") else None, None, meta))
        else:
            write(stdout, "unpacked", unpack(table))
        answered += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
