"""Decision format (mtpverdict.decision/2): the typed decision `decide` returns, writes and reads back.

One model serves every consumer: `decide` builds it, `decision_json` writes it canonically (sorted keys,
six significant digits, no NaN), `load_decision` reads a file back into it (refusing other formats,
unknown keys and duplicate keys), and report, gate and verify use it. The JSON Schema is generated
from it.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta, Struct

from mtpverdict._jsonio import canonical
from mtpverdict.errors import InputError, Problem, UnknownArmError
from mtpverdict.formats import _check
from mtpverdict.formats.policy import Severity
from mtpverdict.formats.results import Spec

DECISION_FORMAT: Final = "mtpverdict.decision/2"  # Final: its type is the Literal of Decision.format
OLDER_FORMATS = ("mtpverdict.decision/1",)  # read by no one: decide again with this version

# A decision is a function of the inputs' contents, never of where they lie or how their path was typed,
# so `verify` reproduces it from any checkout. Text that would name a path (the next step's command)
# names these placeholders instead; `fill_paths` puts the paths in when the text is shown.
RESULTS_PLACEHOLDER = "RESULTS"
RULES_PLACEHOLDER = "RULES.toml"
_PLACEHOLDER = re.compile(r"(?<![\w./-])(RESULTS|RULES\.toml)(?![\w./-])")


class DecisionKind(StrEnum):
    """What the decision says the seat should run."""

    PROMOTE = "promote"
    KEEP_MTP_DISABLED = "keep_mtp_disabled"
    KEEP_REFERENCE = "keep_reference"
    INCONCLUSIVE = "inconclusive"


class Verdict(StrEnum):
    """An arm's verdict under the policy."""

    ELIGIBLE = "eligible"
    REJECTED = "rejected"
    VOID = "void"
    CONTROL = "control"
    INCONCLUSIVE = "inconclusive"


class RuleStatus(StrEnum):
    """What a rule found before the policy's on_missing was applied."""

    PASS = "pass"
    FAIL = "fail"
    MISSING = "missing"  # the evidence the rule needs is not in the results
    INCONCLUSIVE = "inconclusive"  # the evidence exists but does not settle the question


class ControlStatus(StrEnum):
    """How a campaign-level control came out."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    UNTESTABLE = "untestable"
    INFO = "info"


Number = int | float
Threshold = Number | tuple[str, ...] | dict[str, Number | None] | None


class RuleResult(Struct, frozen=True, forbid_unknown_fields=True):
    """One rule applied to one arm: its numbers and the sentence that states them."""

    rule: Annotated[str, Meta(description="Rule id (the kind unless the policy names it).")]
    kind: Annotated[str, Meta(description="Rule kind.")]
    severity: Severity
    passed: Annotated[bool | None, Meta(description="True passed, false failed, null unsettled.")]
    status: RuleStatus
    value: Annotated[Number | None, Meta(description="The number the rule judged (null when none).")]
    threshold: Annotated[Threshold, Meta(description="The bar it was judged against.")]
    detail: Annotated[str, Meta(description="The rule's finding in words.")]

    def param(self, name: str) -> float | None:
        """A numeric parameter of the rule, when its threshold is a table of them."""
        if isinstance(self.threshold, dict):
            value = self.threshold.get(name)
            return None if value is None else float(value)
        return None


class SurfaceSummary(Struct, frozen=True, forbid_unknown_fields=True):
    """Acceptance as one surface reports it, pooled over that surface's windows."""

    source: str
    scoped: str
    windows: int
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    acceptance_rate: float | None
    ci_low: float | None
    ci_high: float | None
    mean_acceptance_length: float | None
    per_position_rate: tuple[float, ...] | None
    void_windows: int
    unit: Annotated[
        str | None, Meta(description="What one replicate of the interval is: request, window, boot or round.")
    ] = None
    per_position_low: tuple[float, ...] | None = None
    per_position_high: tuple[float, ...] | None = None
    too_small: Annotated[
        str | None,
        Meta(
            description="Why no interval covers (a single request or window; its bounds are then "
            "the draft rounds' alone); None otherwise."
        ),
    ] = None


class WorkloadAcceptance(Struct, frozen=True, forbid_unknown_fields=True):
    """The primary surface of one workload (concurrency 0: every concurrency of it pooled)."""

    workload: str
    concurrency: int
    surface: SurfaceSummary


class AcceptanceSummary(Struct, frozen=True, forbid_unknown_fields=True):
    """An arm's acceptance: the primary surface, every surface, the wasted-draft fraction, per workload."""

    primary: SurfaceSummary
    surfaces: tuple[SurfaceSummary, ...]
    wasted_fraction: float | None
    workloads: tuple[WorkloadAcceptance, ...] = ()


class KvSummary(Struct, frozen=True, forbid_unknown_fields=True):
    """An arm's KV pool and the concurrency ceiling it allows (pool / window: a ceiling, not measured)."""

    kv_cache_tokens: int | None
    window_tokens: int | None
    ceiling: float | None
    ratio_to_control: float | None


class BreakEvenCell(Struct, frozen=True, forbid_unknown_fields=True):
    """One depth at one cell: what a speculative step costs and the acceptance at which it stops paying.

    Intervals are the decode-rate comparison's (two-sided 1 - 2 alpha, from the boot-level data) at
    the measured mean acceptance length; the measured length's interval is the acceptance rate's.
    """

    workload: str
    concurrency: int
    drafted_per_step: Annotated[
        float | None, Meta(description="Draft tokens per drafting step (k for MTP; fewer for n-gram).")
    ]
    step_cost: Annotated[
        float,
        Meta(
            description="Baseline (speculation off) decode steps one speculative step costs; also the "
            "break-even mean acceptance length."
        ),
    ]
    step_cost_low: float | None
    step_cost_high: Annotated[
        float | None, Meta(description="The conservative bound: live acceptance below it may not pay.")
    ]
    break_even_rate: Annotated[
        float | None,
        Meta(description="(step cost - 1) / drafted per step: above 1 no acceptance pays, below 0 any does."),
    ]
    break_even_rate_low: float | None
    break_even_rate_high: float | None
    mean_acceptance_length: Annotated[float, Meta(description="Measured at the cell (bonus token included).")]
    mean_acceptance_length_low: float | None
    mean_acceptance_length_high: float | None
    acceptance_rate: float | None
    acceptance_rate_low: float | None
    acceptance_rate_high: float | None
    margin: Annotated[float, Meta(description="Measured mean acceptance length minus the step cost.")]
    conservative_margin: Annotated[
        float, Meta(description="The measured length's low end minus the step cost's high end.")
    ]


class BreakEvenSummary(Struct, frozen=True, forbid_unknown_fields=True):
    """An arm's break-even per decode-rate comparison cell, and the bound alerts and watch judge against."""

    cells: tuple[BreakEvenCell, ...]
    bound_workload: Annotated[
        str, Meta(description="The most demanding cell: the largest conservative bound.")
    ]
    bound_concurrency: int
    bound_length: Annotated[
        float, Meta(description="Its conservative bound (mean acceptance length per step).")
    ]
    bound_rate: Annotated[float | None, Meta(description="The break-even rate at that bound.")]


class ArmDecision(Struct, frozen=True, forbid_unknown_fields=True):
    """One arm: its verdict, every rule's outcome, acceptance and KV."""

    name: str
    role: str
    family: str
    spec: Spec
    verdict: Verdict
    void_reason: str | None
    rules: tuple[RuleResult, ...]
    acceptance: AcceptanceSummary | None
    kv: KvSummary
    break_even: Annotated[
        BreakEvenSummary | None,
        Meta(description="Step cost and break-even acceptance per decode-rate cell (candidates only)."),
    ] = None

    @property
    def is_control(self) -> bool:
        return self.role == "control"

    @property
    def label(self) -> str:
        """The spec as `decide` prints it: `off`, `mtp k=3`, `ngram k=?`."""
        return self.spec.label()

    @property
    def k(self) -> int | None:
        return self.spec.k

    def rules_of(self, kind: str) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.rules if r.kind == kind)


class ControlResult(Struct, frozen=True, forbid_unknown_fields=True):
    """One campaign-level control (floor, drift, blind harness, void arms, failed boots, harness)."""

    name: str
    status: ControlStatus
    detail: str
    value: float | None


class FloorResult(Struct, frozen=True, forbid_unknown_fields=True):
    """The sensitivity floor of one family at one cell (as gains: 0.05 = +5%)."""

    family: str
    workload: str
    concurrency: int
    metric: str
    df: Annotated[float | None, Meta(description="Smallest Welch-Satterthwaite df over the family's arms.")]
    boot_sd: Annotated[float | None, Meta(description="Boot-level sd of the controls' log statistic.")]
    floor: Annotated[
        float | None,
        Meta(description="Holm's first step: the smallest gain an arm alone is called better at."),
    ]
    floor_last: Annotated[
        float | None, Meta(description="Holm's last step: what is called better once other arms are.")
    ]
    pair_difference: Annotated[
        float | None, Meta(description="The last control boot over the first, when there are exactly two.")
    ]
    variance_sources: tuple[str, ...]
    candidates: int
    pair: Annotated[
        str | None,
        Meta(description='The two boots pair_difference compares: "off_B boot 1 vs off_A boot 1".'),
    ] = None


class ComparisonResult(Struct, frozen=True, forbid_unknown_fields=True):
    """An arm against its family's control at one cell: ratio, interval, the variance used, outcome."""

    arm: str
    workload: str
    concurrency: int
    metric: str
    ratio: float | None
    ci_low: Annotated[float | None, Meta(description="Two-sided 1 - 2 alpha interval of the ratio.")]
    ci_high: float | None
    variance: Annotated[
        str, Meta(description="welch, pooled, history, blocked, devices, assumed, within_boot or unknown.")
    ]
    variance_reason: str
    df: Annotated[float | None, Meta(description="Welch-Satterthwaite degrees of freedom.")]
    n_arm_boots: int
    n_base_boots: int
    p_better: Annotated[
        float | None, Meta(description="One-sided, beyond the min_effect of the decision's runs.")
    ]
    p_worse: float | None
    p_equivalent: Annotated[float | None, Meta(description="TOST within the equivalence margin.")]
    p_below_min_effect: float | None
    floor: Annotated[float | None, Meta(description="Holm's first step at this cell, as a gain.")]
    floor_last: float | None
    loo_p: Annotated[float | None, Meta(description="Worst p_better with one boot left out.")]
    loo_boot: str | None
    outcome: Annotated[
        str, Meta(description="This cell alone, Holm across every arm and cell of the family.")
    ]


class Resolution(Struct, frozen=True, forbid_unknown_fields=True):
    """What an unresolved arm lacks, and the boots per arm that would likely settle it."""

    missing: tuple[str, ...]
    boots_per_arm: int | None
    likely: str | None
    probability: float | None
    assumptions: tuple[str, ...]


class ArmOutcomeResult(Struct, frozen=True, forbid_unknown_fields=True):
    """An arm's combined outcome against its family's controls over the design, for one metric."""

    arm: str
    family: str
    metric: str
    outcome: Annotated[str, Meta(description="better, worse, equivalent, below_min_effect or inconclusive.")]
    why: Annotated[
        str, Meta(description="resolved, missing_cell, unknown_variance, one_boot_carries or not_resolved.")
    ]
    min_effect: float
    p_better: float | None
    p_better_holm: float | None
    p_equivalent_holm: float | None
    p_worse_holm: float | None
    p_below_min_effect_holm: float | None
    loo_p: float | None
    loo_boot: str | None
    missing_cells: tuple[tuple[str, int], ...]
    unknown_cells: tuple[tuple[str, int], ...]
    floor: float | None
    floor_last: float | None
    resolution: Resolution | None


class CellResult(Struct, frozen=True, forbid_unknown_fields=True):
    """The spread of one metric in one (arm, workload, concurrency) cell, as the decision counted it."""

    arm: str
    workload: str
    concurrency: int
    metric: str
    n: int
    n_boots: int
    n_cold: int
    median: float
    min: float
    max: float
    iqr: float
    runs_known: bool
    origin: str


class CategoryResult(Struct, frozen=True, forbid_unknown_fields=True):
    """One candidate on one dataset category (a workload ID.CATEGORY): its acceptance there with the
    interval, and the family procedure over the category's cells alone."""

    arm: str
    category: str
    workload: str
    acceptance_rate: float | None
    ci_low: Annotated[float | None, Meta(description="Two-sided 1 - 2 alpha interval of the rate.")]
    ci_high: float | None
    accepted_tokens: int | None
    draft_tokens: int | None
    metric: Annotated[str, Meta(description="The selection metric the outcome is judged on.")]
    outcome: Annotated[
        str | None,
        Meta(
            description="better, worse, equivalent, below_min_effect or inconclusive: the family procedure "
            "over this category's cells (intersection-union over its concurrencies, Holm across the "
            "family's arms); null when it could not be run."
        ),
    ]
    ratio: Annotated[float | None, Meta(description="The ratio to off at the category's weakest cell.")]
    ratio_low: float | None
    ratio_high: float | None


class WeightedResult(Struct, frozen=True, forbid_unknown_fields=True):
    """One candidate against off on the policy's traffic mix of dataset categories ([workloads.weights])."""

    arm: str
    family: str
    metric: str
    shares: Annotated[
        tuple[tuple[str, float], ...], Meta(description="(category, normalised traffic share) pairs.")
    ]
    missing: Annotated[
        tuple[str, ...], Meta(description="Weighted categories the campaign has no workload for.")
    ]
    outcome: Annotated[
        str | None,
        Meta(
            description="The family procedure on the weighted cells (one per concurrency): better, worse, "
            "equivalent, below_min_effect or inconclusive; null when it could not be run."
        ),
    ]
    concurrency: Annotated[int | None, Meta(description="The weakest weighted cell's concurrency.")]
    ratio: Annotated[float | None, Meta(description="The weighted mix's ratio to off there.")]
    ratio_low: float | None
    ratio_high: float | None


class LatencyResult(Struct, frozen=True, forbid_unknown_fields=True):
    """One latency's percentiles over an arm's streams at one cell (or every cell), and the boot-level
    estimate of its median (docs/statistics.md, "Latency percentiles")."""

    arm: str
    workload: Annotated[str | None, Meta(description="The cell's workload; null: every cell of the arm.")]
    concurrency: Annotated[int | None, Meta(description="The cell's concurrency; null: every cell.")]
    metric: Annotated[
        Literal["ttft_ms", "itl_ms", "e2e_ms"],
        Meta(description="ttft_ms, itl_ms (per token over the decode window) or e2e_ms."),
    ]
    n: Annotated[int, Meta(description="Streams measured.")]
    n_boots: int
    p50: float
    p90: float
    p99: float
    boot_median: Annotated[float, Meta(description="Geometric mean of the boots' medians.")]
    boot_median_low: Annotated[
        float | None, Meta(description="Two-sided 1 - 2 alpha t interval over boots; null with one boot.")
    ]
    boot_median_high: float | None
    timing: Annotated[str, Meta(description="server or client: whose clock timed the streams.")]


class MissingnessResult(Struct, frozen=True, forbid_unknown_fields=True):
    """Streams one boot completed at one cell, and how many yielded a decode measurement."""

    arm: str
    boot: int
    workload: str
    concurrency: int
    streams: int
    kept: int
    burst: int
    timing: Annotated[str, Meta(description="server or client: whose clock timed decode and TTFT.")]


class RefusalResult(Struct, frozen=True, forbid_unknown_fields=True):
    """An (arm, cell) not compared because the share of streams set aside differs from its controls'."""

    arm: str
    workload: str
    concurrency: int
    share: float
    versus: float
    reason: str
    p_value: Annotated[
        float | None,
        Meta(
            description="Fisher's exact test (two-sided) of the two set-aside counts; null when not recorded."
        ),
    ] = None


class RegimeDepth(Struct, frozen=True, forbid_unknown_fields=True):
    """One depth against speculation off at one cell of the regime map (ratios: 1.25 = 25% faster)."""

    arm: str
    k: int | None
    outcome: Annotated[
        str,
        Meta(
            description="This cell alone, Holm across every arm and cell of the family: better, worse, "
            "equivalent, below_min_effect, inconclusive, or not_compared (no comparison at the cell)."
        ),
    ]
    ratio: float | None
    ci_low: Annotated[float | None, Meta(description="Two-sided 1 - 2 alpha interval of the ratio.")]
    ci_high: float | None
    floor: Annotated[float | None, Meta(description="Holm's first step at this cell, as a gain.")]


class RegimeCell(Struct, frozen=True, forbid_unknown_fields=True):
    """One (workload, concurrency) cell of a family's regime map: every depth against off, and the depth
    the evidence supports best there (speculation off included)."""

    family: str
    workload: str
    concurrency: int
    metric: str
    depths: tuple[RegimeDepth, ...]
    best_arm: Annotated[str | None, Meta(description="The best-supported arm; null: speculation off.")]
    best_k: Annotated[int, Meta(description="Its depth (0: speculation off).")]
    resolved: Annotated[
        bool,
        Meta(
            description="Whether the choice rests on resolved comparisons (false: off or a smaller depth "
            "is kept because a difference is not resolved beyond the floor)."
        ),
    ]
    why: str


class ScheduleRange(Struct, frozen=True, forbid_unknown_fields=True):
    """Batch sizes start..end (inclusive) run depth k, with the evidence behind it."""

    start: int
    end: int
    k: Annotated[int, Meta(description="Speculative tokens per step (0: speculation off).")]
    arm: Annotated[str | None, Meta(description="The arm that measured this depth; null: off.")]
    measured: Annotated[tuple[int, ...], Meta(description="The measured concurrencies inside the range.")]
    reasons: tuple[str, ...]


class Schedule(Struct, frozen=True, forbid_unknown_fields=True):
    """A depth per batch-size range, as vLLM 0.32 runs it (num_speculative_tokens_per_batch_size)."""

    family: str
    metric: str
    baseline: Annotated[
        str | None, Meta(description="The arm kept where nothing resolves a switch; null: speculation off.")
    ]
    method: str | None
    ranges: tuple[ScheduleRange, ...]
    rule: Annotated[
        str, Meta(description="What the schedule runs between and beyond measured concurrencies.")
    ]
    speculative_config: Annotated[
        str | None,
        Meta(description="The exact JSON for vLLM's --speculative-config; null when no range speculates."),
    ]
    note: Annotated[str | None, Meta(description="Why there is no speculative_config, or what it assumes.")]
    confirmed: Annotated[
        bool | None,
        Meta(description="Whether an arm that ran a schedule confirms this one; null: no such arm ran."),
    ] = None
    confirmation: Annotated[
        tuple[str, ...], Meta(description="Each confirmation arm against off and the chosen depths.")
    ] = ()

    def depth_at(self, batch: int) -> int:
        """The depth at a batch size, as vLLM reads the ranges (the last range carries on past its end)."""
        for r in self.ranges:
            if r.start <= batch <= r.end:
                return r.k
        return self.ranges[-1].k if self.ranges and batch > self.ranges[-1].end else 0


class ContextEnvelope(Struct, frozen=True, forbid_unknown_fields=True):
    """The prompt-token envelope in which an arm's promotion holds (its context_regime findings)."""

    arm: str
    rule: Annotated[str, Meta(description="The context_regime rule whose findings bound it.")]
    holds_to: Annotated[
        int | None,
        Meta(description="The deepest prompt measured where the arm holds, every shallower one holding too."),
    ]
    fails_from: Annotated[
        int | None, Meta(description="The shallowest prompt measured where the arm is not shown to hold.")
    ]
    accepted: Annotated[
        bool, Meta(description="The policy accepts serving contexts beyond the envelope ([gate]).")
    ]
    detail: str


class SelectedArm(Struct, frozen=True, forbid_unknown_fields=True):
    """The arm the decision selects and how to serve it."""

    arm: str
    spec: Spec
    serve_argv: tuple[str, ...] | None


class PolicySummary(Struct, frozen=True, forbid_unknown_fields=True):
    """The policy the decision applied."""

    name: str
    file: str
    alpha: float
    selection: str


class CampaignSummary(Struct, frozen=True, forbid_unknown_fields=True):
    """What the evidence is and what it may claim."""

    id: str
    title: str
    synthetic: bool
    claim: str | None
    device: str | None
    engine: str | None
    engine_version: str | None
    model: str | None


class HistoryInput(Struct, frozen=True, forbid_unknown_fields=True):
    """An archived A/A campaign whose control boots tightened the floor."""

    label: str
    records_sha256: str


class Inputs(Struct, frozen=True, forbid_unknown_fields=True):
    """Hashes of everything the decision read, so `verify` can re-derive it."""

    campaign_sha256: str
    records_sha256: str
    rules_sha256: str
    noise_history: tuple[HistoryInput, ...]
    tool_version: str


class Decision(Struct, frozen=True, forbid_unknown_fields=True):
    """The decision, its stated reasons, and everything needed to re-derive it."""

    format: Literal["mtpverdict.decision/2"]
    decision: DecisionKind
    selected: SelectedArm | None
    provisional: bool
    reasons: tuple[str, ...]
    policy: PolicySummary
    arms: tuple[ArmDecision, ...]
    controls: tuple[ControlResult, ...]
    floors: tuple[FloorResult, ...]
    comparisons: tuple[ComparisonResult, ...]
    outcomes: tuple[ArmOutcomeResult, ...]
    cells: tuple[CellResult, ...]
    campaign: CampaignSummary
    inputs: Inputs
    next_step: Annotated[
        str | None,
        Meta(
            description="What to run next: set whenever the decision is inconclusive (the command that "
            "would settle it, with why); null otherwise. Paths are the placeholders RESULTS (the results "
            "directory), NEW_RESULTS (a fresh one) and RULES.toml (a policy that is not shipped)."
        ),
    ] = None
    missingness: Annotated[
        tuple[MissingnessResult, ...],
        Meta(description="Per arm, boot and cell: completed streams and those with a decode measurement."),
    ] = ()
    refused: Annotated[
        tuple[RefusalResult, ...],
        Meta(description="Cells where an arm was not compared: its share of streams set aside differs."),
    ] = ()
    regime: Annotated[
        tuple[RegimeCell, ...],
        Meta(description="Per family and cell at the selection metric: every depth against off, the best."),
    ] = ()
    schedule: Annotated[
        Schedule | None, Meta(description='The depth per batch-size range ([selection] mode = "schedule").')
    ] = None
    envelopes: Annotated[
        tuple[ContextEnvelope, ...],
        Meta(description="Prompt-token envelopes in which the promoted arms hold (context_regime)."),
    ] = ()
    categories: Annotated[
        tuple[CategoryResult, ...],
        Meta(description="Per candidate and dataset category: acceptance with its interval and the outcome."),
    ] = ()
    weighted: Annotated[
        tuple[WeightedResult, ...],
        Meta(description="Per candidate: the comparison on the policy's traffic mix of categories."),
    ] = ()
    latency: Annotated[
        tuple[LatencyResult, ...],
        Meta(description="TTFT, ITL and E2E p50 / p90 / p99 per arm, per cell and over every cell."),
    ] = ()

    def arm(self, name: str) -> ArmDecision:
        """The arm called `name`; UnknownArmError (a KeyError) naming the arms there are when none is."""
        found = self.find_arm(name)
        if found is None:
            raise UnknownArmError(name, tuple(a.name for a in self.arms))
        return found

    def find_arm(self, name: str) -> ArmDecision | None:
        return next((a for a in self.arms if a.name == name), None)

    @property
    def selected_arm(self) -> str | None:
        """The selected arm's name, or None."""
        return None if self.selected is None else self.selected.arm

    @property
    def families(self) -> tuple[str, ...]:
        """Families in the order their first arm appears."""
        return tuple(dict.fromkeys(a.family for a in self.arms))

    def cell(self, arm: str, workload: str, concurrency: int, metric: str) -> CellResult | None:
        return next(
            (
                c
                for c in self.cells
                if (c.arm, c.workload, c.concurrency, c.metric) == (arm, workload, concurrency, metric)
            ),
            None,
        )

    def floor(self, family: str, workload: str, concurrency: int, metric: str) -> FloorResult | None:
        return next(
            (
                f
                for f in self.floors
                if (f.family, f.workload, f.concurrency, f.metric) == (family, workload, concurrency, metric)
            ),
            None,
        )

    def comparison(self, arm: str, workload: str, concurrency: int, metric: str) -> ComparisonResult | None:
        for c in self.comparisons:
            if (c.arm, c.workload, c.concurrency, c.metric) == (arm, workload, concurrency, metric):
                return c
        return None

    def arm_cells(self, arm: str, metric: str) -> tuple[CellResult, ...]:
        """An arm's cells for one metric, in the order they are stored (campaign workload order)."""
        return tuple(c for c in self.cells if c.arm == arm and c.metric == metric)


def fill_paths(text: str, results: str | None, rules: str | None = None) -> str:
    """`text` with the placeholders a decision uses for paths replaced by `results` and `rules` (each
    quoted for a shell); a placeholder with no path given stays as it is."""
    paths = {RESULTS_PLACEHOLDER: results, RULES_PLACEHOLDER: rules}

    def put(match: re.Match[str]) -> str:
        path = paths[match.group(1)]
        return match.group(1) if path is None else shlex.quote(path)

    return _PLACEHOLDER.sub(put, text)


def finite(value: float | None) -> float | None:
    """A float, or None when it is missing, NaN or infinite (JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def decision_json(decision: Decision) -> str:
    """Canonical decision JSON text: sorted keys, 6 significant digits, no NaN, trailing newline."""
    return canonical(msgspec.to_builtins(decision))


def parse_decision(text: str, source: str) -> Decision:
    """A decision from its JSON text; refuse another format, unknown or duplicate keys, bad types."""
    try:
        obj = _check.loads_strict(text)
    except ValueError as exc:
        raise InputError([Problem(source, str(exc), line=_check.json_line(exc))]) from None
    if not isinstance(obj, dict):
        raise InputError([Problem(source, f"not a decision file: it must hold a {DECISION_FORMAT} object")])
    found = obj.get("format")
    if found in OLDER_FORMATS:
        message = (
            f"{found} was written by an earlier mtpverdict; run `mtpverdict decide` again to write "
            f"{DECISION_FORMAT}"
        )
        raise InputError([Problem(source, message, key="format")])
    if found != DECISION_FORMAT:
        raise InputError(
            [
                Problem(
                    source,
                    f"not a {DECISION_FORMAT} file: format is {found!r}, expected {DECISION_FORMAT!r}; "
                    "pass a file written by mtpverdict decide",
                    key="format",
                )
            ]
        )
    return _check.convert(obj, Decision, source)


def load_decision(path: str | os.PathLike[str]) -> Decision:
    """Read a decision file (a bounded regular file of UTF-8 JSON)."""
    source = str(path)
    data = _check.read_document(path, limit=_check.MAX_DECISION_BYTES, what="a decision file")
    return parse_decision(_check.text_of(data, source), source)


def decision_schema() -> dict[str, Any]:
    """JSON Schema of a decision file."""
    return _check.json_schema(
        Decision,
        schema_id="https://mtpverdict.dev/schemas/decision-2.json",
        title=f"{DECISION_FORMAT} decision",
    )
