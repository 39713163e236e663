"""The packing laws in another project's pytest: judge your own packer with the harness's laws.

Installed with the harness, this plugin (entry point ``harness_laws`` in the ``pytest11`` group)
gives every test session the fixture ``check_packer_laws``::

    def test_my_packer_obeys_the_packing_laws(check_packer_laws):
        check_packer_laws(MyPacker(), examples=100, max_blocks=64)  # fails with the report

(without the entry point: ``pytest_plugins = ["harness.laws.pytest_plugin"]`` in your top conftest.py),
and the mixin :class:`PackerLawTests`, one test per law::

    from harness.laws.pytest_plugin import PackerLawTests

    class TestMyPacker(PackerLawTests):
        examples = 50

        def make_packer(self):
            return MyPacker()  # any harness.packers.packing.Packer, e.g. ExternalPacker("my-engine --pack", ...)

ini options: ``packer_laws_examples`` (default 100) and ``packer_laws_seed`` (default 0) for the fixture.
Both are deterministic: the same seed gives the same examples and the same minimal counterexample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from harness.laws.boundary import DEFAULT_MAX_BLOCKS
from harness.laws.law_runner import check_packer, run_law
from harness.laws.laws_report import BROKEN, LawOutcome, LawsReport, render_broken
from harness.laws.registry import LAWS, LAWS_BY_NAME
from harness.packers.packing import Packer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("packer_laws_examples", "examples per law of the check_packer_laws fixture", default="100")
    parser.addini("packer_laws_seed", "seed of the check_packer_laws fixture's example search", default="0")


@pytest.fixture
def check_packer_laws(request: pytest.FixtureRequest) -> Callable[..., LawsReport]:
    """``check(packer, examples=None, seed=None)``: judge ``packer`` on every law; fail the test if one breaks."""
    default_examples = int(request.config.getini("packer_laws_examples"))
    default_seed = int(request.config.getini("packer_laws_seed"))

    def check(
        packer: Packer, examples: int | None = None, seed: int | None = None, max_blocks: int = DEFAULT_MAX_BLOCKS
    ) -> LawsReport:
        report = check_packer(
            packer,
            examples=examples or default_examples,
            seed=default_seed if seed is None else seed,
            max_blocks=max_blocks,
        )
        if not report.ok:
            pytest.fail(report.render(), pytrace=False)
        return report

    return check


def render_outcome(outcome: LawOutcome) -> str:
    if outcome.status == BROKEN:
        return "\n".join(render_broken(outcome))
    return (
        f"law {outcome.law} not judged: held on {outcome.judged} example(s), {outcome.skipped} could not be "
        "judged (a law not judged on every example is a failure)"
    )


class PackerLawTests:
    """Mixin: subclass it (as ``Test...``), define :meth:`make_packer`, get one test per law."""

    examples = 100
    seed = 0
    max_blocks = DEFAULT_MAX_BLOCKS  # the largest candidate k of your engine: every law is judged there

    def make_packer(self) -> Packer:
        """The packer to judge (closed after the class's tests); subclasses must define it."""
        raise NotImplementedError(f"{type(self).__name__} must define make_packer()")

    @pytest.fixture(scope="class")
    @classmethod
    def packer_under_laws(cls) -> Iterator[Packer]:
        """One packer (one external process) for all the laws of the class."""
        packer = cls().make_packer()
        try:
            yield packer
        finally:
            packer.close()

    @pytest.mark.parametrize("law_name", [law.name for law in LAWS])
    def test_packing_law(self, packer_under_laws: Packer, law_name: str) -> None:
        outcome = run_law(packer_under_laws, LAWS_BY_NAME[law_name], self.examples, self.seed, self.max_blocks)
        if not outcome.ok:
            pytest.fail(render_outcome(outcome), pytrace=False)
