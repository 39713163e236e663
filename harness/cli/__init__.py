"""The ``harness`` command line: thin commands over :mod:`harness.pipeline`, one way to fail.

Exit status of every command:

    0  everything holds
    1  a verdict failed (a shape refused, a golden not reproduced); the last line says which
    2  the harness could not do what was asked: one line ``harness: error: <where>: <what>``
       (bad input, missing or tampered file, server down, unwritable output, interrupted)
    3  an internal error (a bug): one line naming the command and the step it was in;
       ``--debug`` (anywhere on the line) or ``HARNESS_DEBUG=1`` prints the traceback

Nothing else: Ctrl-C and SIGTERM are status 2 ("interrupted; nothing partial was written as
complete"), usage errors too. The first signal stops the command at its next check point (within
one network call; see harness.errors); a second one stops it at once.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from harness.errors import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    HarnessError,
    Interrupted,
    clear_interrupt,
    failed_step,
    interrupt_requested,
    interrupted_message,
    one_line,
    request_interrupt,
)


def _on_signal(signum, frame) -> None:
    """The first signal is recorded and raised at the harness's next check point; a second one
    (the user insists, or the command is stuck in a call) is raised here and now."""
    name = signal.Signals(signum).name
    first = interrupt_requested() is None
    request_interrupt(name)
    if not first:
        raise Interrupted(interrupted_message(name))


def _interrupted() -> str:
    return interrupted_message(interrupt_requested() or "SIGINT")


def _command(argv: list[str]) -> str:
    """The command named on the line ('golden record'), not the values of its options."""
    try:
        from harness.cli.app import app_command

        group, words = app_command(), []
        for arg in argv:
            sub = getattr(group, "commands", {}).get(arg)
            if arg.startswith("-") or sub is None:
                break
            words.append(arg)
            group = sub
    except Exception:  # naming the command must never hide the error being reported
        words = [a for a in argv if not a.startswith("-")][:1]
    return " ".join(words) or "harness"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("HARNESS_DEBUG") == "1" or "--debug" in args
    args = [a for a in args if a != "--debug"]
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    if threading_main():
        for sig in previous:
            signal.signal(sig, _on_signal)
    try:
        from harness.cli.app import app_command

        clear_interrupt()
        code = app_command().main(args=args, prog_name="harness", standalone_mode=False)
        if code == 130:  # typer's answer to a KeyboardInterrupt it caught itself
            _fail(_interrupted(), debug)
            code = EXIT_ERROR
    except HarnessError as exc:
        _fail(str(exc), debug)
        code = EXIT_ERROR
    except KeyboardInterrupt as exc:
        _fail(str(exc) if isinstance(exc, Interrupted) else _interrupted(), debug)
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
            _fail(_interrupted(), debug)
            code = EXIT_ERROR
        else:
            if debug:
                traceback.print_exc()
            print(f"harness: internal error in '{_command(args)}' at step '{failed_step(exc)}': "
                  f"{type(exc).__name__}: {one_line(exc)} (a bug in the harness; rerun with --debug for the "
                  "traceback)",
                  file=sys.stderr)
            code = EXIT_INTERNAL
    finally:
        if threading_main():
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        clear_interrupt()
    sys.exit(int(code or 0))


def _fail(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    print(f"harness: error: {message}", file=sys.stderr)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


__all__ = ["main"]
