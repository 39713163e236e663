"""The packing laws as a reusable kit: judge any packer, in this repo or another project's tests.

    from harness.laws import check_packer
    report = check_packer(my_packer, examples=100, seed=0)   # my_packer: a harness.packers.packing.Packer
    assert report.ok, report.render()

- :data:`LAWS` — the laws (:mod:`harness.laws.laws`, registered in :mod:`harness.laws.registry`), each
  a function ``law(packer, blocks, **params)`` raising :class:`LawBroken` with what differed;
- :mod:`harness.laws.strategies` — the hypothesis strategies (``blocks``, ``block_lists``, ``LAW_GEOMETRY``);
- :func:`check_packer` — every law on fixed boundary examples (:mod:`harness.laws.boundary`: up to
  ``max_blocks`` blocks, 64 by default, and ``pad_to`` there), then with hypothesis, deterministic,
  broken laws shrunk to a minimal example: a :class:`LawsReport` (``ok``, ``render()``, ``to_dict()``);
- :mod:`harness.laws.law_controls` — two known-bad packers (off-by-one rebase, window into the next
  block): negative controls the laws must catch;
- :mod:`harness.laws.pytest_plugin` — pytest integration (the ``check_packer_laws`` fixture and
  the :class:`~harness.laws.pytest_plugin.PackerLawTests` mixin: one test per law).

``harness laws`` runs :func:`check_packer` on the harness's packer, an external one
(``--packer-cmd``, docs/packer-protocol.md) or a Python callable (``--packer module:function``).
"""

from harness.laws.boundary import DEFAULT_MAX_BLOCKS
from harness.laws.law_runner import check_packer, run_law
from harness.laws.law_tools import LawBroken, NotJudged, model_fn, window_fn
from harness.laws.laws_report import BROKEN, HELD, NOT_JUDGED, Counterexample, LawOutcome, LawsReport
from harness.laws.registry import LAWS, LAWS_BY_NAME, Law
from harness.laws.strategies import LAW_GEOMETRY, block_lists, blocks

__all__ = [
    "BROKEN",
    "DEFAULT_MAX_BLOCKS",
    "HELD",
    "LAWS",
    "LAWS_BY_NAME",
    "LAW_GEOMETRY",
    "NOT_JUDGED",
    "Counterexample",
    "Law",
    "LawBroken",
    "LawOutcome",
    "LawsReport",
    "NotJudged",
    "block_lists",
    "blocks",
    "check_packer",
    "model_fn",
    "run_law",
    "window_fn",
]
