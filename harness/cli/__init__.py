"""The ``harness`` command line: thin commands over :mod:`harness.pipeline`, one way to fail.

Exit status of every command:

    0  everything holds
    1  a verdict failed (a shape refused, a golden not reproduced); the last line says which
    2  the harness could not do what was asked: one line ``harness: error: <where>: <what>``
       (bad input, missing or tampered file, server down, unwritable output, interrupted, a
       dependency that fails to import: harness.cli.deps names it and the versions installed)
    3  an internal error (a bug): one line naming the command and the step it was in;
       ``--debug`` (anywhere on the line) or ``HARNESS_DEBUG=1`` prints the traceback

Nothing else: Ctrl-C and SIGTERM are status 2 ("interrupted ...; nothing partial was written as
complete", naming what the command had committed before the signal and what the next command
finishes), usage errors too. The first signal stops the command at its next check point (within
one network call; see harness.base.errors); a second one stops it at once; one that reaches no check
point (a short command) still ends it with status 2 once the command returns: a signal is never lost.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import traceback

from harness.base.env_vars import variables
from harness.base.errors import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    HarnessError,
    Interrupted,
    cleaning_up,
    clear_interrupt,
    clip_line,
    command_record,
    debugging,
    failed_step,
    interrupt_requested,
    interrupted_message,
    one_line,
    request_interrupt,
)
from harness.base.fsio import fault, user_cache_dir
from harness.base.process_settings import tune_process


def _on_signal(signum, frame) -> None:
    """The first signal is recorded and raised at the harness's next check point; a second one
    (the user insists, or the command is stuck in a call) is raised here and now, unless a clean-up is
    under way (:func:`harness.base.errors.clean_up`: it finishes, and the command ends interrupted)."""
    name = signal.Signals(signum).name
    first = interrupt_requested() is None
    request_interrupt(name)
    if not first and not cleaning_up():
        raise Interrupted(interrupted_message(name))


def _interrupted() -> str:
    return interrupted_message(interrupt_requested() or "SIGINT")


def _command(argv: list[str]) -> str:
    """The command named on the line ('golden record'), not the values of its options."""
    try:
        from harness.cli.command_tree import app_command  # deferred: imports typer (start-up)

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


def program() -> None:
    """The ``harness`` program (the console script, ``python -m harness.cli``): the process's own settings first
    (before torch is imported and any thread starts; it may start the process again: harness.base.process_settings),
    then :func:`main`. A test calling :func:`main` in its own process changes nothing of that process."""

    tune_process()
    main()


def main(argv: list[str] | None = None) -> None:
    if argv is None:  # run as the program (console script, python -m), not called in-process by a test
        _hypothesis_storage_outside_the_working_folder()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = variables().debug or "--debug" in args
    args = [a for a in args if a != "--debug"]
    clear_interrupt()  # before the handlers are installed: from here on, no signal is ever dropped
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    if threading_main():
        for sig in previous:
            signal.signal(sig, _on_signal)
    code: int | None = EXIT_ERROR
    try:
        with command_record(), debugging(debug):
            try:
                code = _run(args, debug)
                if interrupt_requested() is not None and code != EXIT_ERROR:
                    # the signal reached no check point (a short command, or the last step): the command still
                    # ends as the README says an interrupted command ends, status 2, one line
                    _fail(_interrupted(), debug)
                    code = EXIT_ERROR
            except KeyboardInterrupt:  # a second signal, raised by the handler between two lines here
                _fail(_interrupted(), debug)
                code = EXIT_ERROR
    finally:
        if threading_main():
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        clear_interrupt()
    # The interpreter's exit collects every object the command made, torch's module graph first: 0.9 s of
    # an exit of 1.1 s after `import torch` alone, 0.85 s after a run (after the lanes, in series with
    # nothing). Frozen into the permanent generation they are skipped; nothing of the command runs after
    # this point but the exit handlers (which still run: the timeline of lanes.simulation.simulated_device, say).
    gc.freeze()
    sys.exit(int(code or 0))


def _hypothesis_storage_outside_the_working_folder() -> None:
    """``harness laws`` and the laws gate of ``harness run`` search with hypothesis, which keeps a cache
    (``constants/``) in ``./.hypothesis`` by default: a folder the user did not ask for, in theirs. It goes
    to ``$XDG_CACHE_HOME/diar-lane-harness/hypothesis`` (``~/.cache``) unless HYPOTHESIS_STORAGE_DIRECTORY
    says where; the verdicts do not read it (their search has no example database)."""

    folder = user_cache_dir("hypothesis")
    if folder is not None:  # no home folder: hypothesis's default stays
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(folder))


def _run(args: list[str], debug: bool) -> int | None:
    """The command itself: its exit status, every failure turned into its one line."""

    try:
        fault("cli:start")
        from harness.cli.app import removed_flag  # deferred: imports typer (start-up)
        from harness.cli.command_tree import app_command  # deferred: imports typer and every command module

        fault("cli:imported")
        command = app_command()
        removed = removed_flag(command, args)  # an alias of a --set key, removed: one line naming the key
        if removed is not None:
            _fail(removed, debug)
            return EXIT_ERROR
        code = command.main(args=args, prog_name="harness", standalone_mode=False)
        fault("cli:returned")
        if code == 130:  # typer's answer to a KeyboardInterrupt it caught itself
            _fail(_interrupted(), debug)
            code = EXIT_ERROR
    except HarnessError as exc:
        _fail(str(exc), debug)
        code = EXIT_ERROR
    except KeyboardInterrupt:  # Interrupted or not: the line says what this command committed before it
        _fail(_interrupted(), debug)
        code = EXIT_ERROR
    except Exception as exc:  # click's usage errors, then anything the harness did not anticipate
        if type(exc).__name__ == "NoArgsIsHelpError" and hasattr(exc, "format_message"):
            print(exc.format_message())
            code = 0
        elif hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            name = getattr(getattr(exc, "ctx", None), "command_path", None) or "harness"
            _fail(f"{name}: {' '.join(exc.format_message().split())}", debug)
            code = EXIT_ERROR
        elif type(exc).__name__ == "Abort":
            _fail(_interrupted(), debug)
            code = EXIT_ERROR
        elif (broken := _dependency_failure(exc)) is not None:  # the environment's fault: exit 2, not a bug
            _fail(f"{_command(args)}: {broken}", debug)
            code = EXIT_ERROR
        else:
            if debug:
                traceback.print_exc()
            print(
                clip_line(
                    f"harness: internal error in '{_command(args)}' at step '{failed_step(exc)}': "
                    f"{type(exc).__name__}: {one_line(exc)} (a bug in the harness; rerun with --debug for the "
                    "traceback)"
                ),
                file=sys.stderr,
            )
            code = EXIT_INTERNAL
    return code


def _dependency_failure(exc: BaseException) -> str | None:
    """A third-party package that failed to import (harness.cli.deps); None for anything else."""
    try:
        from harness.cli.deps import dependency_failure  # deferred: only when an import failed (importlib.metadata)

        return dependency_failure(exc)
    except Exception:  # classifying the error must never hide it
        return None


def _fail(message: str, debug: bool) -> None:
    """The one error line, never longer than a screen: a message that echoes what the user gave (a 200 KB
    packer argument, ten thousand shapes) is cut in its middle, with the count of what was cut."""
    if debug:
        traceback.print_exc()
    print(clip_line(f"harness: error: {' '.join(message.splitlines())}"), file=sys.stderr)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


__all__ = ["main", "program"]
