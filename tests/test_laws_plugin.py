"""The kit from another project's pytest: a separate pytest run, in another folder, judging packers
with the `check_packer_laws` fixture (the plugin's entry point) and the PackerLawTests mixin."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

THEIR_TESTS = textwrap.dedent("""
    import sys

    from harness.laws import LAW_GEOMETRY
    from harness.laws.pytest_plugin import PackerLawTests
    from harness.packers import CallablePacker, ExternalPacker

    ENGINE = f"{sys.executable} {EXAMPLES}/packer_engine_example.py"
    DEFECTIVE = f"{sys.executable} {EXAMPLES}/packer_engine_defective.py"


    class TestEnginePacker(PackerLawTests):
        examples = 15

        def make_packer(self):
            return ExternalPacker(ENGINE, LAW_GEOMETRY)


    class TestDefectiveEnginePacker(PackerLawTests):
        examples = 40

        def make_packer(self):
            return ExternalPacker(DEFECTIVE, LAW_GEOMETRY)


    def test_fixture_passes_a_good_packer(check_packer_laws):
        report = check_packer_laws(CallablePacker("harness.packers.packing:pack", LAW_GEOMETRY))
        assert report.ok and report.examples == 12


    def test_fixture_fails_a_bad_packer(check_packer_laws):
        check_packer_laws(CallablePacker("harness.laws.law_controls:leaky_packer", LAW_GEOMETRY))
""")


def test_another_projects_pytest_judges_its_packers_with_the_kit(tmp_path):
    (tmp_path / "test_their_packer.py").write_text(THEIR_TESTS.replace("{EXAMPLES}", str(ROOT / "examples")))
    (tmp_path / "pytest.ini").write_text("[pytest]\npacker_laws_examples = 12\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr  # 1: tests failed (not 2-4: a usage or plugin error)
    failed = {line.split("::")[-1].split(" ")[0] for line in out.splitlines() if line.startswith("FAILED")}
    for law in ("well-formed", "round-trip", "own-samples", "rebased-inside", "per-window-function", "associative"):
        assert f"test_packing_law[{law}]" in failed, out
    assert "test_fixture_fails_a_bad_packer" in failed
    assert not any("TestEnginePacker" in line for line in out.splitlines() if line.startswith("FAILED")), out
    assert "test_fixture_passes_a_good_packer" not in failed
    # the failure says what to fix: the law, the minimal blocks, the request, what differed
    for words in ("law own-samples BROKEN", "minimal block set:", "request the packer produced:", "what differed:"):
        assert words in out, words
    passed = int(out.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 8 + 1  # every law of the good engine packer, and the fixture on the good packer
