"""The model, golden and numerics tests pass in any order: no test inherits torch's flags from another.

They used not to: ``tests/test_golden_diff.py`` records a golden with oneDNN off, the flag stayed off, and
``tests/test_model.py::test_packed_vs_unpacked_on_this_cpu`` (which runs the model under the process's own
settings) failed after it. Here they run in a seeded random order in a pytest of their own
(tests/order_plugin.py), the seed chosen so the recording with oneDNN off comes before the model's tests;
the negative control runs the same order with the numeric settings' restore removed and must fail there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.order_plugin import NO_RESTORE, ORDER, in_order

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("tests/test_model.py", "tests/test_numerics_key.py", "tests/test_golden_diff.py")
LEAKER, VICTIM = "tests/test_golden_diff.py", "tests/test_model.py"
# Left out: the full reference network's tests (seconds each, reading no flag a test sets) and the one golden
# diff test that builds the session's default golden, which sets the default settings again: without the
# restore, whether that one ran last would decide whether the leak shows (the negative control must fail).
SELECT = "not full and not different_corpora"
VICTIM_TEST = "test_packed_vs_unpacked_on_this_cpu"


def _seed() -> int:
    """The first seed whose order runs the oneDNN-off recording just before the model's tests, then the rest
    (the negative control stops at its first failure): neither the files' order nor its reverse."""
    for seed in range(1000):
        order = in_order(f"random:{seed}", MODULES)
        if order[:2] == [LEAKER, VICTIM] and order not in (list(MODULES), list(MODULES)[::-1]):
            return seed
    raise AssertionError("no seed orders the modules as the test needs")


def _pytest(order: str, restore: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), ORDER: order}
    env.pop(NO_RESTORE, None)
    if not restore:
        env[NO_RESTORE] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.order_plugin", "-p", "no:cacheprovider", "-q", "-rf"]
        + (["-x"] if not restore else [])
        + ["-k", SELECT, *MODULES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_model_golden_and_numerics_tests_pass_in_a_seeded_random_order_and_fail_without_the_restore():
    order = f"random:{_seed()}"
    passed = _pytest(order, restore=True)
    tail = passed.stdout[-4000:] + passed.stderr[-2000:]
    assert passed.returncode == 0, f"{ORDER}={order}: the tests depend on their order:\n{tail}"
    assert " passed" in passed.stdout and " failed" not in passed.stdout, tail

    control = _pytest(order, restore=False)
    failed = [line for line in control.stdout.splitlines() if line.startswith("FAILED ")]
    assert control.returncode == 1 and any(VICTIM_TEST in line for line in failed), (
        f"{ORDER}={order} {NO_RESTORE}=1: the negative control must fail {VICTIM}::{VICTIM_TEST} (the flag left "
        f"off by {LEAKER}); it exited {control.returncode}, failing {failed}:\n{control.stdout[-4000:]}"
    )
