"""The sign-off report's "Where the error grows" section: per-module error / noise floor along the network.

Localisation (``harness.localisation.first_divergence``, run by the nightly on failing shapes) writes, per failing
(shape, OP), every module compared in execution order with its error, its floor and their ratio, and the
first module whose ratio exceeds ``floor_multiple``. Here it is only rendered: the facts report.json
and the pages read, and one plot per OP of error / floor against module, on a log axis, one line per
failing shape, the multiple dashed and each line's first exceeding module circled. The section exists
only when a localisation measured modules: a report without it is the same file as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from harness.data.schemas.localisation import LocalisedOp, ModuleError
from reports.plots import _SERIES_COLOURS, FAIL_COLOUR, WIDTH, _Svg

FLOOR_RATIO = 0.1  # ratios below (0 included: bitwise) are drawn on the axis's floor, labelled so


@dataclass(frozen=True)
class ModuleErrorLine:
    """One failing (shape, OP) localised per module: its block, the first module over ``floor_multiple`` x its
    floor and the first that differed at all, where the floors came from, and every module's error."""

    shape: int
    op: int
    block: str | None
    first_diverging_layer: str | None
    first_exceeding: str | None
    floor_multiple: float | None
    floor_source: str | None
    floor_note: str | None
    modules: list[ModuleError]


@dataclass(frozen=True)
class ModuleErrors:
    """The section (report.json's ``module_errors``): one line per localised (shape, OP), and the OPs that have
    one (a plot each)."""

    lines: list[ModuleErrorLine]
    ops: list[int]


def module_error_facts(localisation: Mapping[str, Mapping[str, Mapping[str, Any]]] | None) -> ModuleErrors | None:
    """The section (None when no localisation measured modules): one line per (shape, OP). Each localised OP is
    read as the localisation file's ``LocalisedOp``."""
    lines = []
    for k, ops in sorted((localisation or {}).items(), key=lambda item: int(item[0])):
        for op, written in sorted(ops.items()):
            loc = LocalisedOp.model_validate(written)
            if not loc.available or not loc.modules:
                continue
            lines.append(
                ModuleErrorLine(
                    shape=int(k),
                    op=int(op),
                    block=loc.block,
                    first_diverging_layer=loc.first_diverging_layer,
                    first_exceeding=loc.first_exceeding,
                    floor_multiple=loc.floor_multiple,
                    floor_source=loc.floor_source,
                    floor_note=loc.floor_note,
                    modules=list(loc.modules),
                )
            )
    if not lines:
        return None
    return ModuleErrors(lines, sorted({line.op for line in lines}))


def module_error_images(facts: ModuleErrors) -> dict[str, Markup]:
    """One inline SVG per OP: "module_errors_<op>"."""
    return {
        f"module_errors_{op}": Markup(_svg(op, [line for line in facts.lines if line.op == op])) for op in facts.ops
    }


def _svg(op: int, lines: list[ModuleErrorLine]) -> str:
    names: list[str] = []
    for line in lines:  # execution order of the first line; a module only another line has goes after
        names += [m.module for m in line.modules if m.module not in names]
    multiple = float(lines[0].floor_multiple or 1.0)
    ratios = [float(m.ratio) for line in lines for m in line.modules]
    top = 10 ** math.ceil(math.log10(max([multiple * 10, *ratios])))
    x0, x1, y_top, y_bottom = 56, WIDTH - 16, 28, 200
    label_height = 8 + 5 * max(len(_short(n)) for n in names)
    height = int(y_bottom + label_height + 16 + 12 * len(lines))
    svg = _Svg(WIDTH, height, f"OP {op} error / noise floor per module")
    svg.text(WIDTH / 2, 14, f"OP {op}: error / noise floor per module, in execution order (log)", size=11)
    lo, hi = math.log10(FLOOR_RATIO), math.log10(top)

    def y(ratio: float) -> float:
        r = math.log10(max(ratio, FLOOR_RATIO))
        return y_bottom - (r - lo) / (hi - lo) * (y_bottom - y_top)

    def x(i: int) -> float:
        return x0 + (i + 0.5) / len(names) * (x1 - x0)

    svg.line(x0, y_top, x0, y_bottom)
    svg.line(x0, y_bottom, x1, y_bottom)
    for exp in range(int(lo), int(hi) + 1):
        svg.line(x0 - 3, y(10.0**exp), x1, y(10.0**exp), colour="#eaeef2")
        svg.text(
            x0 - 5, y(10.0**exp) + 3, f"<= {FLOOR_RATIO:g}" if exp == int(lo) else f"1e{exp}", size=8, anchor="end"
        )
    svg.line(x0, y(multiple), x1, y(multiple), colour=FAIL_COLOUR, dash=True)
    svg.text(x1, y(multiple) - 3, f"{multiple:g} x floor", size=8, anchor="end")
    for i, name in enumerate(names):
        svg.text(x(i) + 3, y_bottom + 6, _short(name), size=7, anchor="end", rotate=True)
    index = {n: i for i, n in enumerate(names)}
    for j, line in enumerate(lines):
        colour = _SERIES_COLOURS[j % len(_SERIES_COLOURS)]
        points = [(x(index[m.module]), y(float(m.ratio))) for m in line.modules]
        svg.add(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="'
            + " ".join(f"{a:.1f},{b:.1f}" for a, b in points)
            + '"/>'
        )
        first = line.first_exceeding
        if first in index:
            svg.add(
                f'<circle cx="{x(index[first]):.1f}" cy="{y(_ratio(line, first)):.1f}" r="4" fill="none" '
                f'stroke="{FAIL_COLOUR}" stroke-width="1.5"/>'
            )
        label = f"k={line.shape}: first over {multiple:g} x floor: {first or 'none'}"
        svg.text(x0, y_bottom + label_height + 16 + 12 * j, label, size=9, anchor="start", colour=colour)
    return svg.done()


def _ratio(line: ModuleErrorLine, module: str) -> float:
    return float(next(m.ratio for m in line.modules if m.module == module))


def _short(name: str) -> str:
    """An axis label: the network's name dropped, at most 28 characters (the table has the full name)."""
    label = name.split(" ", 1)[1] if name.startswith(("segmentation <", "voiceprint <")) else name
    label = label.split(".", 1)[1] if "." in label and not label.startswith("<") else label
    return label if len(label) <= 28 else "..." + label[-25:]
