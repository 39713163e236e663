"""The numeric settings are in force for a scope and the process gets its own torch state back after it.

``NumericSettings.applied()`` is the only way the harness sets torch's flags; these tests hold it to its
laws: the state it found is back when it ends (on an error and a KeyboardInterrupt too), nested scopes
restore last in, first out, two threads' overlapping scopes hand over what they found, and torch's state
is read back exactly, through both of torch's TF32 APIs. The entries that hold a scope around a whole
recording, run or nightly are tested in tests/test_numerics_restored.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.data.numeric_settings import NumericSettings
from harness.host.numerics_scope import CUBLAS_VARIABLE, NumericsScopeError, open_scopes
from harness.host.torch_state import FP32_AT_IMPORT, TorchState
from lanes.backends.backend import InProcessBackend
from tests import torch_moves
from tests.torch_moves import in_force_of, kept, moved, observed

ROOT = Path(__file__).resolve().parents[1]
ODD = NumericSettings(threads=1, mkldnn=False, cudnn_benchmark=True, allow_tf32=True, matmul_precision="medium")


@settings(max_examples=40)
@given(st.lists(torch_moves.moves, max_size=6), st.lists(torch_moves.moves, min_size=1, max_size=6))
def test_a_state_read_is_restored_exactly_after_any_moves(before, after):
    """The law the scopes rest on: whatever a user did to torch (both TF32 APIs mixed), read() then any
    moves then restore() gives back every value read, the fp32_precision tree included."""
    with kept():
        moved(before)
        state = TorchState.read()
        moved(after)
        state.restore()
        assert state.unrestored(TorchState.read()) == []


def test_a_changed_state_is_seen_as_changed():
    """The negative control of the law: a moved flag is reported, naming it, until it is restored."""
    with kept() as start:
        torch.backends.mkldnn.enabled = not start.mkldnn  # type: ignore[assignment]
        torch.set_float32_matmul_precision("medium" if start.matmul_precision != "medium" else "high")
        left = start.unrestored(TorchState.read())
        assert [line.split(":")[0] for line in left if not line.startswith(("matmul_allow", "fp32"))] == [
            "mkldnn",
            "matmul_precision",
        ], left
        start.restore()
        assert start.unrestored(TorchState.read()) == []


@settings(max_examples=40)
@given(st.lists(torch_moves.moves, max_size=4), torch_moves.settings, torch_moves.settings)
def test_nested_scopes_restore_last_in_first_out(start_moves, outer, inner):
    """And the settings mean the same whatever the process had: torch reads back the same state inside a scope
    whatever a user did before it (a user's new-API TF32 outranked the legacy switches)."""
    with kept():
        with inner.applied():
            clean = TorchState.read()
        moved(start_moves)
        start, cublas = TorchState.read(), os.environ.get(CUBLAS_VARIABLE)
        with outer.applied():
            assert observed(TorchState.read(), outer) == in_force_of(outer)
            with inner.applied():
                assert observed(TorchState.read(), inner) == in_force_of(inner)
                assert TorchState.read() == clean, TorchState.read().differences(clean)
            assert observed(TorchState.read(), outer) == in_force_of(outer), "the inner scope gave back the outer's"
        assert start.unrestored(TorchState.read()) == []
        assert os.environ.get(CUBLAS_VARIABLE) == cublas and open_scopes() == 0


@pytest.mark.parametrize("raised", [RuntimeError("a model failed"), KeyboardInterrupt()])
def test_a_scope_ended_by_an_error_or_an_interrupt_gives_the_state_back(raised):
    with kept() as start:
        with pytest.raises(type(raised)), ODD.applied():
            assert TorchState.read().mkldnn is False
            raise raised
        assert start.unrestored(TorchState.read()) == [] and open_scopes() == 0


def test_a_scope_is_used_only_inside_its_block():
    with kept():
        scope = ODD.applied()
        with pytest.raises(NumericsScopeError, match="outside their scope"):
            scope.apply()
        with scope:
            scope.apply()
            with pytest.raises(NumericsScopeError, match="entered once"), scope:
                pass
        with pytest.raises(NumericsScopeError, match="outside their scope"):
            scope.apply()
        assert open_scopes() == 0


def test_two_threads_scopes_that_overlap_hand_over_what_they_found():
    """A scope that ends while another thread's newer scope is open changes no shared flag under it; the
    newer one gives the first one's state back when it ends; each thread's thread count comes back in it."""
    other = NumericSettings(threads=3, mkldnn=False, deterministic_algorithms=False)
    entered, leave, seen = threading.Event(), threading.Event(), {}

    def newer() -> None:
        with other.applied():
            entered.set()
            leave.wait(60)
        seen["worker_threads"] = torch.get_num_threads()

    with kept() as start:
        worker = threading.Thread(target=newer)
        with NumericSettings(threads=1, cudnn_benchmark=True).applied():
            worker.start()
            assert entered.wait(60)
        during = TorchState.read()
        assert (during.mkldnn, during.deterministic_algorithms) == (False, False), "the newer scope's flags stay"
        assert during.threads == start.threads, "this thread's count is back when its own scope ends"
        leave.set()
        worker.join(60)
        assert not worker.is_alive()
        assert start.unrestored(TorchState.read()) == [] and open_scopes() == 0


def test_a_scope_of_the_same_settings_inside_takes_the_place_of_one_that_ends_first():
    """A scope inside one of the same settings only sets them again (a call inside a recording); when the outer
    one ends first (its thread did not wait for the other), the inner one gives the state back when it ends."""
    entered, leave = threading.Event(), threading.Event()

    def inside() -> None:
        with ODD.applied():
            entered.set()
            leave.wait(60)

    with kept() as start:
        with ODD.applied():
            with ODD.applied():
                assert open_scopes() == 1, "a scope of the same settings inside holds nothing of its own"
            assert observed(TorchState.read(), ODD) == in_force_of(ODD)
            worker = threading.Thread(target=inside)
            worker.start()
            assert entered.wait(60)
        during = TorchState.read()
        assert (during.mkldnn, during.matmul_precision, open_scopes()) == (False, "medium", 1), during
        assert during.threads == start.threads, "this thread's count is back when its own scope ends"
        leave.set()
        worker.join(60)
        assert not worker.is_alive()
        assert start.unrestored(TorchState.read()) == [] and open_scopes() == 0


class _Watching:
    """The small model, reading torch's state in every call (what the settings are while it runs)."""

    def __init__(self, model) -> None:
        self.inner, self.seen = model, []
        self.fingerprint, self.geometry = model.fingerprint, model.geometry

    def infer(self, request):
        self.seen.append(TorchState.read())
        return self.inner.infer(request)


def test_the_in_process_backend_applies_around_each_call_and_gives_the_state_back(small_model, small_corpus):
    model = _Watching(small_model)
    backend = InProcessBackend(model, ODD)  # type: ignore[arg-type]
    block = small_corpus.blocks[0]
    with kept() as start:
        assert start.unrestored(TorchState.read()) == [], "building a backend changes nothing"
        result = backend.call(block.op, block.tensors(), 8, 8, "block 0")
        with backend.pipelined() as submit:
            piped = submit((block.op, block.tensors(), 8, 8, "block 0")).result()
        env = backend.environment()
        assert start.unrestored(TorchState.read()) == []
    # the call, the three of the check of two calls at once (two of them in two threads together) and the piped one
    assert [observed(s, ODD) for s in model.seen] == [in_force_of(ODD)] * 5
    assert env["calls_in_flight"] == 2
    assert env["numerics_in_force"]["mkldnn"] is False and env["numerics_in_force"]["threads"] == 1
    np.testing.assert_array_equal(piped.output, result.output)


def test_settings_applied_before_torch_is_imported_give_back_torch_as_it_was_imported():
    """In a fresh interpreter: a scope entered before torch is imported takes torch's state at its first
    apply after the import, before it sets anything, and gives that back (and unsets CUBLAS_WORKSPACE_CONFIG);
    torch's fp32_precision tree at import is the one the settings start from (harness.host.torch_state)."""
    script = textwrap.dedent(f"""
        import json, os, sys
        from harness.data.numeric_settings import NumericSettings
        from harness.host.torch_state import FP32_AT_IMPORT, TorchState
        os.environ.pop("{CUBLAS_VARIABLE}", None)
        with NumericSettings(threads=1, mkldnn=False).applied() as outer, NumericSettings(threads=3).applied() as inner:
            assert "torch" not in sys.modules
            import torch
            imported = TorchState.read()
            at_import = {{name: value for name, value in imported.fp32_precision if value != "none"}}
            inner.apply()
            outer.apply()
            during = TorchState.read()
        after = TorchState.read()
        print(json.dumps({{"left": imported.unrestored(after), "during": [during.threads, during.mkldnn],
                          "cublas": os.environ.get("{CUBLAS_VARIABLE}"), "at_import": at_import}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    at_import = out.pop("at_import")
    assert out == {"left": [], "during": [1, False], "cublas": None}, out
    if at_import:  # torch >= 2.9: the tree the settings start from is torch's own at import
        assert at_import == FP32_AT_IMPORT, (
            f"torch's fp32_precision tree at import is {at_import}: update FP32_AT_IMPORT"
        )
