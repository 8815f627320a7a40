"""The Evidence a policy's rules read: typed values computed once from a results directory.

Rules never see tables: every accessor here returns frozen values keyed by arm, workload, concurrency
and metric. The tables the values were computed from stay with the evidence layer (`Tables`), for the
controls and the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results import Campaign
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.acceptance import ArmAcceptance
from mtpverdict.stats.capacity import KvCeiling
from mtpverdict.stats.runs import CellSummary

if TYPE_CHECKING:
    import pandas as pd

    from mtpverdict.formats.results_io import Results

CellKey = tuple[str, str, int, str]  # (arm, workload, concurrency, metric)
Cell = tuple[str, int]  # (workload, concurrency)


@dataclass(frozen=True, slots=True)
class FamilyFloor:
    """The sensitivity floor of one family at one cell: what its comparisons can resolve."""

    family: str
    workload: str
    concurrency: int
    metric: str
    df: int
    s: float  # boot-level sd of log statistics (nan when unknown)
    floor: float  # log effect (nan when unknown)
    multiplier_vs_pair: float | None  # floor / |off_B - off_A| when one pair is the only source
    pair_difference: float | None  # log(off_B / off_A) when the family has exactly two control boots
    sources: tuple[str, ...]
    n_candidates: int

    @property
    def known(self) -> bool:
        return math.isfinite(self.floor)


@dataclass(frozen=True, slots=True)
class NoiseHistory:
    """Archived A/A control boots of the same seat, per (workload, concurrency, metric)."""

    label: str
    sha256: str
    cells: tuple[tuple[tuple[str, int, str], float, int], ...]  # ((workload, conc, metric), s2, df)

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
class Evidence:
    """Per-cell spread, comparisons, floors, acceptance, KV and quality checks for every arm."""

    campaign: Campaign
    policy: Policy
    tables: Tables
    cells: Mapping[CellKey, CellSummary]
    comparisons: Mapping[CellKey, cmp.Comparison]
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
    bootstraps: Mapping[CellKey, tuple[float, float]]  # BCa interval of the log ratio, many boots only
    arm_cell_index: Mapping[tuple[str, str], tuple[CellSummary, ...]]  # (arm, metric) -> cells in order
    floor_index: Mapping[tuple[str, str, int, str], FamilyFloor]
    arm_comparison_index: Mapping[tuple[str, str], tuple[tuple[str, int, cmp.Comparison], ...]]
    boot_index: Mapping[CellKey, tuple[float, ...]]  # per-boot log statistics, in boot order

    def cell(self, arm: str, workload: str, concurrency: int, metric: str) -> CellSummary | None:
        return self.cells.get((arm, workload, concurrency, metric))

    def comparison(self, arm: str, workload: str, concurrency: int, metric: str) -> cmp.Comparison | None:
        return self.comparisons.get((arm, workload, concurrency, metric))

    def arm_cells(self, arm: str, metric: str) -> tuple[CellSummary, ...]:
        """An arm's cells for one metric, in the campaign's workload order, then by concurrency."""
        return self.arm_cell_index.get((arm, metric), ())

    def boot_values(self, arm: str, workload: str, concurrency: int, metric: str) -> tuple[float, ...]:
        """An arm's per-boot log statistics at one cell, in boot order (empty when none)."""
        return self.boot_index.get((arm, workload, concurrency, metric), ())

    def comparisons_of(self, arm: str, metric: str) -> tuple[tuple[str, int, cmp.Comparison], ...]:
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
