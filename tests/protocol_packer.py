"""Wire-protocol packers for the process-hygiene, handshake and session tests (one behaviour per --mode).

Built on examples/packer_engine_example.py (numpy + pyarrow, no harness import). Every mode names
itself protocol-test/0.1 (but nameless); ``--variant TEXT`` is accepted and changes nothing (two
commands that differ in one flag only). With $RECORD_META set, every message's metadata, its
WEIGHTS type and the process's pid are appended to that file as one JSON line; with $START_LOG
set, the pid is appended to it at start. Modes:

  plain          answers correctly (record-meta: the same)
  fork-child     answers correctly; at start forks a child (its pid written to $CHILD_PID_FILE) that
                 sleeps and ignores the end of stdin: the harness must end it with the packer's group
  no-hello       answers the handshake with an 'error' message (a version-1 packer does this)
  old-version    answers every message as wire version 1 would
  nameless       answers hello without packer_version
  crash-after    answers hello and one pack request, writes a line on stderr and exits with status 7
  hang-after     answers hello, then never reads nor answers again
  check-geometry answers correctly, but a request whose geometry is not the hello's with 'error'
  extra-meta     answers correctly, every answer's metadata holding keys the protocol does not list
  batch-hello    answers correctly, its hello answer holding one empty record batch (not zero)
  close-stdin    closes its stdin as it answers hello, and stays alive (it stops reading, not answering)
  version-by-window  answers correctly, but names itself protocol-test/0.1-w<the hello's window_samples>: each
                 session of another geometry (the fast lane's, the packing laws') is another packer

Options that change what the packer does to its own files (the identity tests): ``--touch FILE`` appends a line
to FILE (one of its own file arguments) as the hello comes, before answering it; ``--touch-window N`` only in a
session whose hello has window_samples N. With $REPOINT set to ``LINK=TARGET``, the symlink LINK (the program
the command names) is re-pointed to TARGET as the packer starts.
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

GEOMETRY_KEYS = (
    "window_samples",
    "frames_per_window",
    "windows_per_block",
    "weights_frames",
    "sample_rate",
    "embedding_dim",
)
EXTRA = {"packer_build": "2026-01-01T00:00:00Z", "x-trace": "abc"}  # keys the protocol does not list


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--variant", default=None)
    parser.add_argument("--touch", default=None)
    parser.add_argument("--touch-window", default=None)
    options = parser.parse_args()
    mode = options.mode
    if os.environ.get("REPOINT"):
        link, _, target = os.environ["REPOINT"].partition("=")
        os.symlink(target, link + ".new")
        os.replace(link + ".new", link)
    if os.environ.get("START_LOG"):
        with open(os.environ["START_LOG"], "a") as out:
            out.write(f"{os.getpid()}\n")
    if mode == "fork-child":
        pid = os.fork()
        if pid == 0:  # the child: holds no pipe open, lives on until killed
            os.closerange(0, 3)
            time.sleep(300)
            os._exit(0)
        with open(os.environ["CHILD_PID_FILE"], "w") as out:
            out.write(str(pid))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    extra = EXTRA if mode == "extra-meta" else {}
    answered = 0
    hello: dict[str, str] = {}
    while stdin.peek(1):
        table = ipc.open_stream(stdin).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if os.environ.get("RECORD_META"):
            with open(os.environ["RECORD_META"], "a") as log:
                weights = str(table.schema.field("WEIGHTS").type) if "WEIGHTS" in table.column_names else None
                log.write(json.dumps({**meta, "pid": os.getpid(), "WEIGHTS type": weights}) + "\n")
        if mode == "old-version":  # what a version-1 packer answers to anything of version 2
            schema = pa.schema([]).with_metadata(
                {"verb": "error", "version": "1", "message": "wire version '2' not supported (this packer speaks 1)"}
            )
            with ipc.new_stream(stdout, schema):
                pass
            stdout.flush()
            continue
        if meta["verb"] == "hello":
            hello = {k: meta.get(k, "") for k in GEOMETRY_KEYS}
            if options.touch and options.touch_window in (None, hello["window_samples"]):
                with open(options.touch, "a") as touched:
                    touched.write(f"touched by {os.getpid()}\n")
            if mode == "close-stdin":  # before its answer: the next request, however soon, finds no reader
                os.close(0)
            if mode == "no-hello":
                write(stdout, "error", message="unknown verb 'hello'")
            elif mode == "batch-hello":
                schema = pa.schema([]).with_metadata(
                    {"verb": "hello", "version": "2", "packer_name": "protocol-test", "packer_version": "0.1"}
                )
                with ipc.new_stream(stdout, schema) as writer:
                    writer.write_batch(pa.RecordBatch.from_arrays([], schema=schema))
                stdout.flush()
            else:
                version = f"0.1-w{hello['window_samples']}" if mode == "version-by-window" else "0.1"
                write(
                    stdout,
                    "hello",
                    packer_name="protocol-test",
                    **({} if mode == "nameless" else {"packer_version": version}),
                    **extra,
                )
            if mode == "hang-after":
                time.sleep(300)
            if mode == "close-stdin":
                time.sleep(300)
            continue
        if mode == "crash-after" and answered == 1:
            print("thread 'main' panicked at src/pack.rs:42: attempt to subtract with overflow", file=sys.stderr)
            print("note: run with `RUST_BACKTRACE=1` for a backtrace", file=sys.stderr, flush=True)
            return 7
        changed = [k for k in GEOMETRY_KEYS if meta.get(k, "") != hello.get(k)]
        if mode == "check-geometry" and changed:
            write(
                stdout,
                "error",
                message=f"geometry {changed[0]}={meta.get(changed[0])!r} differs from the "
                f"hello's {hello.get(changed[0])!r}",
                **extra,
            )
        elif meta["verb"] == "pack":
            write(
                stdout, "packed", pack(table, int(meta["pad_to"]) if meta.get("pad_to") else None, None, meta), **extra
            )
        else:
            write(stdout, "unpacked", unpack(table), **extra)
        answered += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
