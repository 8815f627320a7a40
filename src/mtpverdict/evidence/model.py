"""The Evidence a policy's rules read: typed values computed once from a results directory.

Rules never see tables: every accessor here returns frozen values keyed by arm, workload, concurrency
and metric. The tables the values were computed from stay with the evidence layer (`Tables`), for the
controls and the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mtpverdict.evidence.comparisons import BootValues, FamilyRun, run_family
from mtpverdict.evidence.latency import Latencies
from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results import Campaign
from mtpverdict.stats.acceptance import ArmAcceptance
from mtpverdict.stats.breakeven import BreakEven
from mtpverdict.stats.capacity import KvCeiling
from mtpverdict.stats.missingness import MissingRow, Refusal
from mtpverdict.stats.procedure import ArchivedVariance, ArmOutcome, CellComparison
from mtpverdict.stats.runs import CellSummary

if TYPE_CHECKING:
    import pandas as pd

    from mtpverdict.formats.results_io import Results

CellKey = tuple[str, str, int, str]  # (arm, workload, concurrency, metric)
Cell = tuple[str, int]  # (workload, concurrency)


@dataclass(frozen=True, slots=True)
class FamilyFloor:
    """The sensitivity floor of one family at one cell: what its comparisons can resolve.

    `floor` is Holm's first step (the smallest effect called better when no other arm is), the largest
    over the family's arms; Holm's later steps test at larger alpha, so once other arms are called
    better a smaller effect is too, down to `floor_last`.
    """

    family: str
    workload: str
    concurrency: int
    metric: str
    df: float  # the smallest Welch-Satterthwaite df over the family's arms (nan when unknown)
    s: float  # boot-level sd of the controls' log statistics (nan when unknown)
    floor: float  # log effect (nan when unknown)
    floor_last: float  # log effect (nan when unknown)
    pair_difference: float | None  # log(last / first control boot) when the family has exactly two
    sources: tuple[str, ...]  # the variance methods its comparisons used
    n_candidates: int
    pair: str | None = None  # which two boots pair_difference compares: "off_B boot 1 vs off_A boot 1"

    @property
    def known(self) -> bool:
        return math.isfinite(self.floor)


@dataclass(frozen=True, slots=True)
class NoiseHistory:
    """Archived A/A control boots of the same seat, per (workload, concurrency, metric)."""

    label: str
    sha256: str
    cells: tuple[tuple[tuple[str, int, str], float, int], ...]  # ((workload, conc, metric), s2, df)
    differs: tuple[str, ...] = ()  # how the archive's seat differs (used only with --noise-history-any-seat)

    def lookup(self, workload: str, concurrency: int, metric: str) -> tuple[float, int] | None:
        for key, s2, df in self.cells:
            if key == (workload, concurrency, metric):
                return s2, df
        return None


@dataclass(frozen=True, slots=True)
class BootInfo:
    """One boot of an arm as the rules read it."""

    boot: int
    order: int
    status: str  # ready | failed | interrupted
    error: str | None
    observed_k: int | None
    kv_cache_tokens: int | None


@dataclass(frozen=True, slots=True)
class CoherenceCase:
    """One coherence case (or un-nonced identity probe) of one arm."""

    case: str
    passed: bool
    output_sha256: str | None


@dataclass(frozen=True, slots=True)
class Tables:
    """The tables behind the evidence (run, value and per-boot statistics), for controls and reports."""

    results: Results
    runs: pd.DataFrame
    values: pd.DataFrame
    boots: pd.DataFrame


@dataclass(frozen=True, slots=True)
class PartialBoot:
    """A failed or interrupted boot that measured runs; they count or not by [runs] partial_boots."""

    arm: str
    boot: int
    status: str  # failed or interrupted
    requests: int  # measured requests it recorded
    counted: bool


@dataclass(frozen=True, slots=True)
class OutputMatch:
    """An arm's greedy outputs on one workload against the controls', counted by prompt."""

    compared: int  # prompts on which the controls gave one output
    differing: int  # of those, prompts on which the arm's output is another
    unstable: int  # prompts on which the controls themselves gave several outputs
    control_distinct: int  # most distinct control outputs on one prompt
    distinct: int  # most distinct outputs of the arm and the controls together on one prompt

    @property
    def identical(self) -> bool:
        """One output per prompt, the same for the arm and the controls, on every prompt compared."""
        return self.distinct == 1


@dataclass(frozen=True, slots=True)
class Evidence:
    """Per-cell spread, comparisons, floors, acceptance, KV and quality checks for every arm."""

    campaign: Campaign
    policy: Policy
    tables: Tables
    cells: Mapping[CellKey, CellSummary]
    values: BootValues
    archived: Mapping[tuple[str, int, str], ArchivedVariance]  # (workload, concurrency, metric) -> A/A
    runs: tuple[FamilyRun, ...]  # each family and metric over its design, min_effect at the margin
    comparisons: Mapping[CellKey, CellComparison]
    floors: tuple[FamilyFloor, ...]
    acceptance: Mapping[str, ArmAcceptance]
    kv: Mapping[str, KvCeiling]
    history: tuple[NoiseHistory, ...]
    hashes: Mapping[
        tuple[str, str], frozenset[str]
    ]  # (arm, workload) -> output hashes of un-nonced ok requests
    distinct_outputs: Mapping[tuple[str, str], int]  # (arm, workload) -> distinct outputs an import recorded
    coherence: Mapping[str, tuple[CoherenceCase, ...]]
    likelihood: Mapping[str, tuple[float, ...]]  # arm -> mean NLL per run
    boots: Mapping[str, tuple[BootInfo, ...]]
    request_counts: Mapping[str, tuple[int, int]]  # arm -> (measured requests, errors)
    arm_cell_index: Mapping[tuple[str, str], tuple[CellSummary, ...]]  # (arm, metric) -> cells in order
    floor_index: Mapping[tuple[str, str, int, str], FamilyFloor]
    arm_comparison_index: Mapping[tuple[str, str], tuple[tuple[str, int, CellComparison], ...]]
    missing: tuple[MissingRow, ...] = ()  # streams completed and kept per arm, boot and cell
    refused: tuple[Refusal, ...] = ()  # (arm, cell) pairs not compared: their missingness differs
    # arm -> (workload, concurrency, break-even) per decode-rate comparison cell (stats/breakeven.py)
    break_even: Mapping[str, tuple[tuple[str, int, BreakEven], ...]] = field(default_factory=dict)
    differing: tuple[Refusal, ...] = ()  # compared on the streams kept though it differs (set_aside)
    partial: tuple[PartialBoot, ...] = ()  # failed or interrupted boots that measured runs
    # TTFT, ITL and E2E percentiles per arm and cell, and of each family's controls (evidence/latency.py)
    latency: Latencies = field(default_factory=lambda: Latencies({}, {}, None))
    # (arm, workload) -> prompt index -> output hashes, for dataset workloads (several prompts each)
    prompt_hashes: Mapping[tuple[str, str], Mapping[int, frozenset[str]]] = field(default_factory=dict)
    # the acceptance at the level of outcomes that only keep arms off (Policy.keep_off_level), for
    # the void check: a look that splits alpha for promotions does not widen it; empty: `acceptance`
    void_acceptance: Mapping[str, ArmAcceptance] = field(default_factory=dict)
    cache: dict[tuple[object, ...], FamilyRun | None] = field(default_factory=dict, compare=False)

    def cell(self, arm: str, workload: str, concurrency: int, metric: str) -> CellSummary | None:
        return self.cells.get((arm, workload, concurrency, metric))

    def comparison(self, arm: str, workload: str, concurrency: int, metric: str) -> CellComparison | None:
        return self.comparisons.get((arm, workload, concurrency, metric))

    def run(
        self, family: str, metric: str, cells: tuple[Cell, ...] | None = None, min_effect: float | None = None
    ) -> FamilyRun | None:
        """The family procedure for a family and metric: the default run, or one over a rule's cells and
        min_effect (computed once per distinct question)."""
        if cells is None and min_effect is None:
            return next((r for r in self.runs if r.family == family and r.metric == metric), None)
        key = (family, metric, cells, min_effect)
        if key not in self.cache:
            history = {(w, c): h for (w, c, m), h in self.archived.items() if m == metric}
            self.cache[key] = run_family(
                self.campaign,
                self.policy,
                self.values,
                history,
                family=family,
                metric=metric,
                cells=cells,
                min_effect=min_effect,
            )
        return self.cache[key]

    def arm_outcome(
        self, arm: str, metric: str, cells: tuple[Cell, ...] | None = None, min_effect: float | None = None
    ) -> ArmOutcome | None:
        """An arm's combined outcome against its family's controls (None when it could not be run)."""
        family = self.campaign.arm(arm).family
        found = self.run(family, metric, cells, min_effect)
        return None if found is None else found.arm(arm)

    def arm_cells(self, arm: str, metric: str) -> tuple[CellSummary, ...]:
        """An arm's cells for one metric, in the campaign's workload order, then by concurrency."""
        return self.arm_cell_index.get((arm, metric), ())

    def comparisons_of(self, arm: str, metric: str) -> tuple[tuple[str, int, CellComparison], ...]:
        """An arm's comparisons for one metric as (workload, concurrency, comparison), sorted."""
        return self.arm_comparison_index.get((arm, metric), ())

    def floor(self, family: str, workload: str, concurrency: int, metric: str) -> FamilyFloor | None:
        return self.floor_index.get((family, workload, concurrency, metric))

    def control_names(self, family: str) -> tuple[str, ...]:
        return tuple(a.name for a in self.campaign.controls(family))

    def outputs(self, arms: tuple[str, ...] | list[str], workload: str) -> frozenset[str]:
        """Output hashes of the arms' un-nonced requests on a workload (nonced prompts differ by design)."""
        out: set[str] = set()
        for arm in arms:
            out |= self.hashes.get((arm, workload), frozenset())
        return frozenset(out)

    def outputs_by_prompt(
        self, arms: tuple[str, ...] | list[str], workload: str
    ) -> dict[int, frozenset[str]]:
        """The arms' output hashes per prompt: a dataset workload's by prompt index, another's as one prompt.

        A dataset workload sends several prompts, so its outputs are only comparable prompt by prompt; a
        workload of one prompt repeated has its outputs under index -1."""
        out: dict[int, set[str]] = {}
        for arm in arms:
            by_prompt = self.prompt_hashes.get((arm, workload))
            if by_prompt is None:
                whole = self.hashes.get((arm, workload), frozenset())
                by_prompt = {-1: whole} if whole else {}
            for index, digests in by_prompt.items():
                out.setdefault(index, set()).update(digests)
        return {k: frozenset(v) for k, v in sorted(out.items())}

    def output_match(self, arm: str, workload: str) -> OutputMatch | None:
        """The arm's greedy outputs on a workload against its family controls', prompt by prompt."""
        arm_row = next((a for a in self.campaign.arms if a.name == arm), None)
        if arm_row is None:
            return None
        controls = self.control_names(arm_row.family)
        mine = self.outputs_by_prompt([arm], workload)
        theirs = self.outputs_by_prompt(controls, workload)
        shared = [p for p in mine if p in theirs]
        if not shared:
            return None
        unstable = [p for p in shared if len(theirs[p]) > 1]
        stable = [p for p in shared if len(theirs[p]) == 1]
        return OutputMatch(
            compared=len(stable),
            differing=sum(1 for p in stable if mine[p] != theirs[p]),
            unstable=len(unstable),
            control_distinct=max(len(theirs[p]) for p in shared),
            distinct=max(len(mine[p] | theirs[p]) for p in shared),
        )
