"""What a report shows: a results directory, its decision, and the per-run tables the decision summarised."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import pandas as pd

from mtpverdict.errors import InputError, Problem
from mtpverdict.formats.decision import (
    ArmDecision,
    CellResult,
    ComparisonResult,
    Decision,
    FloorResult,
    load_decision,
)
from mtpverdict.formats.results_io import Results
from mtpverdict.formats.what_if import refuse_what_if

COMPUTED = "computed"  # ReportData.decision_source when the report ran the decision itself

CellKey = tuple[str, str, int, str]  # (arm or family, workload, concurrency, metric)


@dataclass(frozen=True, slots=True)
class DecisionIndex:
    """A decision's lookups by arm and by cell, built once.

    A report asks them once per arm and per cell; the decision's own methods (find_arm, cell, floor,
    comparison, arm_cells) scan its lists, which made a report of thousands of arms quadratic. The
    first entry wins where a list names a key twice, as in those methods.
    """

    arms: dict[str, ArmDecision]
    arm_rank: dict[str, int]
    workload_rank: dict[str, int]
    family_arms: dict[str, tuple[ArmDecision, ...]]
    cells: dict[CellKey, CellResult]
    arm_cells: dict[tuple[str, str], tuple[CellResult, ...]]  # (arm, metric) -> cells, stored order
    comparisons: dict[CellKey, ComparisonResult]
    arm_comparisons: dict[str, tuple[ComparisonResult, ...]]
    floors: dict[CellKey, FloorResult]

    @classmethod
    def of(cls, decision: Decision, workloads: Sequence[str]) -> DecisionIndex:
        arms: dict[str, ArmDecision] = {}
        family: dict[str, list[ArmDecision]] = {}
        for arm in decision.arms:
            arms.setdefault(arm.name, arm)
            family.setdefault(arm.family, []).append(arm)
        cells: dict[CellKey, CellResult] = {}
        arm_cells: dict[tuple[str, str], list[CellResult]] = {}
        for c in decision.cells:
            cells.setdefault((c.arm, c.workload, c.concurrency, c.metric), c)
            arm_cells.setdefault((c.arm, c.metric), []).append(c)
        comparisons: dict[CellKey, ComparisonResult] = {}
        arm_comparisons: dict[str, list[ComparisonResult]] = {}
        for comp in decision.comparisons:
            comparisons.setdefault((comp.arm, comp.workload, comp.concurrency, comp.metric), comp)
            arm_comparisons.setdefault(comp.arm, []).append(comp)
        floors: dict[CellKey, FloorResult] = {}
        for f in decision.floors:
            floors.setdefault((f.family, f.workload, f.concurrency, f.metric), f)
        return cls(
            arms=arms,
            arm_rank={name: i for i, name in reversed(list(enumerate(a.name for a in decision.arms)))},
            workload_rank={w: i for i, w in reversed(list(enumerate(workloads)))},
            family_arms={k: tuple(v) for k, v in family.items()},
            cells=cells,
            arm_cells={k: tuple(v) for k, v in arm_cells.items()},
            comparisons=comparisons,
            arm_comparisons={k: tuple(v) for k, v in arm_comparisons.items()},
            floors=floors,
        )


@dataclass(frozen=True, slots=True)
class ReportData:
    """A loaded campaign with its decision, and the run-level values behind the decision's cells.

    `values` has one row per run and metric (request runs and imported summaries, as the decision
    reads them); `runs` has one row per measured request run with its place in the campaign
    (`run_order`, by boot order then start time).
    """

    results: Results
    decision: Decision
    decision_source: str  # the decision file read, or COMPUTED
    values: pd.DataFrame
    runs: pd.DataFrame
    index: DecisionIndex

    @property
    def campaign_label(self) -> str:
        return self.results.campaign.id

    def workload_rank(self, workload: str) -> int:
        ranks = self.index.workload_rank
        return ranks.get(workload, len(self.results.campaign.workloads))

    def prompt_depth(self, workload: str) -> int | None:
        """Prompt tokens of a workload: campaign.json's, else the median the server reported."""
        for w in self.results.campaign.workloads:
            if w.id == workload and w.prompt_tokens is not None:
                return w.prompt_tokens
        req = self.results.requests
        if req.empty:
            return None
        found = req.loc[req["workload"] == workload, "prompt_tokens"].astype(float).dropna()
        if found.empty:
            return None
        return int(round(float(found.median())))


def _run_frames(results: Results) -> tuple[pd.DataFrame, pd.DataFrame]:
    from mtpverdict.stats.runs import run_table, values_table

    runs = run_table(results.requests)
    values = values_table(runs, results.summaries)
    arm_order = {a.name: a.order for a in results.campaign.arms}
    boot_order: dict[tuple[str, int], float] = {}
    if not results.boots.empty:
        for arm, boot, order in zip(
            results.boots["arm"], results.boots["boot"], results.boots["order"], strict=True
        ):
            boot_order[(str(arm), int(boot))] = float(order)
    if runs.empty:
        runs = runs.assign(boot_order=pd.Series(dtype=float), run_order=pd.Series(dtype=int))
        return values, runs
    # a boot without a boot record sorts by its arm's order, after every recorded boot of that order
    runs["boot_order"] = [
        boot_order.get((str(a), int(b)), float(arm_order.get(str(a), 0)) + 0.5)
        for a, b in zip(runs["arm"], runs["boot"], strict=True)
    ]
    runs = runs.sort_values(["boot_order", "t_start", "workload", "concurrency", "rep"], kind="mergesort")
    runs = runs.reset_index(drop=True)
    runs["run_order"] = range(1, len(runs) + 1)
    return values, runs


def _check_inputs(doc: Decision, source: str, results: Results) -> None:
    problems = []
    if doc.inputs.campaign_sha256 != results.campaign_sha256:
        problems.append(
            Problem(
                source,
                f"was decided on another campaign.json (sha256 {doc.inputs.campaign_sha256[:12]}..., "
                f"{results.path} has {results.campaign_sha256[:12]}...); run `mtpverdict decide` again",
                key="inputs.campaign_sha256",
            )
        )
    if doc.inputs.records_sha256 != results.records_sha256:
        problems.append(
            Problem(
                source,
                f"was decided on other records (sha256 {doc.inputs.records_sha256[:12]}..., "
                f"{results.path} has {results.records_sha256[:12]}...); run `mtpverdict decide` again",
                key="inputs.records_sha256",
            )
        )
    if problems:
        raise InputError(problems)


def load_report_data(
    results_dir: str | os.PathLike[str],
    *,
    decision: str | os.PathLike[str] | None = None,
    rules: str | os.PathLike[str] | None = None,
    noise_history: Sequence[str | os.PathLike[str]] = (),
) -> ReportData:
    """Load a results directory and its decision: read from `decision`, or computed as `decide` would.

    A decision file must be mtpverdict.decision/2 and must have been made on these very records
    (its input hashes are checked); otherwise InputError says so and how to fix it.
    """
    from mtpverdict.formats.results_io import load_results

    if decision is not None:
        if rules is not None or noise_history:
            raise InputError(
                [
                    Problem(
                        str(decision),
                        "--decision reports a decision already made: drop --rules and --noise-history, "
                        "or drop --decision to decide here",
                    )
                ]
            )
        doc = load_decision(decision)
        refuse_what_if(doc, str(decision))  # a report is of a decision taken
        results = load_results(results_dir)
        _check_inputs(doc, str(decision), results)
        source = str(decision)
    else:
        from mtpverdict.decide import decide_directory

        run = decide_directory(results_dir, rules, noise_history)
        doc, results, source = run.decision, run.results, COMPUTED
    values, runs = _run_frames(results)
    index = DecisionIndex.of(doc, [w.id for w in results.campaign.workloads])
    return ReportData(
        results=results, decision=doc, decision_source=source, values=values, runs=runs, index=index
    )


def file_stem(text: str) -> str:
    """A file-name-safe form of a family or arm name."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text).strip("-.")
    return safe or "x"


def finite(value: float | None) -> TypeGuard[float]:
    """True for a number that is neither None, NaN nor infinite (and narrows the type to float)."""
    return value is not None and math.isfinite(value)
