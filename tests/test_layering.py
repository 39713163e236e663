"""The layering of docs/design.md, checked on every import the code makes (module top and inside functions).

    harness.cli, harness.pipeline     composition: the only code that wires the packages together
        |            |          |
     reports       lanes      golden    harness core (judges, scoring, promotion, packing, ...)
         \\           \\         /          |
          `-----------`-------`------> harness data layer (blocks, outputs, schemas, files)

No package imports upward; golden only stores and loads (data layer only); reports render what
the gate produced (data layer, plus the ledger's and the checks' vocabulary); lanes run requests
(core, never golden or reports); the core never reaches lanes, golden or reports.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "lanes", "golden", "reports")
COMPOSITION = ("harness.pipeline", "harness.cli")
# What every package may use: data types and the files that hold them.
DATA_LAYER = ("harness.errors", "harness.fsio", "harness.jsonio", "harness.schemas", "harness.parquet",
              "harness.geometry", "harness.ops", "harness.blocks", "harness.outputs", "harness.masks",
              "harness.metrics", "harness.corpus.schema", "harness.environment", "harness.isolation",
              "harness.overlap", "harness.metrics_kernels")
# Where the data layer reaches up, on purpose: each with why.
DATA_LAYER_REACHES = {
    ("harness.schemas.results", "harness.tolerances"): "a score's tolerances are the judges' own models (a new "
                                                       "metric touches one module)",
    ("harness.schemas.docs", "harness.config"): "the generated docs include the configuration's table",
}
# golden stores and loads: the data layer only
GOLDEN_MAY_USE = DATA_LAYER
# reports render: the data layer, the ledger's vocabulary and the checks' one-line rendering
REPORTS_MAY_USE = (*DATA_LAYER, "harness.promotion", "harness.judges.base")


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "model_repository" in path.parts:  # a Triton model file, run by the server's stub
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports(path: Path, name: str) -> set[str]:
    """Every project module ``path`` imports, at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = name.split(".")[: -node.level] if not path.name == "__init__.py" else name.split(".")
            found.add(".".join([*base, node.module or ""]).rstrip("."))
    return {m for m in found if m.split(".")[0] in PACKAGES}


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def known(module: str, table: dict[str, Path]) -> str | None:
    """The project module an import names (an imported attribute resolves to its module)."""
    while module and module not in table:
        module = module.rpartition(".")[0]
    return module or None


def violations() -> list[str]:
    table = modules()
    out = []
    for name, path in table.items():
        for target in sorted(imports(path, name)):
            target = known(target, table)
            if target is None or target == name:
                continue
            package = target.split(".")[0]
            if within(name, COMPOSITION):
                continue
            if within(name, DATA_LAYER):
                if target != "harness" and not within(target, DATA_LAYER) and (name, target) not in DATA_LAYER_REACHES:
                    out.append(f"data layer {name} imports {target} (the data layer sits at the bottom)")
            elif name.startswith("harness.") or name == "harness":
                if package != "harness" or within(target, COMPOSITION):
                    out.append(f"core {name} imports {target}")
            elif name.startswith("lanes"):
                if package in ("golden", "reports") or within(target, COMPOSITION):
                    out.append(f"lanes {name} imports {target}")
            elif name.startswith("golden"):
                if package != "golden" and not within(target, GOLDEN_MAY_USE):
                    out.append(f"golden {name} imports {target} (golden only stores and loads)")
            elif name.startswith("reports"):
                if package != "reports" and not within(target, REPORTS_MAY_USE):
                    out.append(f"reports {name} imports {target} (reports render; they never judge or run)")
    return out


def test_nothing_imports_upward():
    assert violations() == []


def test_the_check_sees_the_data_layer_reach_up(monkeypatch):
    """Negative control: a data-layer module that imports core (packing) is caught."""
    table = modules()
    fake = ROOT / "harness" / "_layering_probe_data.py"
    fake.write_text("from harness.packing import pack\n")
    monkeypatch.setattr(sys.modules[__name__], "DATA_LAYER", (*DATA_LAYER, "harness._layering_probe_data"))
    try:
        assert "harness._layering_probe_data" not in table
        assert any("data layer harness._layering_probe_data imports harness.packing" in v for v in violations())
    finally:
        fake.unlink()


def test_the_check_sees_a_violation(tmp_path, monkeypatch):
    """Negative control: a golden module that runs the lanes is caught."""
    fake = ROOT / "golden" / "_layering_probe.py"
    fake.write_text("from lanes.runner import run_lanes\n")
    try:
        assert any("golden golden._layering_probe imports lanes.runner" in v for v in violations())
    finally:
        fake.unlink()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_400_lines(package):
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def package_graph() -> dict[str, set[str]]:
    """Which package imports which (for docs/design.md and the closing note)."""
    table = modules()
    graph: dict[str, set[str]] = {}
    for name, path in table.items():
        src = "harness (composition)" if within(name, COMPOSITION) else name.split(".")[0]
        for target in imports(path, name):
            target = known(target, table)
            if target is None:
                continue
            dst = "harness (composition)" if within(target, COMPOSITION) else target.split(".")[0]
            if dst != src:
                graph.setdefault(src, set()).add(dst)
    return graph


def test_package_graph_is_acyclic():
    graph = package_graph()
    assert "harness (composition)" not in {d for ds in graph.values() for d in ds}
    for src, dsts in graph.items():
        for dst in dsts:
            assert src not in graph.get(dst, set()), f"{src} <-> {dst}"
