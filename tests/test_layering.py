"""The layering of docs/design.md, checked on every import the code makes (module top and inside functions).

    harness/cli, harness/pipeline     composition: the only code that wires the packages together
        |            |          |
     reports/      lanes/     golden/   harness/ core, by noun: evidence/, ledger/, judging/, localisation/,
         \\           \\         /          |   throughput/, packers/, laws/, corpus/, capture/
          `-----------`-------`------> harness/data/ (blocks, outputs, schemas, tolerances, files)

Every rule is a prefix rule over folders (``LAYER_FOLDERS``): a module's layer is where it lies.

No package imports upward; golden only stores and loads (data layer only); reports render what
the gate produced (data layer, plus the ledger's and the checks' vocabulary); lanes run requests
(core, never golden or reports); the core never reaches lanes, golden or reports. No import cycle
at all, within a folder or across (a type living in the wrong file shows as one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "lanes", "golden", "reports")
# Each layer is a set of folders (prefix rules): a module's layer is the first folder that holds it.
LAYER_FOLDERS = (
    ("composition", ("harness.pipeline", "harness.cli")),  # the only code that wires the packages together
    ("base", ("harness.base",)),  # the ground floor: errors, file writes, output sets, workers; no data type
    ("host", ("harness.host",)),  # the machine and the process as they are: environment, torch's state, probes
    ("compute", ("harness.compute",)),  # the arithmetic of two answers: row differences, ULPs, top two
    ("data", ("harness.data",)),  # data types and the files that hold them
    ("lanes", ("lanes",)),
    ("golden", ("golden",)),
    ("reports", ("reports",)),
    ("core", ("harness",)),  # the rest of harness/: judges, scoring, promotion, packing, ...
)
# What each layer may import, besides itself (composition may import anything).
FLOORS = ("base", "host", "compute")  # below the data layer; every layer above may stand on them
MAY_USE = {
    "base": (),
    "host": ("base",),
    "compute": ("base",),
    "data": FLOORS,
    "core": ("data", *FLOORS),
    "lanes": ("data", "core", *FLOORS),
    "golden": ("data", *FLOORS),  # golden only stores and loads
    "reports": ("data", *FLOORS),  # reports render; they never judge or run
}
# Where a layer reaches into a module of another on purpose: each with why.
REACHES = {
    ("reports", "harness.ledger.promotion"): "the ledger's vocabulary",
    ("reports", "harness.judging.judges"): "the checks' one-line rendering, the noise floors' figures in words",
    ("reports", "harness.ledger.margins"): "the margins' trends over nights, computed in the core from the history",
    ("reports", "harness.evidence.kind_registry"): "every kind of evidence renders through one path: its section, its "
    "JUnit properties",
}
WHY = {
    "base": "the ground floor knows no data type",
    "host": "the host floor probes the machine and knows no data type",
    "compute": "the compute floor is arithmetic on arrays and knows no data type",
    "data": "the data layer sits on the ground floor only",
    "golden": "golden only stores and loads",
    "reports": "reports render; they never judge or run",
}


def layer(module: str) -> str:
    for name, folders in LAYER_FOLDERS:
        if within(module, folders):
            return name
    raise AssertionError(f"{module}: in no layer")


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
            named = {f"{node.module}.{a.name}" for a in node.names}
            found |= named
            if not all(_is_module(m) for m in named):  # `from pkg import submodule` names the submodule only
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = name.split(".")[: -node.level] if not path.name == "__init__.py" else name.split(".")
            found.add(".".join([*base, node.module or ""]).rstrip("."))
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def known(module: str, table: dict[str, Path]) -> str | None:
    """The project module an import names (an imported attribute resolves to its module)."""
    while module and module not in table:
        module = module.rpartition(".")[0]
    return module or None


def reaches(name: str, target: str) -> bool:
    return any((within(name, (src,)) and within(target, (dst,))) for src, dst in REACHES)


def violations() -> list[str]:
    table = modules()
    out = []
    for name, path in table.items():
        src = layer(name)
        if src == "composition":
            continue
        for target in sorted(imports(path, name)):
            target = known(target, table)
            if target is None or target == name or target == "harness":
                continue
            dst = layer(target)
            if dst == src or dst in MAY_USE[src] or reaches(name, target):
                continue
            why = f" ({WHY[src]})" if src in WHY else ""
            out.append(f"{'data layer' if src == 'data' else src} {name} imports {target}{why}")
    return out


def test_nothing_imports_upward():
    assert violations() == []


def test_the_check_sees_the_data_layer_reach_up():
    """Negative control: a data-layer module that imports core (packing) is caught."""
    fake = ROOT / "harness" / "data" / "_layering_probe_data.py"
    fake.write_text("from harness.packers.packing import pack\n")
    try:
        assert any(
            "data layer harness.data._layering_probe_data imports harness.packers.packing" in v for v in violations()
        )
    finally:
        fake.unlink()


def test_the_check_sees_the_ground_floor_reach_up():
    """Negative control: a ground-floor module that imports a data type is caught."""
    fake = ROOT / "harness" / "base" / "_layering_probe_base.py"
    fake.write_text("from harness.data.blocks import Block\n")
    try:
        assert any("base harness.base._layering_probe_base imports harness.data.blocks" in v for v in violations())
    finally:
        fake.unlink()


@pytest.mark.parametrize("floor", ["host", "compute"])
def test_the_check_sees_a_floor_reach_up(floor):
    """Negative control: a module of the host or compute floor that imports a data type is caught."""
    fake = ROOT / "harness" / floor / "_layering_probe_floor.py"
    fake.write_text("from harness.data.blocks import Block\n")
    try:
        assert any(
            f"{floor} harness.{floor}._layering_probe_floor imports harness.data.blocks" in v for v in violations()
        )
    finally:
        fake.unlink()


def test_the_check_sees_a_violation(tmp_path, monkeypatch):
    """Negative control: a golden module that runs the lanes is caught."""
    fake = ROOT / "golden" / "_layering_probe.py"
    fake.write_text("from lanes.running.runner import run_lanes\n")
    try:
        assert any("golden golden._layering_probe imports lanes.running.runner" in v for v in violations())
    finally:
        fake.unlink()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_400_lines(package):
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / package).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}


def layer_graph() -> dict[str, set[str]]:
    """Which layer imports which (for docs/design.md and the closing note); the declared reaches
    (``REACHES``, each with its reason) are left out: they are the exceptions, not the layering."""
    table = modules()
    graph: dict[str, set[str]] = {}
    for name, path in table.items():
        for target in imports(path, name):
            target = known(target, table)
            if target is None or target == "harness" or reaches(name, target):
                continue
            if layer(target) != layer(name):
                graph.setdefault(layer(name), set()).add(layer(target))
    return graph


def test_layer_graph_is_acyclic():
    graph = layer_graph()
    assert "composition" not in {d for ds in graph.values() for d in ds}
    for src, dsts in graph.items():
        for dst in dsts:
            assert src not in graph.get(dst, set()), f"{src} <-> {dst}"


def test_every_data_layer_module_lives_in_its_folder():
    """The data layer is a folder, not a list: a module is in it by where it lies."""
    table = modules()
    assert {n for n in table if layer(n) == "data"} == {n for n in table if n.startswith("harness.data")}
    assert "harness.data.schemas.results" in table


def module_graph() -> dict[str, set[str]]:
    """Which project module imports which (module top and inside functions)."""
    table = modules()
    graph: dict[str, set[str]] = {name: set() for name in table}
    for name, path in table.items():
        for target in imports(path, name):
            found = known(target, table)
            if found is not None and found not in (name, "harness"):
                graph[name].add(found)
    return graph


def folder_of(module: str) -> str:
    """A module's folder: a package's ``__init__`` is its own folder's."""
    return module if (ROOT / module.replace(".", "/") / "__init__.py").is_file() else module.rpartition(".")[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def folder_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every import cycle that joins modules of different folders, in one line each."""
    return [
        f"{', '.join(c)} import each other across folders {sorted({folder_of(m) for m in c})}: a type or a "
        "function lives in the wrong file (move it where both can import it)"
        for c in cycles(graph)
        if len({folder_of(m) for m in c}) > 1
    ]


def test_no_cycle_joins_files_of_different_folders():
    assert folder_cycles(module_graph()) == []


def test_no_cycle_at_all():
    """No two modules import each other, directly or around a circle, within a folder either (a type-only import
    counts: a type both sides need lives where both can import it; the command tree imports the command modules,
    which import the app, never back)."""
    found = cycles(module_graph())
    assert found == [], "\n".join(
        f"{', '.join(c)} import each other: move what both need where both can import it" for c in found
    )


def test_the_cycle_check_sees_a_cycle_within_a_folder_and_a_package_import():
    """Negative controls: a cycle within one folder, and one through a package's ``__init__``, are cycles; a
    ``from package import submodule`` names the submodule, not the package."""
    assert cycles({"lanes.a": {"lanes.b"}, "lanes.b": {"lanes.a"}}) == [["lanes.a", "lanes.b"]]
    assert cycles({"harness.packers": {"harness.packers.x"}, "harness.packers.x": {"harness.packers"}}) != []
    graph = module_graph()
    assert "harness.judging.judges.rowkeys" in graph["harness.judging.judges.voiceprint_evidence"]
    assert "harness.judging.judges" not in graph["harness.judging.judges.voiceprint_evidence"]
    assert "harness.judging.judges.voiceprint_judge" in graph["harness.judging.judges"]


def test_the_cycle_check_sees_a_cycle_across_folders():
    """Negative control: a cycle through two folders is caught, one within a folder is not."""
    graph = {
        "harness.ledger.a": {"harness.evidence.b"},
        "harness.evidence.b": {"harness.ledger.a"},
        "harness.ledger.c": {"harness.ledger.d"},
        "harness.ledger.d": {"harness.ledger.c"},
    }
    found = folder_cycles(graph)
    assert len(found) == 1 and found[0].startswith("harness.evidence.b, harness.ledger.a import each other"), found


def uncommented_inner_imports(source: str, where: str) -> list[str]:
    """Every import of a project module inside a function whose first line carries no comment saying why it is
    deferred (start-up: torch, pyarrow, jinja2, hypothesis, a plug-in registry...)."""
    lines = source.splitlines()
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                project = node.module.split(".")[0] in PACKAGES
            elif isinstance(node, ast.Import):
                project = any(a.name.split(".")[0] in PACKAGES for a in node.names)
            else:
                continue
            if project and "#" not in lines[node.lineno - 1]:
                out.append(f"{where}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return out


def test_every_import_inside_a_function_says_why():
    """An import inside a function is left only where it buys start-up time, and says so; any other belongs at
    the top of its module (a cycle it would dodge is a type living in the wrong file: see the cycle check)."""
    found = [
        line
        for name, path in modules().items()
        if "model_repository" not in path.parts
        for line in uncommented_inner_imports(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == [], f"{len(found)} import(s) inside functions say not why they are deferred:\n" + "\n".join(found)


def test_the_deferred_import_check_sees_a_silent_one():
    """Negative control: an uncommented import of a project module inside a function is reported; a commented
    one, and one of another package, are not."""
    source = (
        "def f():\n    from harness.data import ops\n\n"
        "def g():\n    from harness.data import ops  # deferred: why\n    import json\n"
    )
    assert uncommented_inner_imports(source, "x.py") == ["x.py:2: from harness.data import ops"]


# An old import path kept as a re-export of the module that moved, each with why.
KEPT_IMPORT_PATHS = {
    "harness.data.errors": "the reference packer imports PackingError from it; its identity is its source's sha256",
}


def stem_collisions(table: dict[str, Path]) -> list[str]:
    """Modules of the same stem in different places, unless one is the others' face and says so (its docstring
    names them): a command group's module (``harness.pipeline.commands``) first, else the pipeline's or the CLI's."""
    by_stem: dict[str, list[str]] = {}
    for name, path in table.items():
        if path.name not in ("__init__.py", "__main__.py") and "model_repository" not in path.parts:
            by_stem.setdefault(path.stem, []).append(name)
    out = []
    for stem, names in sorted(by_stem.items()):
        if len(names) < 2:
            continue
        names = [n for n in names if n not in KEPT_IMPORT_PATHS]
        if len(names) < 2:
            continue
        faces = [n for n in names if within(n, ("harness.pipeline.commands",))]  # a command group's module first
        faces = faces or [n for n in names if within(n, ("harness.pipeline", "harness.cli"))]
        others = [n for n in names if n not in faces]
        said = len(faces) == 1 and all(
            o in (ast.get_docstring(ast.parse(table[faces[0]].read_text())) or "") for o in others
        )
        if not said:
            out.append(f"{stem}: {', '.join(sorted(names))} (rename one, or let the pipeline face name the other)")
    return out


def test_no_two_modules_share_a_stem_unless_one_is_the_others_face():
    assert stem_collisions(modules()) == []


def test_a_kept_import_path_only_re_exports():
    """A kept path holds no code of its own: imports from the moved module and ``__all__``, nothing else."""
    table = modules()
    for name in KEPT_IMPORT_PATHS:
        body = ast.parse(table[name].read_text()).body
        assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), f"{name}: no docstring"
        for node in body[1:]:
            ok = isinstance(node, ast.ImportFrom) or (
                isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]
            )
            assert ok, f"{name}:{node.lineno}: a kept import path holds code of its own"


def test_the_stem_check_sees_a_collision(tmp_path):
    """Negative control: two core modules of one stem are reported; a pipeline face naming its schema is not."""
    for rel, doc in (
        ("harness/a/store.py", "x"),
        ("golden/store.py", "y"),
        ("harness/data/schemas/audit.py", "x"),
        ("harness/pipeline/audit.py", "harness.data.schemas.audit"),
    ):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""{doc}"""\n')
    table = {
        ".".join(Path(rel).with_suffix("").parts): tmp_path / rel
        for rel in (
            "harness/a/store.py",
            "golden/store.py",
            "harness/data/schemas/audit.py",
            "harness/pipeline/audit.py",
        )
    }
    assert stem_collisions(table) == [
        "store: golden.store, harness.a.store (rename one, or let the pipeline face name the other)"
    ]
