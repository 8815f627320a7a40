"""The report's tables in the seed write-ups' style: values with units, runs listed, spread beside medians.

Each function returns a `Table` (title, headers, rows of strings, a note); `markdown` and `html` render
one with tabulate. Medians, spreads, ratios, intervals, floors and acceptance come from the decision, so
the report cannot disagree with it; the runs listed beside them come from the results tables.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mtpverdict._text import html_safe, markdown_safe, terminal_safe
from mtpverdict.formats.decision import ArmDecision, ComparisonResult, RuleResult, SurfaceSummary
from mtpverdict.report.data import ReportData, finite

METRIC_ORDER = ("decode_tps", "aggregate_tps", "ttft_ms")
METRIC_TITLES = {
    "decode_tps": "Decode tok/s per stream",
    "aggregate_tps": "Aggregate tok/s per run (all streams)",
    "ttft_ms": "TTFT (ms)",
}
COLD_MARK = "*"
QUALITY_KINDS = ("coherence", "identity", "likelihood")
STATUS_TEXT = {"pass": "pass", "fail": "FAIL", "missing": "missing", "inconclusive": "inconclusive"}
NONE = "-"


@dataclass(frozen=True, slots=True)
class Table:
    """One report table: a key (its anchor), a title, headers, rows of strings and a note below it."""

    key: str
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def ci_label(alpha: float) -> str:
    """The two-sided interval level the decision reports (1 - 2 alpha: the TOST convention)."""
    return f"{(1 - 2 * alpha) * 100:.0f}% CI"


def num(value: float | None, digits: int = 1) -> str:
    return NONE if not finite(value) else f"{value:,.{digits}f}"


def ratio(value: float | None) -> str:
    return NONE if not finite(value) else f"{value:.3f}x"


def signed_pct(value: float | None) -> str:
    return NONE if not finite(value) else f"{value * 100:+.1f}%"


def pct(value: float | None) -> str:
    return NONE if not finite(value) else f"{value * 100:.1f}%"


def tokens(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def _cell_sort(data: ReportData, arm: str, workload: str, concurrency: int) -> tuple[int, int, str, int]:
    return (data.index.arm_rank.get(arm, 0), data.workload_rank(workload), workload, concurrency)


def _by(frame: pd.DataFrame, keys: list[str]) -> dict[Any, pd.DataFrame]:
    """The rows of a frame split by the values of `keys`, once (a filter per arm would be quadratic)."""
    if frame.empty:
        return {}
    by = keys[0] if len(keys) == 1 else keys
    return dict(iter(frame.groupby(by, sort=False)))  # iter: a GroupBy has a `keys` list, not a mapping


_Run = tuple[int, int, float, bool, float]  # (boot, rep, value, cold, requests it summarises)


def _runs_by_cell(values: pd.DataFrame) -> dict[tuple[str, str, int], list[_Run]]:
    """Each cell's runs in boot and rep order, read in one pass over the columns (no frame per cell)."""
    out: dict[tuple[str, str, int], list[_Run]] = {}
    if values.empty:
        return out
    columns = ("arm", "workload", "concurrency", "boot", "rep", "value", "cold", "n_requests")
    for arm, workload, conc, boot, rep, value, cold, n in zip(*(values[c] for c in columns), strict=True):
        out.setdefault((str(arm), str(workload), int(conc)), []).append(
            (int(boot), int(rep), float(value), bool(cold), float(n))
        )
    for runs in out.values():
        runs.sort(key=lambda r: (r[0], r[1]))  # stable, as the table's mergesort by boot and rep was
    return out


def _runs_text(runs: Sequence[_Run], digits: int) -> str:
    """Runs in boot and rep order, cold runs marked; several boots are separated by `;`."""
    parts = [
        (boot, ", ".join(f"{r[2]:,.{digits}f}{COLD_MARK if r[3] else ''}" for r in group))
        for boot, group in itertools.groupby(runs, key=lambda r: r[0])
    ]
    if len(parts) == 1:
        return parts[0][1]
    return "; ".join(f"b{boot}: {text}" for boot, text in parts)


def metric_table(data: ReportData, metric: str) -> Table | None:
    """One metric per (arm, workload, concurrency): every run, then the decision's median and spread."""
    doc = data.decision
    cells = sorted(
        (c for c in doc.cells if c.metric == metric),
        key=lambda c: _cell_sort(data, c.arm, c.workload, c.concurrency),
    )
    if not cells:
        return None
    digits = 1
    vals = data.values[data.values["metric"] == metric] if not data.values.empty else data.values
    per_cell = _runs_by_cell(vals)
    rows = []
    for c in cells:
        arm = data.index.arms.get(c.arm)
        sub = per_cell.get((c.arm, c.workload, c.concurrency), [])
        if not c.runs_known:
            n_total = int(max(r[4] for r in sub)) if sub else c.n
            runs = f"median only (summary of {n_total} runs)"
        else:
            runs = _runs_text(sub, digits) if sub else NONE
        spread = f"[{c.min:,.{digits}f}-{c.max:,.{digits}f}]"
        rows.append(
            (
                c.arm,
                NONE if arm is None else arm.label,
                c.workload,
                str(c.concurrency),
                runs,
                num(c.median, digits),
                spread,
                f"{c.n} ({c.n_boots} boot{'s' if c.n_boots != 1 else ''})",
            )
        )
    measured = {c.arm for c in cells}
    missing = [a.name for a in doc.arms if a.name not in measured]
    note = (
        f"A run marked {COLD_MARK} is cold (the first measured run of its boot); runs of several boots are "
        "listed per boot (b1, b2, ...). Median and spread are the decision's, over the runs it counted (n): "
        "cold runs count only when the policy says so."
    )
    if missing:
        note += f" Not measured for: {', '.join(missing)}."
    return Table(
        key=f"runs-{metric}",
        title=METRIC_TITLES[metric],
        headers=(
            "arm",
            "spec",
            "workload",
            "c",
            f"runs ({COLD_MARK} cold)",
            "median",
            "spread [min-max]",
            "n",
        ),
        rows=tuple(rows),
        note=note,
    )


def _ci_text(c: ComparisonResult) -> str:
    if not (finite(c.ci_low) and finite(c.ci_high)):
        return NONE
    return f"[{c.ci_low:.3f}x, {c.ci_high:.3f}x]"


def comparison_table(data: ReportData) -> Table | None:
    """Every comparison with the family's control: ratio, interval, floor, outcome and method."""
    doc = data.decision
    if not doc.comparisons:
        return None
    comps = sorted(
        doc.comparisons,
        key=lambda c: (
            METRIC_ORDER.index(c.metric) if c.metric in METRIC_ORDER else len(METRIC_ORDER),
            *_cell_sort(data, c.arm, c.workload, c.concurrency),
        ),
    )
    rows = tuple(
        (
            c.arm,
            c.metric,
            c.workload,
            str(c.concurrency),
            ratio(c.ratio),
            _ci_text(c),
            signed_pct(c.floor),
            c.outcome,
            c.variance.replace("_", " ") + (f" (df {c.df:.1f})" if c.df else ""),
            f"{c.n_arm_boots} / {c.n_base_boots}",
        )
        for c in comps
    )
    return Table(
        key="ratios",
        title="Ratio to off",
        headers=(
            "arm",
            "metric",
            "workload",
            "c",
            "ratio to off",
            ci_label(doc.policy.alpha),
            "floor",
            "outcome",
            "variance",
            "boots arm / off",
        ),
        rows=rows,
        note=(
            "Ratio of the arm's boot statistics to its family's control boots (geometric mean). For TTFT a "
            "ratio below 1 is better. The floor is the smallest effect the campaign could call better; a "
            "difference inside it is not a finding."
        ),
    )


def _surfaces(arm: ArmDecision) -> list[tuple[SurfaceSummary, bool]]:
    acc = arm.acceptance
    if acc is None:
        return []
    out = [(s, s == acc.primary) for s in acc.surfaces]
    if not any(primary for _, primary in out):
        out.insert(0, (acc.primary, True))
    return out


def _positions(rates: tuple[float, ...] | None) -> str:
    return NONE if not rates else ", ".join(f"{r:.3f}" for r in rates)


def acceptance_table(data: ReportData) -> Table | None:
    """Acceptance per arm and surface: rate with interval and sample size, per-position rates."""
    doc = data.decision
    rows = []
    for arm in doc.arms:
        for surface, primary, scope in _surfaces_and_workloads(arm, data.workload_rank):
            sample = (
                f"{surface.accepted_tokens:,} / {surface.draft_tokens:,}"
                if surface.accepted_tokens is not None and surface.draft_tokens is not None
                else "not recorded"
            )
            ci = (
                f"[{pct(surface.ci_low)}, {pct(surface.ci_high)}]"
                if finite(surface.ci_low) and finite(surface.ci_high) and surface.too_small is None
                else ("too small" if surface.too_small else NONE)
            )
            length = num(surface.mean_acceptance_length, 2)
            if length != NONE and arm.k is not None:
                length += f" / {arm.k + 1}"
            wasted = pct(arm.acceptance.wasted_fraction) if primary and arm.acceptance is not None else ""
            source = f"{surface.source}{' (primary)' if primary else ''}, {surface.scoped}"
            if surface.void_windows:
                source += f", {surface.void_windows} void"
            rows.append(
                (
                    arm.name,
                    arm.label,
                    source,
                    scope,
                    str(surface.windows),
                    pct(surface.acceptance_rate),
                    ci,
                    sample,
                    tokens(surface.drafts),
                    length,
                    _positions(surface.per_position_rate),
                    wasted,
                )
            )
    if not rows:
        return None
    return Table(
        key="acceptance",
        title="Acceptance",
        headers=(
            "arm",
            "spec",
            "surface",
            "scope",
            "windows",
            "acceptance",
            ci_label(doc.policy.alpha),
            "accepted / drafted",
            "drafts",
            "mean accept length",
            "per-position rate",
            "wasted",
        ),
        rows=tuple(rows),
        note=(
            "Acceptance = accepted / drafted tokens, with a covering interval clustered by request, window "
            "or draft round; the primary surface is the first with counts (response, metrics, log, report). "
            "Scope: the arm pooled, then each workload (every concurrency pooled) and each workload and "
            "concurrency on the primary surface, since one workload's repetition can lift the pool. "
            "Mean acceptance length "
            "counts the bonus token (k + 1 at most). Surfaces cover different windows and need not agree "
            "exactly."
        ),
    )


def _surfaces_and_workloads(
    arm: ArmDecision, rank: Callable[[str], int]
) -> list[tuple[SurfaceSummary, bool, str]]:
    """Every surface of the arm pooled, then the primary surface per workload and per cell."""
    out = [(surface, primary, "all") for surface, primary in _surfaces(arm)]
    if arm.acceptance is not None:
        for w in sorted(arm.acceptance.workloads, key=lambda w: (rank(w.workload), w.concurrency)):
            scope = w.workload if w.concurrency == 0 else f"{w.workload} c={w.concurrency}"
            out.append((w.surface, False, scope))
    return out


def _kv_window(arm: ArmDecision) -> tuple[int | None, float | None]:
    """Window and ceiling: the decision's, else those of the arm's kv_ceiling rule."""
    window, ceiling = arm.kv.window_tokens, arm.kv.ceiling
    for rule in arm.rules_of("kv_ceiling"):
        if window is None and rule.param("window_tokens") is not None:
            window = int(rule.param("window_tokens") or 0)
        if ceiling is None and rule.value is not None and arm.kv.kv_cache_tokens is not None:
            ceiling = rule.value
    return window, ceiling


def kv_ceiling(arm: ArmDecision) -> tuple[int | None, float | None]:
    """The window and concurrency ceiling shown for an arm (the decision's, else its KV rule's)."""
    return _kv_window(arm)


def kv_table(data: ReportData) -> Table | None:
    """KV pool per arm and the concurrency ceiling it allows (pool / window, a ceiling not a measurement)."""
    rows = []
    for arm in data.decision.arms:
        if arm.kv.kv_cache_tokens is None:
            continue
        window, ceiling = kv_ceiling(arm)
        rules = "; ".join(
            f"{r.rule}: {STATUS_TEXT.get(r.status, r.status)}" for r in arm.rules_of("kv_ceiling")
        )
        rows.append(
            (
                arm.name,
                arm.label,
                tokens(arm.kv.kv_cache_tokens),
                tokens(window),
                NONE if not finite(ceiling) else f"{ceiling:.2f}x",
                pct(arm.kv.ratio_to_control),
                rules or NONE,
            )
        )
    if not rows:
        return None
    return Table(
        key="kv",
        title="KV pool and concurrency ceiling",
        headers=(
            "arm",
            "spec",
            "KV cache tokens",
            "window",
            "concurrency ceiling",
            "of control pool",
            "rule",
        ),
        rows=tuple(rows),
        note="Ceilings are pool / window: how many full windows fit, not a measured concurrency.",
    )


def _quality_rows(arm: ArmDecision, cases: pd.DataFrame, nll: pd.DataFrame) -> tuple[str, ...] | None:
    """One arm's row: its coherence cases and likelihood records (already its own), its rule outcomes."""
    outcomes: list[RuleResult] = [r for r in arm.rules if r.kind in QUALITY_KINDS]
    if cases.empty and nll.empty and not outcomes:
        return None
    passed = int(cases["passed"].astype(bool).sum()) if not cases.empty else 0
    failed = sorted({str(c) for c, p in zip(cases["case"], cases["passed"], strict=True) if not bool(p)})
    coherent = NONE if cases.empty else f"{passed}/{len(cases)}"
    nll_text = NONE
    if not nll.empty:
        values = nll["mean_nll"].astype(float)
        nll_text = f"{float(values.median()):.4f}" + (f" (n={len(values)})" if len(values) > 1 else "")

    def status(kind: str) -> str:
        found = [r for r in outcomes if r.kind == kind]
        return ", ".join(STATUS_TEXT.get(r.status, r.status) for r in found) or NONE

    details = "; ".join(r.detail for r in outcomes if r.status != "pass")
    return (
        arm.name,
        arm.label,
        coherent,
        ", ".join(failed) or NONE,
        nll_text,
        status("coherence"),
        status("identity"),
        status("likelihood"),
        details or NONE,
    )


def quality_table(data: ReportData) -> Table | None:
    """Coherence cases, greedy-output identity and teacher-forced likelihood per arm."""
    coh, lik = data.results.coherence, data.results.likelihood
    cases, nll = _by(coh, ["arm"]), _by(lik, ["arm"])
    rows = [
        row
        for arm in data.decision.arms
        if (row := _quality_rows(arm, cases.get(arm.name, coh.iloc[:0]), nll.get(arm.name, lik.iloc[:0])))
        is not None
    ]
    if not rows:
        return None
    return Table(
        key="quality",
        title="Coherence and identity",
        headers=(
            "arm",
            "spec",
            "coherence cases",
            "failed cases",
            "mean NLL (nats/token)",
            "coherence rule",
            "identity rule",
            "likelihood rule",
            "detail (rules not passed)",
        ),
        rows=tuple(rows),
        note=(
            "Speculation changes speed, not semantics: outputs must stay coherent, greedy outputs identical "
            "where the workload expects it, and the teacher-forced likelihood unchanged."
        ),
    )


def _status(rule: RuleResult) -> str:
    """A rule's finding in the verdict table: a warning-only rule that fails is a warning, not a FAIL."""
    if rule.status == "fail" and rule.severity == "warn":
        return "warning"
    return STATUS_TEXT.get(rule.status, rule.status)


def verdict_table(data: ReportData) -> Table:
    """Every arm's verdict and the status of each rule applied to it."""
    doc = data.decision
    rule_ids = list(dict.fromkeys(r.rule for a in doc.arms for r in a.rules))
    multi_family = len(doc.families) > 1
    rows = []
    for arm in doc.arms:
        by_rule = {r.rule: _status(r) for r in arm.rules}
        verdict = arm.verdict + (" (selected)" if arm.name == doc.selected_arm else "")
        rows.append(
            (
                arm.name,
                arm.label,
                *((arm.family,) if multi_family else ()),
                verdict,
                *(by_rule.get(rule, "") for rule in rule_ids),
            )
        )
    return Table(
        key="verdicts",
        title="Verdict per arm",
        headers=("arm", "spec", *(("family",) if multi_family else ()), "verdict", *rule_ids),
        rows=tuple(rows),
        note=f"Rules of policy {doc.policy.name}; an empty cell means the rule does not apply to that arm; "
        "warning: a warning-only rule found a problem, reported but rejecting nothing.",
    )


def controls_table(data: ReportData) -> Table | None:
    """The campaign's controls: floor, drift / null, harness blindness, void arms, failed boots."""
    doc = data.decision
    if not doc.controls:
        return None
    rows = tuple((c.name, c.status, c.detail) for c in doc.controls)
    return Table(key="controls", title="Controls", headers=("control", "status", "detail"), rows=rows)


def floor_table(data: ReportData) -> Table | None:
    """The sensitivity floor per family and cell, with what it is estimated from."""
    doc = data.decision
    if not doc.floors:
        return None
    multi_family = len(doc.families) > 1
    floors = sorted(
        doc.floors,
        key=lambda f: (
            doc.families.index(f.family) if f.family in doc.families else 0,
            METRIC_ORDER.index(f.metric) if f.metric in METRIC_ORDER else len(METRIC_ORDER),
            data.workload_rank(f.workload),
            f.concurrency,
        ),
    )
    assumed = sorted({c.floor for c in doc.comparisons if c.variance == "assumed" and c.floor is not None})
    rows = tuple(
        (
            *((f.family,) if multi_family else ()),
            f.metric,
            f.workload,
            str(f.concurrency),
            "unknown" if f.floor is None else signed_pct(f.floor),
            "unknown" if f.floor_last is None else signed_pct(f.floor_last),
            NONE if f.df is None else f"{f.df:.1f}",
            pct(f.boot_sd),
            _pair(f.pair_difference, f.pair),
            ", ".join(f.variance_sources) or "none",
            str(f.candidates),
        )
        for f in floors
    )
    note = (
        "Floor = min_effect plus the one-sided Welch t critical value at alpha / (depths compared) times "
        "the standard error, with each arm's own boot variance: Holm's first step, the smallest gain an arm "
        "alone is called better at. Holm's later steps test at larger alpha, so once other arms are called "
        "better a gain down to the last step's floor is too."
    )
    if assumed:
        note += (
            " The policy assumed a floor of "
            + ", ".join(signed_pct(a) for a in assumed)
            + " where the campaign gives no estimate."
        )
    return Table(
        key="floor",
        title="Sensitivity floor",
        headers=(
            *(("family",) if multi_family else ()),
            "metric",
            "workload",
            "c",
            "floor",
            "last step",
            "df",
            "control boot sd",
            "control pair",
            "variance",
            "depths",
        ),
        rows=rows,
        note=note,
    )


def _pair(difference: float | None, pair: str | None) -> str:
    """The two control boots' difference, saying which two (off_A's own boots when off_B has none)."""
    if difference is None:
        return NONE
    return signed_pct(difference) if pair is None else f"{signed_pct(difference)} ({pair})"


def _with_interval(value: float | None, low: float | None, high: float | None, digits: int = 2) -> str:
    if not finite(value):
        return NONE
    if not finite(low) or not finite(high):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def break_even_table(data: ReportData) -> Table | None:
    """Per candidate and decode-rate cell: a step's cost in baseline steps (the break-even mean
    acceptance length), the break-even rate, the measured acceptance and the margin."""
    doc = data.decision
    rows = []
    for arm in doc.arms:
        if arm.break_even is None:
            continue
        bound = (arm.break_even.bound_workload, arm.break_even.bound_concurrency)
        for c in arm.break_even.cells:
            mark = " (bound)" if (c.workload, c.concurrency) == bound else ""
            rows.append(
                (
                    _cell_sort(data, arm.name, c.workload, c.concurrency),
                    (
                        f"{arm.name} ({arm.label})",
                        f"{c.workload} c={c.concurrency}{mark}",
                        num(c.drafted_per_step, 2),
                        _with_interval(c.step_cost, c.step_cost_low, c.step_cost_high),
                        _with_interval(
                            None if c.break_even_rate is None else c.break_even_rate * 100,
                            None if c.break_even_rate_low is None else c.break_even_rate_low * 100,
                            None if c.break_even_rate_high is None else c.break_even_rate_high * 100,
                            1,
                        ),
                        _with_interval(
                            c.mean_acceptance_length,
                            c.mean_acceptance_length_low,
                            c.mean_acceptance_length_high,
                        ),
                        pct(c.acceptance_rate),
                        f"{c.margin:+.2f}",
                        f"{c.conservative_margin:+.2f}",
                    ),
                )
            )
    if not rows:
        return None
    level = ci_label(doc.policy.alpha)
    return Table(
        key="break-even",
        title="Break-even acceptance",
        headers=(
            "arm",
            "cell",
            "drafted / step",
            f"step cost, baseline steps ({level})",
            "break-even rate % (interval)",
            "measured length (interval)",
            "measured rate",
            "margin",
            "conservative margin",
        ),
        rows=tuple(r for _, r in sorted(rows, key=lambda x: x[0])),
        note=(
            "A speculative step costs (L / R_k) x R_off baseline decode steps; speculation pays while "
            "the mean acceptance length L stays above that cost. The cost's interval is the decode-rate "
            f"comparison's ({level}) at the measured L; the break-even rate is (cost - 1) / drafted per "
            "step (above 100%: no acceptance pays). Margin: L minus the cost; conservative margin: L's "
            "low end minus the cost's high end. (bound): the most demanding cell, which `alerts` and "
            "`watch` judge against."
        ),
    )


def report_tables(data: ReportData) -> tuple[Table, ...]:
    """The report's tables in reading order; a table without data is left out."""
    from mtpverdict.report.latency import latency_table  # it renders with this module's Table
    from mtpverdict.report.weighted import weighted_table

    found: list[Table | None] = [
        verdict_table(data),
        *(metric_table(data, m) for m in METRIC_ORDER),
        latency_table(data),
        weighted_table(data.decision),
        comparison_table(data),
        acceptance_table(data),
        break_even_table(data),
        kv_table(data),
        quality_table(data),
        controls_table(data),
        floor_table(data),
    ]
    return tuple(t for t in found if t is not None)


def markdown(table: Table, level: int) -> str:
    """A table as a markdown section: heading, pipe table, note (every text through markdown_safe)."""
    from tabulate import tabulate

    body = tabulate(
        [[markdown_safe(c) for c in row] for row in table.rows],
        headers=[markdown_safe(h) for h in table.headers],
        tablefmt="github",
        disable_numparse=True,
    )
    parts = [f"{'#' * level} {markdown_safe(table.title)}", "", body]
    if table.note:
        parts += ["", markdown_safe(table.note, starts_line=True)]
    return "\n".join(parts) + "\n"


def html(table: Table, level: int) -> str:
    """A table as an HTML section: heading, table, note (tabulate's html format escapes each cell)."""
    from tabulate import tabulate

    body = tabulate(
        [[terminal_safe(c) for c in row] for row in table.rows],
        headers=[terminal_safe(h) for h in table.headers],
        tablefmt="html",
        disable_numparse=True,
    )
    note = f'<p class="note">{html_safe(table.note)}</p>\n' if table.note else ""
    return (
        f'<section id="{html_safe(table.key)}">\n<h{level}>{html_safe(table.title)}</h{level}>\n'
        f'<div class="table">{body}</div>\n{note}</section>\n'
    )
