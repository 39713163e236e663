"""The ``harness`` command line: thin commands over :mod:`harness.pipeline`, one way to fail.

Exit status of every command:

    0  everything holds
    1  a verdict failed (a shape refused, a golden not reproduced); the last line says which
    2  the harness could not do what was asked: one line ``harness: error: <where>: <what>``
       (bad input, missing or tampered file, server down, unwritable output, interrupted)
    3  an internal error (a bug): one line naming the command and the step it was in;
       ``--debug`` (anywhere on the line) or ``HARNESS_DEBUG=1`` prints the traceback

Nothing else: Ctrl-C and SIGTERM are status 2 ("interrupted; nothing partial was written as
complete"), usage errors too.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from harness.errors import EXIT_ERROR, EXIT_INTERNAL, HarnessError, Interrupted, current_step


def _on_sigterm(signum, frame) -> None:
    raise Interrupted("interrupted (SIGTERM); nothing partial was written as complete")


def _command(argv: list[str]) -> str:
    words = [a for a in argv if not a.startswith("-")][:2]
    return " ".join(words) or "harness"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("HARNESS_DEBUG") == "1" or "--debug" in args
    args = [a for a in args if a != "--debug"]
    command = _command(args)
    previous = signal.getsignal(signal.SIGTERM)
    if threading_main():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        from harness.cli.app import app_command

        code = app_command().main(args=args, prog_name="harness", standalone_mode=False)
    except HarnessError as exc:
        _fail(str(exc), debug)
        code = EXIT_ERROR
    except KeyboardInterrupt:
        _fail("interrupted (SIGINT); nothing partial was written as complete", debug)
        code = EXIT_ERROR
    except Exception as exc:  # click's usage errors, then anything the harness did not anticipate
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message())
            code = 0
        elif hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            name = getattr(getattr(exc, "ctx", None), "command_path", None) or "harness"
            _fail(f"{name}: {' '.join(exc.format_message().split())}", debug)
            code = EXIT_ERROR
        elif type(exc).__name__ == "Abort":
            _fail("interrupted (SIGINT); nothing partial was written as complete", debug)
            code = EXIT_ERROR
        else:
            if debug:
                traceback.print_exc()
            detail = " ".join(str(exc).split())[:300]
            print(f"harness: internal error in '{command}' at step '{current_step()}': {type(exc).__name__}: "
                  f"{detail} (a bug in the harness; rerun with --debug for the traceback)", file=sys.stderr)
            code = EXIT_INTERNAL
    finally:
        if threading_main():
            signal.signal(signal.SIGTERM, previous)
    sys.exit(int(code or 0))


def _fail(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    print(f"harness: error: {message}", file=sys.stderr)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


__all__ = ["main"]
