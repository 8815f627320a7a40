"""Campaign-level controls: the floor, drift and null control, a blind or disturbed harness, void arms."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mtpverdict._text import pct
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import ControlResult, ControlStatus
from mtpverdict.formats.policy import FloorMode
from mtpverdict.formats.results import Arm

HARNESS_OUTLIER_FACTOR = 5.0  # a run 5x off its cell's median is not noise: the client or server stalled


def void_reason(evidence: Evidence, arm: Arm) -> str | None:
    """Positive control (a): an arm whose acceptance is ~0 measured a broken head, not speculation."""
    controls = evidence.policy.controls
    acc = evidence.acceptance.get(arm.name)
    if acc is None or acc.primary is None:
        return None
    p = acc.primary
    if p.draft_tokens is not None and p.accepted_tokens is not None:
        if p.draft_tokens < controls.void_min_drafted or p.ci_high is None:
            return None
        if p.ci_high < controls.void_max_acceptance:
            return (
                f"acceptance {p.accepted_tokens}/{p.draft_tokens} = {p.rate * 100 if p.rate else 0:.1f}% "
                f"(upper bound {p.ci_high * 100:.1f}%, {p.source}) is below "
                f"{controls.void_max_acceptance * 100:.0f}%: a broken or uninitialised head, not "
                "speculation"
            )
        return None
    if p.rate is not None and p.rate < controls.void_max_acceptance:
        return (
            f"reported acceptance {p.rate * 100:.1f}% (sample size not recorded) is below "
            f"{controls.void_max_acceptance * 100:.0f}%: a broken head, not speculation"
        )
    return None


def blind_check(evidence: Evidence) -> ControlResult:
    """Positive control (b): aggregate throughput must rise with concurrency inside every arm."""
    min_gain = evidence.policy.controls.blind_min_gain
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
            if gain < min_gain:
                failures.append(
                    f"{arm.name} on {wl.id}: aggregate {low.median:.1f} tok/s at c="
                    f"{low.concurrency} vs {high.median:.1f} at c={high.concurrency} "
                    f"({gain * 100:+.1f}%)"
                )
    if not tested:
        return ControlResult(
            "blind",
            ControlStatus.UNTESTABLE,
            "harness-blind control not testable: no arm was measured at two concurrency levels",
            None,
        )
    if failures:
        return ControlResult(
            "blind",
            ControlStatus.FAIL,
            "harness blind: aggregate throughput does not rise with "
            f"concurrency by {min_gain * 100:.0f}% ({'; '.join(failures[:3])}"
            f"{'; ...' if len(failures) > 3 else ''}); a harness that cannot see batching "
            "cannot decide",
            None,
        )
    return ControlResult(
        "blind",
        ControlStatus.PASS,
        f"aggregate throughput rises with concurrency in all {tested} arm-workload series",
        None,
    )


def harness_check(evidence: Evidence) -> ControlResult | None:
    """Runs whose decode rate is 5x away from their cell's median: a starved client reading a burst of
    buffered deltas at once, or a stalled server. Medians keep them from moving a verdict; they are
    reported so a reader knows the harness was disturbed."""
    values = evidence.tables.values
    runs = evidence.tables.runs
    sel = values[(values["metric"] == "decode_tps") & (values["origin"] == "request")]
    bursts = int(runs["n_burst"].sum()) if len(runs) else 0
    burst_text = (
        f"; {bursts} streams arrived in a burst (read from a buffer, most deltas within 200 us) and "
        "were left out of decode and TTFT"
        if bursts
        else ""
    )
    if sel.empty:
        return (
            None
            if not bursts
            else ControlResult("harness", ControlStatus.WARN, burst_text[2:], float(bursts))
        )
    median = sel.groupby(["arm", "boot", "workload", "concurrency"])["value"].transform("median")
    ratio = sel["value"] / median
    odd = sel[(ratio > HARNESS_OUTLIER_FACTOR) | (ratio < 1 / HARNESS_OUTLIER_FACTOR)]
    if odd.empty:
        return ControlResult(
            "harness",
            ControlStatus.WARN if bursts else ControlStatus.PASS,
            f"no run's decode rate is {HARNESS_OUTLIER_FACTOR:.0f}x away from its cell's median{burst_text}",
            float(bursts),
        )
    shown = ", ".join(
        f"{r.arm} boot {r.boot} {r.workload} c={r.concurrency} rep {r.rep} ({r.value:,.0f} tok/s)"
        for r in odd.head(4).itertuples()
    )
    return ControlResult(
        "harness",
        ControlStatus.WARN,
        f"{len(odd)} of {len(sel)} runs have a decode rate "
        f"{HARNESS_OUTLIER_FACTOR:.0f}x away from their cell's median ({shown}"
        f"{', ...' if len(odd) > 4 else ''}): the client read buffered deltas in a burst or "
        f"the server stalled; medians keep them from moving the verdict{burst_text}",
        float(len(odd)),
    )


@dataclass(frozen=True, slots=True)
class _ControlBoots:
    """One family's control boots, each reduced to one residual, with its position in the campaign."""

    label: str
    names: tuple[tuple[str, int], ...]  # (arm, boot)
    order: npt.NDArray[np.float64]
    residual: npt.NDArray[np.float64]


def _control_boots(evidence: Evidence, family: str, label: str) -> _ControlBoots | None:
    """Each control boot's log decode rate minus its cell's mean, averaged over its cells (one boot's
    cells share its state, so they are one observation)."""
    controls = evidence.control_names(family)
    boots = evidence.tables.boots
    sub = boots[boots["arm"].isin(controls) & (boots["metric"] == "decode_tps")]
    if sub.empty:
        return None
    centred = sub["log_value"] - sub.groupby(["workload", "concurrency"])["log_value"].transform("mean")
    per_boot = centred.groupby([sub["arm"], sub["boot"]]).mean()
    recorded = {(a, b.boot): float(b.order) for a, infos in evidence.boots.items() for b in infos}
    arm_order = {a.name: a.order for a in evidence.campaign.arms}
    names = tuple((str(a), int(b)) for a, b in per_boot.index)
    order = np.array([recorded.get(n, float(arm_order[n[0]])) for n in names], dtype=float)
    return _ControlBoots(label, names, order, per_boot.to_numpy(dtype=float))


def drift_checks(evidence: Evidence) -> list[ControlResult]:
    """Null and drift controls from each family's control boots in boot order (decode tok/s).

    With three or more control boots, drift is the OLS slope of residual on boot order times the span
    of the campaign, flagged when the slope is significant at alpha AND larger than max_drift: under no
    drift it fires at most alpha of the time. With exactly two (one off_A/off_B pair) no test exists;
    the difference itself is judged against max_drift, and the null control is untestable.
    """
    out = []
    multi = len(evidence.campaign.families) > 1
    for family in evidence.campaign.families:
        found = _control_boots(evidence, family, f"{family}: " if multi else "")
        if found is None:
            continue
        if len(found.names) < 2:
            arm, boot = found.names[0]
            out.append(
                ControlResult(
                    "drift",
                    ControlStatus.UNTESTABLE,
                    f"{found.label}no bracketing control pair (one control boot measured: {arm} boot "
                    f"{boot}): drift across the campaign and the null control cannot be checked",
                    None,
                )
            )
        elif np.ptp(found.order) > 0:
            out.append(
                _pair_drift(evidence, found) if len(found.names) == 2 else _slope_drift(evidence, found)
            )
    return out


def _pair_drift(evidence: Evidence, boots: _ControlBoots) -> ControlResult:
    max_drift = evidence.policy.controls.max_drift
    drift = float(boots.residual[np.argmax(boots.order)] - boots.residual[np.argmin(boots.order)])
    if abs(drift) > math.log1p(max_drift):
        return ControlResult(
            "drift",
            ControlStatus.FAIL,
            f"{boots.label}off_A and off_B differ by {pct(drift)} (first to last boot), beyond the "
            f"{max_drift * 100:.0f}% the policy allows; one pair cannot tell drift from boot noise",
            drift,
        )
    return ControlResult(
        "drift",
        ControlStatus.PASS,
        f"{boots.label}off_A and off_B differ by {pct(drift)}, within {max_drift * 100:.0f}%; null control "
        "untestable with one pair (one degree of freedom)",
        drift,
    )


def _slope_drift(evidence: Evidence, boots: _ControlBoots) -> ControlResult:
    from scipy import stats as sps

    policy = evidence.policy
    fit = sps.linregress(boots.order, boots.residual)
    drift = float(fit.slope * np.ptp(boots.order))
    p = float(fit.pvalue)
    text = (
        f"{boots.label}control boots drift {pct(drift)} from the first to the last boot (slope p={p:.3g}, "
        f"{len(boots.residual)} control boots)"
    )
    if p < policy.alpha and abs(drift) > math.log1p(policy.controls.max_drift):
        return ControlResult(
            "drift",
            ControlStatus.FAIL,
            f"{text}: beyond noise and beyond the {policy.controls.max_drift * 100:.0f}% the policy allows",
            drift,
        )
    return ControlResult("drift", ControlStatus.PASS, f"{text}: null control passes", drift)


_UNKNOWN_FLOOR = {
    FloorMode.INCONCLUSIVE: "no difference between arms can be told from boot-to-boot noise, so "
    "faster-than-off claims stay inconclusive",
    FloorMode.WITHIN_BOOT: "comparisons use within-boot precision only (runs inside one boot), which "
    "cannot see boot-to-boot variance and overstates certainty",
}


def floor_checks(evidence: Evidence) -> list[ControlResult]:
    """The sensitivity floor of each family at the selection metric: what its comparisons can resolve."""
    policy = evidence.policy
    metric = str(policy.selection.metric)
    out = []
    multi = len(evidence.campaign.families) > 1
    for family in evidence.campaign.families:
        floors = [f for f in evidence.floors if f.family == family and f.metric == metric]
        if not floors:
            continue
        known = [f for f in floors if f.known]
        label = f"{family}: " if multi else ""
        if not known:
            implication = _UNKNOWN_FLOOR.get(
                policy.floor.when_unknown,
                f"the policy assumes a {(policy.floor.assumed or 0) * 100:.0f}% floor, "
                "an assumption this campaign does not check",
            )
            out.append(
                ControlResult(
                    "floor",
                    ControlStatus.INFO,
                    f"{label}sensitivity floor unknown: no bracketing off_A/off_B pair and single boots "
                    f"per arm; {implication}",
                    None,
                )
            )
            continue
        worst = max(known, key=lambda f: f.floor)
        pooled_s2 = float(np.mean([f.s**2 for f in known]))
        text = (
            f"{label}cannot resolve effects smaller than {math.expm1(worst.floor) * 100:.1f}% "
            f"({metric}, worst cell {worst.workload} c={worst.concurrency}; "
            f"boot-level sd {math.sqrt(pooled_s2) * 100:.1f}% pooled over {len(known)} cells; "
            f"{worst.df} degrees of freedom from {', '.join(worst.sources)})"
        )
        if worst.multiplier_vs_pair is not None:
            multiplier = f"{worst.multiplier_vs_pair:.1f}x"
            text += f"; with one off_A/off_B pair the floor is {multiplier} |off_B - off_A|, not 1x"
        out.append(ControlResult("floor", ControlStatus.INFO, text, math.expm1(worst.floor)))
    return out


def failed_boots_check(evidence: Evidence) -> ControlResult | None:
    """Boots whose server never served (their arms' boot_ok rules decide what that means)."""
    failed = [
        f"{arm} boot {b.boot} ({b.error})"
        for arm, infos in sorted(evidence.boots.items())
        for b in sorted(infos, key=lambda b: b.boot)
        if b.status == "failed"
    ]
    if not failed:
        return None
    return ControlResult("failed_boots", ControlStatus.FAIL, "failed boots: " + ", ".join(failed), None)
