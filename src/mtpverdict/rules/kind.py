"""The shape of a rule kind: typed parameters, an evaluation that returns numbers, its sentence apart.

A rule kind is one module under rules/kinds/ holding one `RuleKind` subclass: `params_type` (a msgspec
Struct whose fields are the policy keys the kind accepts, with their types, bounds and defaults),
`evaluate` (reads the Evidence for one arm and returns a `Finding` of numbers), `render` (turns a
finding into the sentence the decision states) and, when parameters can contradict each other,
`contradictions`. The registry (rules/registry.py) lists every kind; the policy reader derives the
allowed keys from it, and a test walks it so a half-added kind fails loudly.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from msgspec import Struct

from mtpverdict._text import cell_label, fmt, pct
from mtpverdict.formats._check import Located
from mtpverdict.formats.decision import RuleStatus, Threshold
from mtpverdict.formats.results import Arm
from mtpverdict.stats.procedure import CellComparison, VarianceMethod

if TYPE_CHECKING:
    from mtpverdict.evidence.model import Evidence

__all__ = [
    "Finding",
    "RuleKind",
    "cell_label",
    "comparison_text",
    "design_cells",
    "fmt",
    "pct",
    "selected_cells",
]

P = TypeVar("P", bound=Struct)
F = TypeVar("F", bound="Finding")

Number = int | float


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule found for one arm: its status, the number it judged and the bar it used.

    Kinds subclass it to carry the numbers their sentence states; tests assert on those numbers.
    """

    status: RuleStatus
    value: Number | None
    threshold: Threshold


class RuleKind(ABC, Generic[P, F]):
    """One rule kind. Subclasses set `name`, `params_type`, `summary` and implement evaluate and render."""

    name: ClassVar[str]
    params_type: ClassVar[type[Struct]]
    summary: ClassVar[str]  # one line for docs/rules-format.md
    reported_for_controls: ClassVar[bool] = False  # also evaluated (and reported) for control arms

    @abstractmethod
    def evaluate(self, evidence: Evidence, arm: Arm, params: P) -> F:
        """Read the evidence for one arm; return numbers, never prose."""

    @abstractmethod
    def render(self, finding: F, arm: Arm) -> str:
        """The sentence stating a finding."""

    def contradictions(self, params: P) -> list[Located]:
        """Parameter combinations that cannot be meant (key or None, message); none by default."""
        return []


# ---------------------------------------------------------------------------------------------------
# helpers shared by the kinds


def selected_cells(
    evidence: Evidence,
    arm: str,
    metric: str,
    workloads: tuple[str, ...] | None,
    concurrency: tuple[int, ...] | None,
) -> list[tuple[str, int]]:
    """The (workload, concurrency) cells an arm measured for a metric, narrowed to a rule's selectors."""
    keys = sorted({(c.workload, c.concurrency) for c in evidence.arm_cells(arm, metric)})
    return [
        (w, c)
        for w, c in keys
        if (workloads is None or w in workloads) and (concurrency is None or c in concurrency)
    ]


def design_cells(
    evidence: Evidence,
    arm: Arm,
    metric: str,
    workloads: tuple[str, ...] | None,
    concurrency: tuple[int, ...] | None,
) -> tuple[tuple[str, int], ...]:
    """The cells of the arm's family design for a metric, narrowed to a rule's selectors.

    The design is every cell the campaign declares (or any arm of the family measured), so a cell
    this arm did not measure stays in and counts as missing for it.
    """
    run = evidence.run(arm.family, metric)
    cells = () if run is None else run.cells
    return tuple(
        (w, c)
        for w, c in cells
        if (workloads is None or w in workloads) and (concurrency is None or c in concurrency)
    )


def comparison_text(comp: CellComparison, metric: str) -> str:
    """A cell comparison as a rule states it: estimate, interval, the variance used and the floor."""
    if comp.variance is VarianceMethod.ASSUMED:
        return f"{pct(comp.estimate)} {metric} (point estimate; floor assumed {pct(comp.floor_first)})"
    if not math.isfinite(comp.ci_low):
        return f"{pct(comp.estimate)} {metric} (no interval: {comp.variance_reason})"
    label = (
        "within-boot" if comp.variance is VarianceMethod.WITHIN_BOOT else f"{comp.variance}, df {comp.df:.1f}"
    )
    return (
        f"{pct(comp.estimate)} {metric} [90% CI {pct(comp.ci_low)}, {pct(comp.ci_high)}] "
        f"({label}; floor {pct(comp.floor_first)})"
    )
