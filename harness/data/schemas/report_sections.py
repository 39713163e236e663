"""The sign-off report's sections beside its shapes (report.json): the margins over nights, the load sweep,
the repeats, the arrangements and the module errors, each a typed table with its rows."""

from __future__ import annotations

from harness.data.schemas.base import Count, Number, Open
from harness.data.schemas.files import Floor
from harness.data.schemas.load import BudgetPick
from harness.data.schemas.localisation import ModuleError


class MarginSettings(Open):
    """The margin section's settings ([history]): nights shown, what counts as shrinking or near the limit."""

    nights: Count
    shrink_factor: Number
    near_limit: Number
    fail_on_warning: bool


class MarginPoint(Open):
    """One night's margin of a series."""

    seq: int
    created: str
    margin: Number | None


class MarginTrend(Open):
    """One (shape, OP, metric)'s margin to its limit over nights."""

    shape: int
    op: int
    metric: str
    first: Number | None
    last: Number | None
    max: Number | None
    growth: Number | None
    shrank: bool | None
    near: bool | None
    warning: str | None
    points: list[MarginPoint]


class MarginFacts(Open):
    """The margins over nights."""

    nights: Count
    first_night: bool
    settings: MarginSettings
    warnings: list[str]
    ops: list[int]
    trends: list[MarginTrend]
    undefined_series: Count


class LoadRow(Open):
    """One point of the concurrency sweep."""

    shape: int
    concurrency: Count
    p50_ms: Number
    p99_ms: Number
    blocks_per_s: Number
    accurate: bool
    within_budget: bool
    reasons: list[str]
    why: str


class LoadFacts(Open):
    """The concurrency sweep's points and budget."""

    url: str | None
    model_name: str | None
    blocks: Count
    concurrency: list[int]
    p99_budget_ms: Number | None
    points: list[LoadRow]
    budget: BudgetPick | None
    budget_line: str


class RepeatRow(Open):
    """One (shape, OP)'s own noise over repeated runs, against the release's floor."""

    shape: int
    op: int
    repeats: Count
    lanes: list[str]
    tolerance_mode: str
    gated: bool
    refused: bool
    blocks: Count
    blocks_differing: Count
    units: Count
    units_differing: Count
    noise: Floor
    release_floor: Floor | None
    as_reproducible_as_release: bool
    sentence: str


class RepeatFacts(Open):
    """Each repeated (shape, OP)'s own noise, and the warnings of those not as reproducible as the release."""

    rows: list[RepeatRow]
    warnings: list[str]


class ArrangementRow(Open):
    """One (shape, OP)'s metric over its arrangements: spread, slots, duplicates."""

    shape: int
    op: int
    arrangements: Count
    seed: int
    lanes: list[str]
    metric: str
    within_tolerance: bool
    passed: bool


class SlotRow(Open):
    """One slot of one (shape, OP): how many units differed there, and by how much."""

    shape: int
    op: int
    slot: str
    label: str
    placements: Count
    units: Count
    differing: Count
    max_abs: Number | None
    max_ulp: int | None
    worst: bool


class ArrangementFacts(Open):
    """Every shape in other arrangements: each (shape, OP)'s spread, its slots, and why one was refused."""

    rows: list[ArrangementRow]
    slots: list[SlotRow]
    reasons: list[str]


class ModuleErrorLine(Open):
    """One failing (shape, OP)'s error per module against the noise floor."""

    shape: int
    op: int
    block: str | None
    first_diverging_layer: str | None
    first_exceeding: str | None
    modules: list[ModuleError]


class ModuleErrorFacts(Open):
    """Per failing (shape, OP): error / noise floor per module, and the OPs shown."""

    lines: list[ModuleErrorLine]
    ops: list[int]
