"""The harness packer's laws verdict is judged once per code and settings, then reused across processes;
a cache file that was edited, or is of other code, is never trusted."""

from __future__ import annotations

import json

import pytest

import harness.laws
from harness.packing import HarnessPacker
from harness.pipeline import laws_gate


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """judge_laws with an empty in-process cache, a cache folder of its own, and a count of real judgings."""
    calls = []
    real = harness.laws.check_packer

    def check_packer(packer, **kwargs):
        calls.append(kwargs)
        return real(packer, **kwargs)

    monkeypatch.setattr(harness.laws, "check_packer", check_packer)
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    monkeypatch.setenv("HARNESS_LAWS_CACHE", str(tmp_path / "cache"))
    return calls, tmp_path / "cache"


def test_the_verdict_is_reused_by_a_later_process_and_equal(counted, monkeypatch):
    calls, cache = counted
    first = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert first["verdict"] == "hold" and len(calls) == 1 and len(list(cache.iterdir())) == 1
    monkeypatch.setattr(laws_gate, "_CACHE", {})  # as a new process would start
    again = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert again == first and len(calls) == 1
    laws_gate.judge_laws(HarnessPacker(), examples=3, max_blocks=4)  # other settings: judged
    assert len(calls) == 2


def test_an_edited_cache_file_is_ignored_and_judged_again(counted, monkeypatch):
    calls, cache = counted
    laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    (path,) = cache.iterdir()
    data = json.loads(path.read_text())
    data["verdict"]["examples"] = 100  # a forged figure, seal left as it was
    path.write_text(json.dumps(data))
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    verdict = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2 and verdict["examples"] == 2


def test_other_code_is_another_key(counted, monkeypatch):
    calls, _ = counted
    laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    monkeypatch.setattr(laws_gate, "_source_digest", lambda: "0" * 64)  # the harness's code changed
    laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2


def test_off_judges_every_time(counted, monkeypatch):
    calls, cache = counted
    monkeypatch.setenv("HARNESS_LAWS_CACHE", "off")
    for _ in range(2):
        monkeypatch.setattr(laws_gate, "_CACHE", {})
        laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2 and not cache.exists()
