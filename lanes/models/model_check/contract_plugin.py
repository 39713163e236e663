"""The model contract in a team's own pytest: ``pytest --harness-model SPEC`` runs ``harness model check``'s
checks as tests, one test per check.

Installed with the harness, this plugin (entry point ``harness_model`` in the ``pytest11`` group; without it:
``pytest -p lanes.models.model_check.contract_plugin``, or ``pytest_plugins =
["lanes.models.model_check.contract_plugin"]`` in
the top conftest.py) adds to a session:

- ``--harness-model SPEC`` (repeatable): one test per check of each model, named
  ``harness-model[SPEC]::<check>``, beside the suite's own tests (``-k harness-model`` runs them alone). A check
  that fails fails its test with the check's line; a note (the harness serialises the model's calls) passes. A
  model that cannot be built fails every test of its spec with the one line ``harness model check`` prints;
- ``--harness-config PATH`` (the release configuration: ``[model] seed``, ``[corpus]``, ``[masks]``,
  ``[tolerances]``) and ``--harness-device DEVICE`` (default: the configuration's, cpu);
- the fixture ``check_harness_model``::

      def test_my_model_meets_the_contract(check_harness_model):
          check_harness_model("my_pkg.diar:make_model")  # fails with every check's line when one fails

The checks run once per model and session, whatever the number of tests reading them. Importing this plugin
costs nothing in a session that does not use it: the harness is imported when a check first runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from lanes.models.model_check.check_report import CHECKS, Status

if TYPE_CHECKING:
    from lanes.models.model_check.check_report import ModelCheckReport

_REPORTS: pytest.StashKey[dict[str, ModelCheckReport | str]] = pytest.StashKey()  # per spec: its check


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-model", "the harness's model contract (harness model check)")
    group.addoption(
        "--harness-model",
        action="append",
        default=[],
        metavar="SPEC",
        help="check this model against the contract, one test per check (full | small | package.module:factory"
        "[?key=value&...] | file.pt); repeatable",
    )
    group.addoption("--harness-config", default=None, metavar="PATH", help="release configuration (harness.toml)")
    group.addoption("--harness-device", default=None, metavar="DEVICE", help="where the model runs (default: cpu)")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for spec in config.getoption("harness_model") or ():
        for check in CHECKS:
            name = f"harness-model[{spec}]::{check}"
            items.append(ModelCheckItem.from_parent(session, name=name, nodeid=name, spec=spec, check=check))


class ModelCheckFailed(Exception):
    """A check's line (or the model's refusal), as the test's failure."""


class ModelCheckItem(pytest.Item):
    """One check of one model: passes when its line is ``ok`` or a ``note``."""

    def __init__(self, *, spec: str, check: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.check = spec, check

    def runtest(self) -> None:
        report = model_report(self.config, self.spec)
        if isinstance(report, str):
            raise ModelCheckFailed(report)
        line = report.line(self.check)
        if line is None:
            pytest.skip(f"{self.check}: not part of this model's check")
        if line.status in (Status.FAIL, Status.SKIP):
            raise ModelCheckFailed(line.render())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ModelCheckFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "harness-model", None, f"harness-model[{self.spec}]::{self.check}"


def model_report(config: pytest.Config, spec: str) -> ModelCheckReport | str:
    """The check of ``spec`` (run once per session), or the one line refusing the model."""
    reports = config.stash.setdefault(_REPORTS, {})
    if spec not in reports:
        reports[spec] = run_check(spec, config.getoption("harness_config"), config.getoption("harness_device"))
    found: ModelCheckReport | str = reports[spec]
    return found


def run_check(spec: str, config_path: str | None, device: str | None) -> ModelCheckReport | str:
    """``harness model check`` of ``spec`` (its report), or ``harness: error: ...`` when it cannot run."""
    # deferred, each: a pytest session without --harness-model imports nothing of the harness but this plugin
    from harness.base.errors import HarnessError  # deferred: see above
    from harness.release_config import Override, load_config  # deferred: see above
    from lanes.models.model_api import load_model  # deferred: see above
    from lanes.models.model_check.check import CheckOptions, run_model_check  # deferred: see above

    overrides = [Override("--harness-model", "model.spec", spec, repr(spec))]
    if device is not None:
        overrides.append(Override("--harness-device", "release.device", device, repr(device)))
    try:
        cfg = load_config(config_path, overrides)
        model = load_model(spec, seed=cfg.model.seed, device=cfg.release.device)
        return run_model_check(model, spec, cfg.numerics, CheckOptions.of(cfg))
    except HarnessError as exc:
        return f"harness: error: {exc}"


@pytest.fixture
def check_harness_model(request: pytest.FixtureRequest) -> Callable[..., ModelCheckReport]:
    """``check(spec, device=None)``: every check on the model; fails the test (every line) when one fails."""

    def check(spec: str, device: str | None = None) -> ModelCheckReport:
        report = run_check(spec, request.config.getoption("harness_config"), device)
        if isinstance(report, str):
            pytest.fail(report, pytrace=False)
        if not report.passed:
            pytest.fail("\n".join(report.render()), pytrace=False)
        return report

    return check
