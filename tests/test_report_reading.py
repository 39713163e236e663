"""What a reader of the sign-off report must not misread.

- The report and the JUnit file name what ran the requests: in-process, or a Triton server with its URL,
  transport, shared memory and requests in flight; with several in flight, the timing line gives no share.
- A first night's "Margins" section is one sentence, not a table of dashes and empty plots; a stalled call is
  said in words, with what makes it one.
- The report names the file the engine reads (promoted-shapes.json) and what it allows.

The score here is a real in-process one (the null network: its numbers do not matter); a Triton night is its
score with the backend a Triton server records (``tests/triton/test_triton_end_to_end.py`` runs one through a
real server).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.data.schemas import SignoffReport
from harness.data.schemas.backend_facts import BackendFacts
from harness.data.schemas.machine import BackendRecord
from harness.data.schemas.results import Score
from reports import ReportContext, write_junit, write_report
from reports.host_line import timing_line
from tests.pipeline import pipeline

URL = "http://triton.example:8000"


def triton_backend(concurrency: int, transport: str = "http") -> dict[str, Any]:
    """A run manifest's ``backend`` as lanes.backends.triton.triton_backend.TritonBackend.environment() writes it."""
    return {
        "backend": "triton",
        "url": URL,
        "server_version": "2.51.0",
        "model_name": "diar_nn_g",
        "device": "cpu",
        "device_kind": "cpu",
        "numerics_requested": {},
        "numerics_in_force": {},
        "weights_verified": True,
        "concurrency": concurrency,
        "transport": transport,
    }


@pytest.fixture(scope="module")
def score(tmp_path_factory) -> Score:
    return pipeline("lanes.models.null_model:small", tmp_path_factory.mktemp("backend"), shapes=(2,), blocks=4).score


def as_triton(score: Score, concurrency: int, transport: str = "http") -> Score:
    record = BackendRecord.model_validate(triton_backend(concurrency, transport))
    facts = BackendFacts.of(record).model_dump(mode="json")
    return Score.model_validate({**score.model_dump(mode="json"), "backend": facts})


def suite_properties(path: Path) -> dict[str, str]:
    props = ET.parse(path).getroot().find("testsuite/properties")  # the suite's own, not a test case's
    assert props is not None
    return {p.get("name", ""): p.get("value", "") for p in props.findall("property")}


def pages(tmp_path: Path, score: Score) -> tuple[dict[str, Any], str, str, dict[str, str]]:
    paths = write_report(tmp_path / "report", score)
    junit = write_junit(tmp_path / "junit.xml", score, None)
    facts = json.loads(paths["json"].read_text())
    SignoffReport.model_validate(facts)  # report.json's published schema holds the new keys
    return facts, paths["html"].read_text(), paths["md"].read_text(), suite_properties(junit)


def test_an_in_process_night_says_so(tmp_path, score):
    assert score.backend is not None and score.backend.name == "in-process" and score.backend.url is None
    facts, html, md, props = pages(tmp_path, score)
    # the null model may be entered by two threads at once: the lanes kept two calls in flight, and the report says so
    assert score.backend.calls_in_flight == 2
    assert facts["backend"] == {"backend": "in-process (the model in the harness's own process, 2 calls in flight)"}
    serial = Score.model_validate(
        {**score.model_dump(mode="json"), "backend": {**score.backend.model_dump(mode="json"), "calls_in_flight": 1}}
    )
    assert pages(tmp_path / "serial", serial)[0]["backend"] == {
        "backend": "in-process (the model in the harness's own process, one call at a time)"
    }
    assert 'id="backend"' in html and "in-process (the model" in html and "| backend | in-process" in md
    assert props["backend"] == "in-process" and "backend_url" not in props


@pytest.mark.parametrize("transport", ["http", "shm"])
def test_a_triton_night_names_the_server_transport_and_requests_in_flight(tmp_path, score, transport):
    facts, html, md, props = pages(tmp_path, as_triton(score, 2, transport))
    assert facts["backend"] == {
        "backend": f"triton server {URL}",
        "transport": transport,
        "shared memory": "yes" if transport == "shm" else "no",
        "requests in flight": "2",
        "server version": "2.51.0",
        "server model": "diar_nn_g",
    }
    assert URL in html and f"| transport | {transport} |" in md and "| requests in flight | 2 |" in md
    assert {k: props[k] for k in props if k.startswith("backend")} == {
        "backend": "triton",
        "backend_url": URL,
        "backend_transport": transport,
        "backend_concurrency": "2",
    }


def test_overlapping_calls_give_no_share_of_the_wall(score):
    """At concurrency 2 the calls' summed time may exceed the lanes' wall: no "0 s (0 %)" share is printed.
    Negative control: one request in flight, the share is given."""
    assert score.host is not None
    overlapping = as_triton(score, 2)
    line = timing_line(overlapping)
    assert "2 requests were in flight at once" in line and "cannot be told" in line and "%" not in line
    assert f"{score.host.device_s:.3g} s of calls summed" in line
    one = timing_line(as_triton(score, 1))
    assert "%" in one and "ms per block" in one and "in flight" not in one
    assert timing_line(score) == one  # in-process: one call at a time, as Triton at concurrency 1


def test_a_score_before_the_backend_was_recorded_still_renders(tmp_path, score):
    data = score.model_dump(mode="json")
    del data["backend"]
    old = Score.model_validate(data)
    facts, html, _, props = pages(tmp_path, old)
    assert facts["backend"] is None and 'id="backend"' not in html and "backend" not in props


# --------------------------------------------------------------------------- margins of a first night, stalls


def test_a_first_night_says_its_margins_start_tomorrow_instead_of_a_table_of_dashes(tmp_path, score):
    """One night in the history: no trend table, no plots, one sentence; a margin already near its limit still
    warns. Negative control: a second night gets the table and a plot."""
    from harness.data.schemas.config_file import HistorySection
    from harness.ledger.margins import margins_view
    from tests.test_margins import nights

    settings = HistorySection()
    paths = write_report(tmp_path / "first", score, ReportContext(margins=margins_view(nights([0.9]), settings)))
    facts, html, md = (json.loads(paths["json"].read_text()), paths["html"].read_text(), paths["md"].read_text())
    assert facts["margins"]["first_night"] and facts["margins"]["trends"] == []
    assert 'id="margin-trends"' not in html and "margins-plot" not in html and "| k | OP | metric |" not in md
    assert "a margin's trend needs two nights" in html and "a margin's trend needs two nights" in md
    assert "warning: k=4 OP 0 max_abs" in md  # near its limit on the first night: still said
    paths = write_report(tmp_path / "second", score, ReportContext(margins=margins_view(nights([0.1, 0.2]), settings)))
    html = paths["html"].read_text()
    assert 'id="margin-trends"' in html and 'id="margins-plot-0"' in html and "needs two nights" not in html


def test_a_stalled_call_is_said_in_words(tmp_path, score):
    from harness.throughput.timing import STALL_FACTOR  # the factor the score's stalls were counted with

    data = score.model_dump(mode="json")
    data["throughput"]["2"]["stalls"] = 3
    html = write_report(tmp_path / "r", Score.model_validate(data))["html"].read_text()
    factor = f"{STALL_FACTOR:g}"
    assert f"3 stalled calls (over {factor}× the median)" in html and "stall(s)" not in html
    assert f"A stalled call took more than {factor}× its lane's median time for the same OP" in html


# --------------------------------------------------------------------------- the file the engine reads


def test_the_report_names_the_file_the_engine_reads(tmp_path, score):
    """Without a manifest known to the report, it still names promoted-shapes.json; with one, its path and what it
    allows for this score's model, device, numerics profile and packer."""
    from harness.pipeline.promote import engine_manifest

    _, html, md, _ = pages(tmp_path / "a", score)
    assert "The engine reads promoted-shapes.json" in html and "The engine reads promoted-shapes.json" in md
    missing = engine_manifest(score, tmp_path / "none" / "promoted-shapes.json")
    assert not missing.exists and missing.allows is None
    facts = json.loads(write_report(tmp_path / "b", score, ReportContext(engine=missing))["json"].read_text())
    assert facts["engine_line"] == (
        f"The engine reads {tmp_path / 'none' / 'promoted-shapes.json'}; it does not "
        "exist yet: no packed shape is allowed anywhere until a night promotes one."
    )
