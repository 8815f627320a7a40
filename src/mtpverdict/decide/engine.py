"""The decision engine: controls, per-arm verdicts from the policy's rules, selection, stated reasons."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from mtpverdict.decide.evidence import Evidence, NoiseHistory, gather
from mtpverdict.formats.results import Arm
from mtpverdict.formats.results_io import Results
from mtpverdict.rules.evaluate import CONTROL_KINDS, RuleOutcome, evaluate, pct
from mtpverdict.rules.policy import Policy
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.runs import HIGHER_IS_BETTER

DECISIONS = ("promote", "keep_mtp_disabled", "keep_reference", "inconclusive")
VERDICTS = ("eligible", "rejected", "void", "control", "inconclusive")
DECISION_FORMAT = "mtpverdict.decision/1"


@dataclass(frozen=True, slots=True)
class ControlCheck:
    """One campaign-level control: did it pass, and what does it mean for the decision."""

    name: str  # null | drift | blind | void | failed_boots | floor
    status: str  # pass | fail | untestable | info
    detail: str
    value: float | None = None


@dataclass(frozen=True, slots=True)
class ArmVerdict:
    """An arm's verdict and every rule's outcome for it."""

    arm: Arm
    verdict: str
    outcomes: tuple[RuleOutcome, ...]
    void_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The decision, its stated reasons, and everything needed to re-derive it."""

    decision: str
    selected: Arm | None
    reasons: tuple[str, ...]
    arms: tuple[ArmVerdict, ...]
    controls: tuple[ControlCheck, ...]
    evidence: Evidence
    selection_note: str
    provisional: bool


# --------------------------------------------------------------------------------------------------
# controls


def _void_check(evidence: Evidence, arm: Arm) -> str | None:
    """Positive control (a): an arm whose acceptance is ~0 measured a broken head, not speculation."""
    policy = evidence.policy
    acc = evidence.acceptance.get(arm.name)
    if acc is None or acc.primary is None:
        return None
    p = acc.primary
    if p.draft_tokens is not None and p.accepted_tokens is not None:
        if p.draft_tokens < policy.void_min_drafted or p.ci_high is None:
            return None
        if p.ci_high < policy.void_max_acceptance:
            return (
                f"acceptance {p.accepted_tokens}/{p.draft_tokens} = {p.rate * 100 if p.rate else 0:.1f}% "
                f"(upper bound {p.ci_high * 100:.1f}%, {p.source}) is below "
                f"{policy.void_max_acceptance * 100:.0f}%: a broken or uninitialised head, not "
                "speculation"
            )
        return None
    if p.rate is not None and p.rate < policy.void_max_acceptance:
        return (
            f"reported acceptance {p.rate * 100:.1f}% (sample size not recorded) is below "
            f"{policy.void_max_acceptance * 100:.0f}%: a broken head, not speculation"
        )
    return None


def _blind_check(evidence: Evidence) -> ControlCheck:
    """Positive control (b): aggregate throughput must rise with concurrency inside every arm."""
    policy = evidence.policy
    failures = []
    tested = 0
    for arm in evidence.campaign.arms:
        for wl in evidence.campaign.workloads:
            cells = [c for c in evidence.arm_cells(arm.name, "aggregate_tps") if c.workload == wl.id]
            if len(cells) < 2:
                continue
            tested += 1
            low = min(cells, key=lambda c: c.concurrency)
            high = max(cells, key=lambda c: c.concurrency)
            gain = high.median / low.median - 1.0
            if gain < policy.blind_min_gain:
                failures.append(
                    f"{arm.name} on {wl.id}: aggregate {low.median:.1f} tok/s at c="
                    f"{low.concurrency} vs {high.median:.1f} at c={high.concurrency} "
                    f"({gain * 100:+.1f}%)"
                )
    if not tested:
        return ControlCheck(
            "blind",
            "untestable",
            "harness-blind control not testable: no arm was measured at two concurrency levels",
        )
    if failures:
        return ControlCheck(
            "blind",
            "fail",
            "harness blind: aggregate throughput does not rise with "
            f"concurrency by {policy.blind_min_gain * 100:.0f}% ({'; '.join(failures[:3])}"
            f"{'; ...' if len(failures) > 3 else ''}); a harness that cannot see batching "
            "cannot decide",
        )
    return ControlCheck(
        "blind", "pass", f"aggregate throughput rises with concurrency in all {tested} arm-workload series"
    )


HARNESS_OUTLIER_FACTOR = 5.0  # a run 5x off its cell's median is not noise: the client or server stalled


def _harness_check(evidence: Evidence) -> ControlCheck | None:
    """Runs whose decode rate is 5x away from their cell's median: a starved client reading a burst of
    buffered deltas at once, or a stalled server. Medians keep them from moving a verdict; they are
    reported so a reader knows the harness was disturbed."""
    values = evidence.values
    sel = values[(values["metric"] == "decode_tps") & (values["origin"] == "request")]
    bursts = int(evidence.runs["n_burst"].sum()) if len(evidence.runs) else 0
    burst_text = (
        f"; {bursts} streams arrived in a burst (read from a buffer, most deltas within 200 us) and "
        "were left out of decode and TTFT"
        if bursts
        else ""
    )
    if sel.empty:
        return None if not bursts else ControlCheck("harness", "warn", burst_text[2:], float(bursts))
    median = sel.groupby(["arm", "boot", "workload", "concurrency"])["value"].transform("median")
    ratio = sel["value"] / median
    odd = sel[(ratio > HARNESS_OUTLIER_FACTOR) | (ratio < 1 / HARNESS_OUTLIER_FACTOR)]
    if odd.empty:
        return ControlCheck(
            "harness",
            "warn" if bursts else "pass",
            f"no run's decode rate is {HARNESS_OUTLIER_FACTOR:.0f}x away from its cell's median{burst_text}",
            float(bursts),
        )
    shown = ", ".join(
        f"{r.arm} boot {r.boot} {r.workload} c={r.concurrency} rep {r.rep} ({r.value:,.0f} tok/s)"
        for r in odd.head(4).itertuples()
    )
    return ControlCheck(
        "harness",
        "warn",
        f"{len(odd)} of {len(sel)} runs have a decode rate "
        f"{HARNESS_OUTLIER_FACTOR:.0f}x away from their cell's median ({shown}"
        f"{', ...' if len(odd) > 4 else ''}): the client read buffered deltas in a burst or "
        f"the server stalled; medians keep them from moving the verdict{burst_text}",
        float(len(odd)),
    )


def _drift_checks(evidence: Evidence) -> list[ControlCheck]:
    """Null and drift controls from the control arms' boots in boot order (decode tok/s).

    Each control boot is reduced to one residual: its log decode rate minus the cell's mean, averaged
    over the cells it measured (cells of one boot share its state, so they are one observation).
    With three or more control boots, drift is the OLS slope of residual on boot order times the span
    of the campaign, flagged when the slope is significant at alpha AND larger than max_drift: under no
    drift it fires at most alpha of the time. With exactly two (one off_A/off_B pair) no test exists;
    the difference itself is judged against max_drift, and the null control is untestable.
    """
    from scipy import stats as sps

    policy = evidence.policy
    out = []
    boots = evidence.results.boots
    order = {
        (str(a), int(b)): int(o) for a, b, o in zip(boots["arm"], boots["boot"], boots["order"], strict=True)
    }
    arm_order = {a.name: a.order for a in evidence.campaign.arms}
    multi = len(evidence.campaign.families) > 1
    for family in evidence.campaign.families:
        label = f"{family}: " if multi else ""
        controls = [a.name for a in evidence.campaign.controls(family)]
        sub = evidence.boots[
            evidence.boots["arm"].isin(controls) & (evidence.boots["metric"] == "decode_tps")
        ]
        if sub.empty:
            continue
        centred = sub["log_value"] - sub.groupby(["workload", "concurrency"])["log_value"].transform("mean")
        per_boot = centred.groupby([sub["arm"], sub["boot"]]).mean()
        if len(per_boot) < 2:
            out.append(
                ControlCheck(
                    "drift",
                    "untestable",
                    f"{label}no bracketing control pair (one control boot measured: "
                    f"{per_boot.index[0][0]} boot {per_boot.index[0][1]}): drift across the campaign and the "
                    "null control cannot be checked",
                )
            )
            continue
        x = np.array([order.get((str(a), int(b)), arm_order[str(a)]) for a, b in per_boot.index], dtype=float)
        y = per_boot.to_numpy(dtype=float)
        if np.ptp(x) == 0:
            continue
        limit = math.log1p(policy.max_drift)
        if len(y) == 2:
            drift = float(y[np.argmax(x)] - y[np.argmin(x)])
            if abs(drift) > limit:
                out.append(
                    ControlCheck(
                        "drift",
                        "fail",
                        f"{label}off_A and off_B differ by {pct(drift)} "
                        f"(first to last boot), beyond the {policy.max_drift * 100:.0f}% the "
                        "policy allows; one pair cannot tell drift from boot noise",
                        drift,
                    )
                )
            else:
                out.append(
                    ControlCheck(
                        "drift",
                        "pass",
                        f"{label}off_A and off_B differ by {pct(drift)}, "
                        f"within {policy.max_drift * 100:.0f}%; null control untestable "
                        "with one pair (one degree of freedom)",
                        drift,
                    )
                )
            continue
        fit = sps.linregress(x, y)
        drift = float(fit.slope * np.ptp(x))
        p = float(fit.pvalue)
        text = (
            f"{label}control boots drift {pct(drift)} from the first to the last boot (slope p={p:.3g}, "
            f"{len(y)} control boots)"
        )
        if p < policy.alpha and abs(drift) > limit:
            out.append(
                ControlCheck(
                    "drift",
                    "fail",
                    f"{text}: beyond noise and beyond the {policy.max_drift * 100:.0f}% the policy allows",
                    drift,
                )
            )
        else:
            out.append(ControlCheck("drift", "pass", f"{text}: null control passes", drift))
    return out


def _floor_checks(evidence: Evidence) -> list[ControlCheck]:
    policy = evidence.policy
    out = []
    for family in evidence.campaign.families:
        floors = [f for f in evidence.floors if f.family == family and f.metric == policy.selection_metric]
        if not floors:
            continue
        known = [f for f in floors if math.isfinite(f.floor)]
        label = f"{family}: " if len(evidence.campaign.families) > 1 else ""
        if not known:
            mode = policy.floor_when_unknown
            implication = {
                "inconclusive": "no difference between arms can be told from boot-to-boot noise, so "
                "faster-than-off claims stay inconclusive",
                "within_boot": "comparisons use within-boot precision only (runs inside one boot), which "
                "cannot see boot-to-boot variance and overstates certainty",
                "assume": f"the policy assumes a {(policy.floor_assumed or 0) * 100:.0f}% floor, "
                "an assumption this campaign does not check",
            }[mode]
            out.append(
                ControlCheck(
                    "floor",
                    "info",
                    f"{label}sensitivity floor unknown: no bracketing "
                    f"off_A/off_B pair and single boots per arm; {implication}",
                )
            )
            continue
        worst = max(known, key=lambda f: f.floor)
        pooled_s2 = float(np.mean([f.s**2 for f in known]))
        text = (
            f"{label}cannot resolve effects smaller than {math.expm1(worst.floor) * 100:.1f}% "
            f"({policy.selection_metric}, worst cell {worst.workload} c={worst.concurrency}; "
            f"boot-level sd {math.sqrt(pooled_s2) * 100:.1f}% pooled over {len(known)} cells; "
            f"{worst.df} degrees of freedom from {', '.join(worst.sources)})"
        )
        if worst.multiplier_vs_pair is not None:
            text += (
                f"; with one off_A/off_B pair the floor is {worst.multiplier_vs_pair:.1f}x "
                "|off_B - off_A|, not 1x"
            )
        out.append(ControlCheck("floor", "info", text, math.expm1(worst.floor)))
    return out


# --------------------------------------------------------------------------------------------------
# verdicts and selection


def _verdict(arm: Arm, outcomes: list[RuleOutcome], void: str | None) -> str:
    if arm.is_control:
        return "control"
    if void:
        return "void"
    vetoes = [o for o in outcomes if o.severity == "veto"]
    if any(o.passed is False for o in vetoes):
        return "rejected"
    if any(o.passed is None for o in vetoes):
        return "inconclusive"
    return "eligible"


def _selection_cell(evidence: Evidence, arms: Sequence[Arm]) -> tuple[str, int] | None:
    policy = evidence.policy
    metric = policy.selection_metric
    keys = sorted({(c.workload, c.concurrency) for a in arms for c in evidence.arm_cells(a.name, metric)})
    if policy.selection_workload is not None:
        keys = [k for k in keys if k[0] == policy.selection_workload]
    if policy.selection_concurrency is not None:
        keys = [k for k in keys if k[1] == policy.selection_concurrency]
    if not keys:
        return None
    order = {w.id: i for i, w in enumerate(evidence.campaign.workloads)}
    return min(keys, key=lambda k: (order.get(k[0], 999), k[1]))


def _value(evidence: Evidence, arm: Arm, cell: tuple[str, int]) -> float | None:
    found = evidence.cell(arm.name, cell[0], cell[1], evidence.policy.selection_metric)
    return None if found is None else found.median


def _rank(evidence: Evidence, arms: Sequence[Arm], cell: tuple[str, int]) -> list[tuple[Arm, float]]:
    higher = HIGHER_IS_BETTER[evidence.policy.selection_metric]
    ranked = [(a, v) for a in arms if (v := _value(evidence, a, cell)) is not None]
    return sorted(ranked, key=lambda av: (-av[1] if higher else av[1], av[0].order, av[0].name))


def _versus(
    evidence: Evidence, challengers: Sequence[Arm], reference: Arm, cell: tuple[str, int]
) -> list[tuple[Arm, cmp.Comparison]]:
    """Each challenger against the reference arm at the selection cell, at the boot level (Holm)."""
    policy = evidence.policy
    metric = policy.selection_metric
    boots = evidence.boots
    sel = boots[
        (boots["workload"] == cell[0]) & (boots["concurrency"] == cell[1]) & (boots["metric"] == metric)
    ]
    ref_vals = sel[sel["arm"] == reference.name]["log_value"].to_numpy(dtype=float)
    family_floor = evidence.floor(reference.family, cell[0], cell[1], metric)
    variance = cmp.Variance(math.nan, 0, ())
    if family_floor is not None and family_floor.df > 0:
        variance = cmp.Variance(family_floor.s**2, family_floor.df, family_floor.sources)
    raw = []
    for arm in challengers:
        vals = sel[sel["arm"] == arm.name]["log_value"].to_numpy(dtype=float)
        if vals.size == 0 or ref_vals.size == 0:
            continue
        raw.append(
            (
                arm,
                cmp.compare_boots(
                    vals,
                    ref_vals,
                    variance,
                    alpha=policy.alpha,
                    family_size=len(challengers),
                    equivalence_margin=policy.equivalence_margin,
                    higher_is_better=HIGHER_IS_BETTER[metric],
                ),
            )
        )
    classified = cmp.classify([c for _, c in raw], alpha=policy.alpha)
    return [(arm, c) for (arm, _), c in zip(raw, classified, strict=True)]


def _k_key(arm: Arm) -> tuple[int, int]:
    return (arm.spec.k if arm.spec.k is not None else 10**6, arm.order)


def _select(evidence: Evidence, eligible: list[Arm], mode: str) -> tuple[Arm | None, str, str]:
    """Pick among eligible arms; return (arm, decision, sentence)."""
    policy = evidence.policy
    metric = policy.selection_metric
    cell = _selection_cell(evidence, eligible)
    if cell is None:
        return None, "inconclusive", f"no eligible arm has {metric} at the selection cell"
    ranked = _rank(evidence, eligible, cell)
    if not ranked:
        return None, "inconclusive", f"no eligible arm has {metric} at {cell[0]} c={cell[1]}"
    where = f"{metric} at {cell[0]} c={cell[1]}"
    best, best_value = ranked[0]
    if mode == "fastest":
        text = f"selection fastest: {best.name} is the fastest eligible arm ({best_value:.1f}, {where})"
        if len(ranked) > 1:
            runner = ranked[1][0]
            lead = _versus(evidence, [best], runner, cell)
            if lead and lead[0][1].outcome == cmp.BETTER:
                text += f"; its lead over {runner.name} ({pct(lead[0][1].estimate)}) is resolved"
            else:
                est = pct(math.log(best_value / ranked[1][1]))
                text += (
                    f"; its lead over {runner.name} ({est}) is not resolved beyond the floor, so the "
                    "two are not told apart by this evidence"
                )
        return best, "promote", text
    if mode == "boring":
        higher = HIGHER_IS_BETTER[metric]
        tol = policy.selection_tolerance
        within = [
            a for a, v in ranked if (v >= best_value * (1 - tol) if higher else v <= best_value * (1 + tol))
        ]
        pick = min(within, key=_k_key)
        value = next(v for a, v in ranked if a is pick)
        text = (
            f"selection boring: {pick.name} is the smallest depth within {tol * 100:.0f}% of the fastest "
            f"eligible arm {best.name} ({value:.1f} vs {best_value:.1f}, {where})"
        )
        return pick, "promote", text
    # reference
    ref_name = policy.selection_reference
    reference = next((a for a in eligible if a.name == ref_name), None)
    if reference is None:
        fallback = policy.selection_fallback
        if fallback == "inconclusive":
            return (
                None,
                "inconclusive",
                f"the reference {ref_name} is not eligible and the policy has no fallback",
            )
        arm, decision, text = _select(evidence, eligible, fallback)
        return arm, decision, f"the reference {ref_name} is not eligible; fallback {fallback}: {text}"
    others = [a for a, _ in ranked if a is not reference]
    versus = _versus(evidence, others, reference, cell)
    better = [(a, c) for a, c in versus if c.outcome == cmp.BETTER]
    if better:
        winner, comp = max(better, key=lambda ac: ac[1].estimate)
        return (
            winner,
            "promote",
            (
                f"selection reference: {winner.name} is faster than the reference "
                f"{reference.name} beyond the floor ({pct(comp.estimate)}, {where}) and "
                "stable; it replaces the reference"
            ),
        )
    notes = []
    for arm, comp in versus:
        if comp.estimate > 0:
            why = (
                (
                    "the floor is unknown (no bracketing control pair, single boots), so the difference "
                    "cannot be told from boot-to-boot noise"
                )
                if comp.method == cmp.NONE
                else f"not resolved beyond the {pct(comp.floor)} floor"
            )
            notes.append(f"{arm.name} is {pct(comp.estimate)} over {reference.name} but {why}")
    text = f"selection reference: keep {reference.name}"
    if notes:
        text += "; " + "; ".join(notes)
    return reference, "keep_reference", text


# --------------------------------------------------------------------------------------------------


def decide(results: Results, policy: Policy, history: Sequence[NoiseHistory] = ()) -> Decision:
    """Turn a results directory and a policy into a decision with stated reasons."""
    looks = results.campaign.sequential_looks
    if looks > 1:  # an adaptive campaign looked up to `looks` times: Bonferroni over the looks
        policy = replace(policy, alpha=policy.alpha / looks)
    evidence = gather(results, policy, history)
    campaign = results.campaign
    controls: list[ControlCheck] = []
    controls.extend(_floor_checks(evidence))
    controls.extend(_drift_checks(evidence))
    controls.append(_blind_check(evidence))
    harness = _harness_check(evidence)
    if harness is not None:
        controls.append(harness)
    failed = results.boots[results.boots["status"] == "failed"]
    if len(failed):
        controls.append(
            ControlCheck(
                "failed_boots",
                "fail",
                "failed boots: "
                + ", ".join(f"{r.arm} boot {r.boot} ({r.error})" for r in failed.itertuples()),
            )
        )
    verdicts: list[ArmVerdict] = []
    for arm in campaign.arms:
        rules = [r for r in policy.rules if r.applies_to(arm.name, arm.family)]
        if arm.is_control:
            rules = [r for r in rules if r.kind in CONTROL_KINDS]
        outcomes = [evaluate(evidence, arm, r) for r in rules]
        void = None if arm.is_control else _void_check(evidence, arm)
        verdicts.append(
            ArmVerdict(
                arm=arm, verdict=_verdict(arm, outcomes, void), outcomes=tuple(outcomes), void_reason=void
            )
        )
    voids = [v for v in verdicts if v.verdict == "void"]
    if voids:
        controls.append(
            ControlCheck(
                "void",
                "fail",
                "void arms (acceptance ~0): " + "; ".join(f"{v.arm.name}: {v.void_reason}" for v in voids),
            )
        )
    elif any(not a.is_control for a in campaign.arms):
        controls.append(
            ControlCheck(
                "void", "pass", "every candidate with counted acceptance accepts drafts (positive control)"
            )
        )
    decision, selected, selection_note, blockers = _decide(evidence, verdicts, controls)
    provisional = not any(math.isfinite(f.floor) and f.df >= 3 for f in evidence.floors)
    reasons = _reasons(
        evidence, decision, selected, verdicts, controls, selection_note, blockers, provisional
    )
    return Decision(
        decision=decision,
        selected=selected,
        reasons=tuple(reasons),
        arms=tuple(verdicts),
        controls=tuple(controls),
        evidence=evidence,
        selection_note=selection_note,
        provisional=provisional,
    )


def _decide(
    evidence: Evidence, verdicts: list[ArmVerdict], controls: list[ControlCheck]
) -> tuple[str, Arm | None, str, list[str]]:
    policy = evidence.policy
    blockers = []
    for check in controls:
        if check.status != "fail":
            continue
        if check.name == "blind" and policy.on_blind == "inconclusive":
            blockers.append(check.detail)
        if check.name == "drift" and policy.on_drift == "inconclusive":
            blockers.append(check.detail)
    candidates = [v for v in verdicts if not v.arm.is_control]
    if blockers:
        return "inconclusive", None, "", blockers
    if not candidates:
        return "inconclusive", None, "", ["the campaign has no candidate arm"]
    eligible = [v.arm for v in candidates if v.verdict == "eligible"]
    if eligible:
        arm, decision, note = _select(evidence, eligible, policy.selection_mode)
        return decision, arm, note, []
    undecided = [v for v in candidates if v.verdict == "inconclusive"]
    if undecided:
        return "inconclusive", None, "", [f"{v.arm.name} could not be judged" for v in undecided]
    if all(v.verdict == "void" for v in candidates):
        return (
            "inconclusive",
            None,
            "",
            ["every candidate arm is void: the campaign measured broken heads, not speculation"],
        )
    return "keep_mtp_disabled", None, "", []


def _reasons(
    evidence: Evidence,
    decision: str,
    selected: Arm | None,
    verdicts: list[ArmVerdict],
    controls: list[ControlCheck],
    selection_note: str,
    blockers: list[str],
    provisional: bool,
) -> list[str]:
    campaign = evidence.campaign
    policy = evidence.policy
    reasons: list[str] = []
    if decision == "promote" and selected is not None:
        reasons.append(f"promote {selected.name} ({selected.spec.label()}) under policy {policy.name}")
    elif decision == "keep_reference" and selected is not None:
        reasons.append(
            f"keep the reference {selected.name} ({selected.spec.label()}) under policy {policy.name}"
        )
    elif decision == "keep_mtp_disabled":
        reasons.append(
            f"keep speculation disabled under policy {policy.name}: every candidate arm was rejected or void"
        )
    else:
        reasons.append(f"inconclusive under policy {policy.name}: " + "; ".join(blockers))
    if selection_note:
        reasons.append(selection_note)
    reasons.extend(
        c.detail
        for c in controls
        if (
            c.name in ("floor", "drift", "blind", "failed_boots")
            or (c.name == "harness" and c.status == "warn")
        )
        and not (c.status == "fail" and c.detail in blockers)
    )
    for v in verdicts:
        if v.arm.is_control:
            reasons.extend(f"{o.detail} (control, {o.rule})" for o in v.outcomes if o.kind == "beats_target")
            continue
        if v.verdict == "void":
            reasons.append(f"{v.arm.name} void: {v.void_reason}")
        failed = [o for o in v.outcomes if o.passed is False and o.severity == "veto"]
        reasons.extend(f"{v.arm.name} rejected by {o.rule}: {o.detail}" for o in failed)
        if v.verdict == "inconclusive":  # what is unresolved matters only when nothing rejected the arm
            reasons.extend(
                f"{v.arm.name} unresolved on {o.rule}: {o.detail}"
                for o in v.outcomes
                if o.passed is None and o.severity == "veto"
            )
        if v.verdict != "void":
            reasons.extend(
                f"warning ({o.rule}): {o.detail}"
                for o in v.outcomes
                if o.severity == "warn" and o.passed is not True and o.status != "missing"
            )
        reasons.extend(
            f"{v.arm.name} passes {o.rule} without evidence, as the policy allows: {o.detail}"
            for o in v.outcomes
            if o.status == "missing" and o.passed is True
        )
        if v.verdict == "eligible":
            passed = [o for o in v.outcomes if o.kind in ("beats_target", "faster_than_off")]
            reasons.extend(f"{v.arm.name} eligible: {o.detail}" for o in passed)
    no_evidence: dict[str, list[str]] = {}
    for v in verdicts:
        if v.verdict in ("eligible", "inconclusive"):
            for o in v.outcomes:
                if o.severity == "warn" and o.status == "missing" and o.passed is None:
                    no_evidence.setdefault(o.rule, []).append(v.arm.name)
    reasons.extend(
        f"warning ({rule}): no evidence recorded for {', '.join(arms)}"
        for rule, arms in sorted(no_evidence.items())
    )
    if not evidence.results.summaries.empty:
        arms = sorted(set(evidence.results.summaries["arm"]))
        reasons.append(
            f"summary records only (raw runs lost) for {', '.join(arms)}: weaker evidence, "
            "spread known only where min and max were kept"
        )
    if provisional and decision != "inconclusive":
        reasons.append(
            "provisional: fewer than 3 degrees of freedom for boot-to-boot variance; "
            "more boots per arm (or archived A/A pairs) would firm this up"
        )
    if campaign.sequential_looks > 1:
        reasons.append(
            f"sequential design: up to {campaign.sequential_looks} looks (collect --until-resolved), "
            f"each at alpha {policy.alpha:.4g} = the policy's alpha / {campaign.sequential_looks} "
            "(Bonferroni), so the false-promotion rate over every look stays at the policy's alpha"
        )
    if campaign.synthetic:
        reasons.append("synthetic campaign: generated, not measured")
    return reasons
