"""Rule evaluation: each rule kind reads the Evidence for one arm and states an outcome with numbers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mtpverdict.formats.results import Arm
from mtpverdict.rules.policy import Rule
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.economics import RegimePoint, crossing, round_economics
from mtpverdict.stats.runs import METRIC_UNITS

if TYPE_CHECKING:
    from mtpverdict.decide.evidence import Evidence

PASS = "pass"
FAIL = "fail"
MISSING = "missing"  # the evidence the rule needs is not in the results
UNRESOLVED = "inconclusive"  # the evidence exists but does not settle the question


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """One rule applied to one arm. passed is None when the rule could not be settled."""

    rule: str
    kind: str
    severity: str
    passed: bool | None
    status: str  # pass | fail | missing | inconclusive, before on_missing was applied
    value: Any
    threshold: Any
    detail: str


def pct(log_ratio: float) -> str:
    """A log ratio as a signed percentage, e.g. +6.0%."""
    return f"{math.expm1(log_ratio) * 100:+.1f}%"


def fmt(value: float, unit: str = "") -> str:
    text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def _cells(evidence: Evidence, arm: Arm, rule: Rule, metric: str) -> list[tuple[str, int]]:
    workloads = rule.get("workloads") if _has(rule, "workloads") else None
    concurrency = rule.get("concurrency") if _has(rule, "concurrency") else None
    keys = sorted({(c.workload, c.concurrency) for c in evidence.arm_cells(arm.name, metric)})
    return [
        (w, c)
        for w, c in keys
        if (workloads is None or w in workloads) and (concurrency is None or c in concurrency)
    ]


def _has(rule: Rule, key: str) -> bool:
    try:
        rule.get(key)
    except KeyError:
        return False
    return True


def _cell_label(workload: str, concurrency: int) -> str:
    return f"{workload} c={concurrency}"


def _comparison_text(comp: cmp.Comparison, metric: str) -> str:
    if comp.method == cmp.ASSUMED_FLOOR:
        return f"{pct(comp.estimate)} {metric} (point estimate; floor assumed {pct(comp.floor)})"
    if comp.method == cmp.NONE or not math.isfinite(comp.ci_low):
        return f"{pct(comp.estimate)} {metric} (no interval: floor unknown)"
    label = "within-boot" if comp.method == cmp.WITHIN_BOOT else f"between boots, df {comp.df}"
    return (
        f"{pct(comp.estimate)} {metric} [90% CI {pct(comp.ci_low)}, {pct(comp.ci_high)}] "
        f"({label}; floor {pct(comp.floor)})"
    )


# --------------------------------------------------------------------------------------------------


def beats_target(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    metric = rule.get("metric")
    target = float(rule.get("target"))
    floor = rule.get("floor")
    statistic = rule.get("statistic")
    cells = _cells(evidence, arm, rule, metric)
    if not cells:
        return MISSING, None, target, f"{arm.name}: no {metric} measured at the rule's cells"
    worst = math.inf
    parts = []
    for workload, conc in cells:
        cell = evidence.cell(arm.name, workload, conc, metric)
        assert cell is not None
        value = cell.median
        what = f"median of {cell.n} run{'s' if cell.n != 1 else ''}"
        if statistic == "lower_bound":
            low = _lower_bound(evidence, arm.name, workload, conc, metric)
            if low is None:
                return (
                    MISSING,
                    None,
                    target,
                    f"{arm.name}: too few runs at {_cell_label(workload, conc)} for a lower bound",
                )
            value, what = low, "one-sided 95% lower bound over runs"
        worst = min(worst, value)
        unit = METRIC_UNITS[metric]
        clears = []
        if floor is not None:
            clears.append(f"{'clears' if value >= floor else 'misses'} the {fmt(floor)} floor")
        clears.append(f"{'clears' if value >= target else 'misses'} the {fmt(target)} target")
        parts.append(f"{fmt(value, unit)} ({what}, {_cell_label(workload, conc)}) {' and '.join(clears)}")
    status = PASS if worst >= target else FAIL
    return status, worst, target, f"{arm.name}: " + "; ".join(parts)


def _lower_bound(evidence: Evidence, arm: str, workload: str, conc: int, metric: str) -> float | None:
    from scipy import stats as sps

    cell = evidence.cell(arm, workload, conc, metric)
    if cell is None or cell.n < 2 or not cell.runs_known:
        return None
    logs = [math.log(v) for v in cell.values]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    t = float(sps.t.ppf(1 - evidence.policy.alpha, len(logs) - 1))
    return math.exp(mean - t * sd / math.sqrt(len(logs)))


def faster_than_off(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    metric = rule.get("metric")
    min_effect = float(rule.get("min_effect"))
    cells = [
        c
        for c in _cells(evidence, arm, rule, metric)
        if evidence.comparison(arm.name, c[0], c[1], metric) is not None
    ]
    if not cells:
        return MISSING, None, min_effect, f"{arm.name}: no {metric} comparison with its control"
    outcomes = []
    parts = []
    for workload, conc in cells:
        comp = evidence.comparison(arm.name, workload, conc, metric)
        assert comp is not None
        outcome = comp.outcome
        if outcome == cmp.BETTER and min_effect > 0 and comp.estimate < math.log1p(min_effect):
            outcome = cmp.INCONCLUSIVE
        outcomes.append(outcome)
        parts.append(f"{_cell_label(workload, conc)} {outcome}: {_comparison_text(comp, metric)}")
    worst = min(
        (
            evidence.comparison(arm.name, w, c, metric).estimate  # type: ignore[union-attr]
            for w, c in cells
        )
    )
    if any(o in (cmp.WORSE, cmp.EQUIVALENT) for o in outcomes):
        status = FAIL
    elif all(o == cmp.BETTER for o in outcomes):
        status = PASS
    else:
        status = UNRESOLVED
    return status, math.exp(worst), 1.0 + min_effect, f"{arm.name} vs off: " + "; ".join(parts)


def stable_acceptance(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    acc = evidence.acceptance.get(arm.name)
    if acc is None or acc.primary is None:
        return MISSING, None, None, f"{arm.name}: no acceptance recorded"
    p = acc.primary
    failures: list[str] = []
    missing: list[str] = []
    thresholds: dict[str, Any] = {}
    rate_text = "n/a" if p.rate is None else f"{p.rate * 100:.1f}%"
    if p.ci_low is not None and p.ci_high is not None:
        rate_text += f" [90% CI {p.ci_low * 100:.1f}%, {p.ci_high * 100:.1f}%]"
    sample = (
        f"on {p.draft_tokens} drafted tokens" if p.draft_tokens is not None else "sample size not recorded"
    )
    checks: list[tuple[str, float | None, Callable[[float, float], bool], str]] = [
        (
            "min_drafted_tokens",
            None if p.draft_tokens is None else float(p.draft_tokens),
            lambda v, t: v >= t,
            "drafted tokens",
        ),
        ("min_rate", p.rate, lambda v, t: v >= t, "acceptance rate"),
        ("min_lower_bound", p.ci_low, lambda v, t: v >= t, "acceptance lower bound"),
        ("min_last_position_rate", acc.last_position_rate, lambda v, t: v >= t, "last-position rate"),
        ("max_wasted_fraction", acc.wasted_fraction, lambda v, t: v <= t, "wasted-draft fraction"),
    ]
    for key, value, ok, label in checks:
        threshold = rule.get(key)
        if threshold is None:
            continue
        thresholds[key] = threshold
        if value is None:
            missing.append(f"{label} not recorded")
        elif not ok(value, float(threshold)):
            shown = f"{value:.0f}" if key == "min_drafted_tokens" else f"{value:.3f}"
            bound = "minimum" if key.startswith("min") else "maximum"
            # too small a sample is missing evidence (more drafting can settle it), not a failing rate
            (missing if key == "min_drafted_tokens" else failures).append(
                f"{label} {shown} against the {bound} {threshold}"
            )
    positions = acc.per_position_rate
    pos_text = "" if not positions else "; per position " + ", ".join(f"{r:.3f}" for r in positions)
    detail = f"{arm.name}: acceptance {rate_text} {sample} ({p.source}){pos_text}"
    if failures:
        return FAIL, p.rate, thresholds, detail + "; " + "; ".join(failures + missing)
    if missing:
        return MISSING, p.rate, thresholds, detail + "; " + "; ".join(missing)
    return PASS, p.rate, thresholds, detail


def kv_ceiling_rule(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    kv = evidence.kv[arm.name]
    window = rule.get("window_tokens")
    if window is None and rule.get("workload") is not None:
        wl = evidence.campaign.workload(rule.get("workload"))
        if wl.prompt_tokens is not None and wl.max_tokens is not None:
            window = wl.prompt_tokens + wl.max_tokens
    if window is None:
        window = evidence.campaign.window_tokens
    if kv.kv_cache_tokens is None:
        return MISSING, None, None, f"{arm.name}: no KV pool recorded"
    thresholds = {
        "min_concurrency": rule.get("min_concurrency"),
        "max_loss": rule.get("max_loss"),
        "window_tokens": window,
    }
    failures: list[str] = []
    notes = [f"KV pool {kv.kv_cache_tokens:,} tokens"]
    min_conc = rule.get("min_concurrency")
    ceiling = None
    if min_conc is not None:
        if not window:
            return MISSING, None, thresholds, f"{arm.name}: no window to divide the KV pool by"
        ceiling = kv.kv_cache_tokens / window
        notes.append(f"ceiling {ceiling:.2f}x at {window:,} tokens")
        if ceiling < float(min_conc):
            failures.append(f"ceiling {ceiling:.2f}x is below the {min_conc}x minimum")
    max_loss = rule.get("max_loss")
    if max_loss is not None:
        if kv.ratio_to_control is None:
            if not failures:
                return MISSING, ceiling, thresholds, f"{arm.name}: no control KV pool to compare with"
        else:
            notes.append(f"{kv.ratio_to_control * 100:.0f}% of the control's pool")
            if 1.0 - kv.ratio_to_control > float(max_loss):
                failures.append(
                    f"keeps {kv.ratio_to_control * 100:.0f}% of the control's pool, a loss "
                    f"beyond {float(max_loss) * 100:.0f}%"
                )
    detail = f"{arm.name}: " + ", ".join(notes)
    if failures:
        return FAIL, ceiling, thresholds, detail + "; " + "; ".join(failures)
    return PASS, ceiling, thresholds, detail + " (a ceiling, not measured concurrency)"


IDENTITY_CASE_PREFIX = "identity-"  # coherence records of un-nonced greedy probes: compared, not graded


def coherence(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    rows = evidence.coherence.get(arm.name, ())
    graded = [r for r in rows if not r[0].startswith(IDENTITY_CASE_PREFIX)]
    min_rate = float(rule.get("min_pass_rate"))
    parts = []
    status = PASS
    value = None
    if graded:
        passed = sum(1 for _, ok, _ in graded if ok)
        value = passed / len(graded)
        parts.append(f"{passed}/{len(graded)} coherence checks passed")
        if value < min_rate:
            status = FAIL
            failed = sorted(case for case, ok, _ in graded if not ok)
            parts[-1] += f" (failed: {', '.join(failed)})"
    identical_checked = False
    if rule.get("identical_outputs"):
        controls = [c.name for c in evidence.campaign.controls(arm.family)]
        theirs_by_case: dict[str, set[str]] = {}
        for c in controls:
            for case, _, digest in evidence.coherence.get(c, ()):
                if digest is not None:
                    theirs_by_case.setdefault(case, set()).add(digest)
        differing = sorted(
            case
            for case, _, digest in rows
            if digest is not None and case in theirs_by_case and {digest} != theirs_by_case[case]
        )
        compared = [case for case, _, digest in rows if digest is not None and case in theirs_by_case]
        if compared:
            identical_checked = True
            if differing:
                status = FAIL
                parts.append(f"greedy output differs from the control's on {', '.join(differing)}")
            else:
                parts.append(f"greedy output identical to the control's on {len(set(compared))} prompts")
        for wl in evidence.campaign.workloads:
            if not wl.expect_identical:
                continue
            mine = _hashes(evidence, [arm.name], wl.id)
            theirs = _hashes(evidence, controls, wl.id)
            if not mine or not theirs:
                continue
            identical_checked = True
            if mine == theirs and len(mine) == 1:
                parts.append(f"output on {wl.id} byte-identical to the control")
            else:
                status = FAIL
                parts.append(
                    f"output on {wl.id} differs from the control ({len(mine | theirs)} distinct outputs "
                    "where greedy decoding must give one)"
                )
    if not graded and not identical_checked:
        return MISSING, None, min_rate, f"{arm.name}: no coherence cases or output hashes recorded"
    return status, value, min_rate, f"{arm.name}: " + "; ".join(parts)


def _hashes(evidence: Evidence, arms: list[str], workload: str) -> set[str]:
    """Output hashes of the arms' un-nonced requests on a workload (nonced prompts differ by design)."""
    out: set[str] = set()
    for arm in arms:
        out |= evidence.hashes.get((arm, workload), frozenset())
    return out


def identity(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    workloads = rule.get("workloads") or [w.id for w in evidence.campaign.workloads]
    control_names = [c.name for c in evidence.campaign.controls(arm.family)]
    summaries = evidence.results.summaries
    parts = []
    status = MISSING
    for wid in workloads:
        mine = _hashes(evidence, [arm.name], wid)
        theirs = _hashes(evidence, control_names, wid)
        control_distinct = len(theirs) if theirs else None
        if control_distinct is None and len(summaries):
            rows = summaries[
                summaries["arm"].isin(control_names)
                & (summaries["workload"] == wid)
                & summaries["distinct_outputs"].notna()
            ]
            if len(rows):
                control_distinct = int(rows["distinct_outputs"].max())
        if control_distinct is not None and control_distinct > 1:
            parts.append(
                f"identity on {wid} not established: the control itself gave {control_distinct} "
                "distinct outputs"
            )
            status = UNRESOLVED if status != FAIL else status
            continue
        if not mine or not theirs:
            continue
        if mine == theirs:
            parts.append(f"identical to the control on {wid}")
            status = PASS if status == MISSING else status
        else:
            parts.append(f"differs from the control on {wid}")
            status = FAIL
    if not parts:
        return MISSING, None, None, f"{arm.name}: no output hashes to compare"
    return status, None, None, f"{arm.name}: " + "; ".join(parts)


def likelihood(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    mine = np.array(evidence.likelihood.get(arm.name, ()))
    theirs = np.array(
        [v for c in evidence.campaign.controls(arm.family) for v in evidence.likelihood.get(c.name, ())]
    )
    if mine.size == 0 or theirs.size == 0:
        return MISSING, None, None, f"{arm.name}: no teacher-forced likelihood for the arm and its control"
    delta = float(np.median(mine) - np.median(theirs))
    spread = float(theirs.max() - theirs.min()) if len(theirs) >= 2 else None
    thresholds = {"max_delta": rule.get("max_delta"), "max_delta_vs_spread": rule.get("max_delta_vs_spread")}
    detail = f"{arm.name}: mean NLL delta {delta:+.5f} nats vs the control"
    detail += (
        f" (control spread {spread:.5f} over {len(theirs)} runs)"
        if spread is not None
        else " (control spread unknown: one run)"
    )
    failures = []
    if rule.get("max_delta") is not None and abs(delta) > float(rule.get("max_delta")):
        failures.append(f"|delta| above {rule.get('max_delta')}")
    k = rule.get("max_delta_vs_spread")
    if k is not None:
        if spread is None:
            if not failures and abs(delta) > 0:
                return MISSING, delta, thresholds, detail
        elif abs(delta) > float(k) * spread:
            failures.append(f"|delta| above {k} x the control spread")
    if failures:
        return FAIL, delta, thresholds, detail + "; " + "; ".join(failures)
    return PASS, delta, thresholds, detail


def context_regime(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    metric = rule.get("metric")
    listed = rule.get("workloads")
    concurrency = rule.get("concurrency")
    all_points: list[RegimePoint] = []
    checked: list[RegimePoint] = []
    for (a, wid, conc, m), comp in sorted(evidence.comparisons.items()):
        if a != arm.name or m != metric or (concurrency is not None and conc not in concurrency):
            continue
        wl = evidence.campaign.workload(wid)
        point = RegimePoint(
            workload=wid,
            prompt_tokens=wl.prompt_tokens,
            ratio=comp.ratio,
            ci_low=math.exp(comp.ci_low) if math.isfinite(comp.ci_low) else None,
            ci_high=math.exp(comp.ci_high) if math.isfinite(comp.ci_high) else None,
            outcome=comp.outcome,
        )
        all_points.append(point)
        if wid in listed:
            checked.append(point)
    if not checked:
        return MISSING, None, listed, f"{arm.name}: no {metric} comparison at {', '.join(listed)}"
    ordered = sorted(all_points, key=lambda p: (p.prompt_tokens or 0, p.workload))
    profile = ", ".join(f"{p.workload} {p.ratio:.3f}x ({p.outcome})" for p in ordered)
    cross = crossing(all_points)
    detail = f"{arm.name}: ratio to off by depth: {profile}"
    if cross is not None:
        detail += f"; loses from {cross} onward"
    losing = [
        p.workload
        for p in sorted(checked, key=lambda p: (p.prompt_tokens or 0, p.workload))
        if p.outcome == cmp.WORSE
    ]
    if losing:
        return FAIL, min(p.ratio for p in checked), listed, detail + f"; loses at {', '.join(losing)}"
    if all(p.outcome in (cmp.BETTER, cmp.EQUIVALENT) for p in checked):
        return PASS, min(p.ratio for p in checked), listed, detail
    return UNRESOLVED, min(p.ratio for p in checked), listed, detail


def ttft(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    limit = 1.0 + float(rule.get("max_regression"))
    cells = [
        c
        for c in _cells(evidence, arm, rule, "ttft_ms")
        if evidence.comparison(arm.name, c[0], c[1], "ttft_ms") is not None
    ]
    if not cells:
        return MISSING, None, limit, f"{arm.name}: no TTFT comparison with its control"
    worst = 0.0
    parts = []
    for workload, conc in cells:
        comp = evidence.comparison(arm.name, workload, conc, "ttft_ms")
        assert comp is not None
        worst = max(worst, comp.ratio)
        parts.append(f"{_cell_label(workload, conc)} {comp.ratio:.2f}x")
    detail = f"{arm.name}: TTFT ratio to off (median of boot medians): " + ", ".join(parts)
    if worst > limit:
        return FAIL, worst, limit, detail + f"; above the {limit:.2f}x limit"
    return PASS, worst, limit, detail


def round_economics_rule(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    acc = evidence.acceptance.get(arm.name)
    mal = None if acc is None or acc.primary is None else acc.primary.mean_acceptance_length
    if mal is None and acc is not None:
        mal = next((s.mean_acceptance_length for s in acc.surfaces if s.mean_acceptance_length), None)
    if mal is None:
        return MISSING, None, None, f"{arm.name}: no mean acceptance length for round economics"
    controls = [c.name for c in evidence.campaign.controls(arm.family)]
    parts = []
    exceeded = False
    worst_cost = None
    for workload, conc in _cells(evidence, arm, rule, "decode_tps"):
        mine = evidence.cell(arm.name, workload, conc, "decode_tps")
        offs = [evidence.cell(c, workload, conc, "decode_tps") for c in controls]
        off_vals = [o.median for o in offs if o is not None]
        if mine is None or not off_vals:
            continue
        econ = round_economics(sorted(off_vals)[len(off_vals) // 2], mine.median, mal, arm.spec.k)
        if econ is None:
            continue
        worst_cost = (
            econ.cost_in_baseline_steps
            if worst_cost is None
            else max(worst_cost, econ.cost_in_baseline_steps)
        )
        text = (
            f"{_cell_label(workload, conc)}: step {econ.baseline_step_ms:.1f} ms, round "
            f"{econ.round_ms:.1f} ms, {econ.tokens_per_round:.2f} tokens/round, cost "
            f"{econ.cost_in_baseline_steps:.2f} baseline steps"
        )
        if econ.exceeds_max_return:
            exceeded = True
            text += f" > the {econ.max_tokens_per_round} tokens a round can return at most"
        parts.append(text)
    if not parts:
        return MISSING, None, None, f"{arm.name}: no decode rates beside the control's"
    detail = f"{arm.name}: " + "; ".join(parts)
    return (FAIL if exceeded else PASS), worst_cost, (None if arm.spec.k is None else arm.spec.k + 1), detail


def boot_ok(evidence: Evidence, arm: Arm, rule: Rule) -> tuple[str, Any, Any, str]:
    mine = evidence.boot_records.get(arm.name, ())
    failed = [b for b in mine if b["status"] == "failed"]
    n_requests, errors = evidence.request_counts.get(arm.name, (0, 0))
    rate = errors / n_requests if n_requests else 0.0
    if not mine and not n_requests:
        return MISSING, None, None, f"{arm.name}: no boot or request records"
    failures = []
    if len(failed) > int(rule.get("max_failed_boots")):
        reasons = "; ".join(sorted({str(b["error"]) for b in failed}))
        failures.append(f"{len(failed)} of {len(mine)} boots failed ({reasons})")
    if rate > float(rule.get("max_error_rate")):
        failures.append(f"{errors} of {n_requests} requests failed ({rate * 100:.1f}%)")
    if rule.get("check_observed_k") and arm.spec.k is not None:
        seen = {
            int(b["observed_k"])
            for b in mine
            if isinstance(b["observed_k"], int | float) and not math.isnan(b["observed_k"])
        }
        wrong = sorted(k for k in seen if k != arm.spec.k)
        if wrong:
            failures.append(f"the server ran k={wrong[0]} where the arm asks for k={arm.spec.k}")
    detail = f"{arm.name}: {len(mine) - len(failed)}/{len(mine)} boots ready, {errors} request errors"
    if failures:
        return FAIL, len(failed), rule.get("max_failed_boots"), f"{arm.name}: " + "; ".join(failures)
    return PASS, len(failed), rule.get("max_failed_boots"), detail


EVALUATORS: dict[str, Callable[[Evidence, Arm, Rule], tuple[str, Any, Any, str]]] = {
    "beats_target": beats_target,
    "faster_than_off": faster_than_off,
    "stable_acceptance": stable_acceptance,
    "kv_ceiling": kv_ceiling_rule,
    "coherence": coherence,
    "identity": identity,
    "likelihood": likelihood,
    "context_regime": context_regime,
    "ttft": ttft,
    "round_economics": round_economics_rule,
    "boot_ok": boot_ok,
}
CONTROL_KINDS = ("beats_target", "boot_ok", "coherence")  # also reported for control arms


def evaluate(evidence: Evidence, arm: Arm, rule: Rule) -> RuleOutcome:
    """Apply one rule to one arm; on_missing decides what missing evidence means."""
    status, value, threshold, detail = EVALUATORS[rule.kind](evidence, arm, rule)
    passed: bool | None
    if status == PASS:
        passed = True
    elif status == FAIL:
        passed = False
    elif status == MISSING and rule.on_missing == "reject":
        passed = False
        detail += " (rejected: the policy treats missing evidence as failing)"
    elif status == MISSING and rule.on_missing == "accept":
        passed = True
        detail += " (on_missing = accept)"
    else:
        passed = None
    return RuleOutcome(
        rule=rule.id,
        kind=rule.kind,
        severity=rule.severity,
        passed=passed,
        status=status,
        value=value,
        threshold=threshold,
        detail=detail,
    )
