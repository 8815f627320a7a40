"""Campaign-level controls: the floor, drift and null control, a blind or disturbed harness, void arms."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mtpverdict._logscale import change
from mtpverdict._text import pct
from mtpverdict.evidence.comparisons import design_cells, usable_history
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import ControlResult, ControlStatus, finite
from mtpverdict.formats.deployment import HostState
from mtpverdict.formats.policy import FloorMode
from mtpverdict.formats.results import Arm
from mtpverdict.stats.blocked import DeviceBootValue
from mtpverdict.stats.drift import SHAPES, DriftCheck, DriftFinding, DriftStatus, control_drift
from mtpverdict.stats.positions import (
    confounded,
    device_position,
    end_positions,
    position_beyond,
    position_failing,
)
from mtpverdict.stats.procedure import BootValue
from mtpverdict.stats.runs import clock_agreement

HARNESS_OUTLIER_FACTOR = 5.0  # a run 5x off its cell's median is not noise: the client or server stalled
# two boots whose every shared run agrees this closely are one measurement recorded twice, exactly or
# near-identically (copied with its timestamps moved by microseconds: 1 us on a 10 ms first token is
# 1e-4). Two independent boots differ by the boot and request noise: in the bundled fixtures the
# closest pair of control boots is 3% apart on its most different run, 300 times this tolerance
DUPLICATE_RTOL = 1e-4
DUPLICATE_MIN_RUNS = 3  # shared runs needed before agreement means anything


def void_reason(evidence: Evidence, arm: Arm) -> str | None:
    """Positive control (a): an arm whose acceptance is ~0 measured a broken head, not speculation."""
    controls = evidence.policy.controls
    acc = (evidence.void_acceptance or evidence.acceptance).get(arm.name)
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


def missingness_check(evidence: Evidence) -> ControlResult | None:
    """Streams set aside by arm: a difference between an arm and its controls refuses that comparison."""
    rows = evidence.missing
    if not rows:
        return None
    runs = evidence.policy.runs
    timing = "the server's own timing" if rows[0].timing == "server" else "the client's timing"
    agreement = clock_agreement(evidence.tables.results.requests) if rows[0].timing == "server" else None
    if agreement is not None:  # the client's clock is the second surface: compared per stream
        ratio, kept, both = agreement
        median = f"{ratio:.3f}x" if math.isfinite(ratio) else "-"
        timing += (
            f" (the client's clock beside it: decode windows {median} the server's, median over the {kept} "
            f"of {both} streams it did not read in a burst)"
        )
    streams = sum(r.streams for r in rows)
    aside = sum(r.set_aside for r in rows)
    if evidence.differing:  # [runs] set_aside = "compare_kept": compared anyway, each difference stated
        found = evidence.differing
        shown = "; ".join(
            f"{r.arm} at {r.workload} c={r.concurrency}: {r.share:.0%} set aside against {r.versus:.0%} "
            f"(Fisher p = {r.p_value:.2g})"
            for r in found[:4]
        )
        more = f"; {len(found) - 4} more" if len(found) > 4 else ""
        return ControlResult(
            "missingness",
            ControlStatus.WARN,
            f"decode and TTFT from {timing}; {aside} of {streams} completed streams set aside; compared on "
            f'the streams kept where they differ by arm ([runs] set_aside = "compare_kept"), which the arm '
            f"may have chosen: {shown}{more}",
            float(len(found)),
        )
    if not evidence.refused:
        return ControlResult(
            "missingness",
            ControlStatus.PASS,
            f"decode and TTFT from {timing}; {aside} of {streams} completed streams set aside, at no cell "
            f"in shares more than {runs.max_missing_gap:.0%} from the controls' that Fisher's exact test "
            f"tells apart at {runs.missing_alpha:g}",
            float(aside),
        )
    shown = "; ".join(f"{r.arm} at {r.workload} c={r.concurrency}: {r.reason}" for r in evidence.refused[:4])
    more = f"; {len(evidence.refused) - 4} more" if len(evidence.refused) > 4 else ""
    return ControlResult(
        "missingness",
        ControlStatus.WARN,
        f"decode and TTFT from {timing}; {aside} of {streams} completed streams set aside, by arm: not "
        f"compared where an arm's share differs from its controls' by more than "
        f"{runs.max_missing_gap:.0%} and Fisher's exact test tells the counts apart at "
        f"{runs.missing_alpha:g} ({shown}{more})",
        float(len(evidence.refused)),
    )


def drift_checks(evidence: Evidence) -> list[ControlResult]:
    """Null control and exchangeability of each family's control boots (decode tok/s), in boot order.

    Each control boot is one residual (its log decode rate minus its cell's mean, averaged over its
    cells). Two boots: their difference is judged against the bound. Three or more: a linear slope and
    a curvature (first and last slow) are fitted; a size beyond the bound fails whatever its p-value,
    and a shape significant at alpha / 2 fails whatever its size (stats/drift.py). The bound is the
    policy's max_drift, or the family's floor when that is smaller: a drift the comparisons could
    mistake for an effect. On several devices a slope and the ends of each device against its middle
    are fitted within devices, at the same level (stats/positions.py). The control boots are read from
    every cell measured, refused ones included (BootValues.every): a refusal withholds a comparison,
    never the controls that tell whether the harness drifted.
    """
    out = []
    multi = len(evidence.campaign.families) > 1
    for family in evidence.campaign.families:
        label = f"{family}: " if multi else ""
        controls = _control_values(evidence, family)
        if not controls:
            continue
        apart = _unshared(evidence, family)
        if apart >= 2:
            text = (
                f"{label}the {apart} control boots measured no cell in common: drift across the campaign and "
                "the null control cannot be checked"
            )
            out.append(ControlResult("drift", ControlStatus.UNTESTABLE, text, None))
            continue
        floor = _family_floor(evidence, family)
        plain = {
            cell: [BootValue(v.arm, v.boot, v.order, v.log_value) for v in vals]
            for cell, vals in controls.items()
        }
        found = control_drift(
            plain,
            alpha=evidence.policy.keep_off_level,
            max_drift=evidence.policy.controls.max_drift,
            floor=floor,
        )
        devices = {v.device for values in controls.values() for v in values}
        if len(devices) > 1:
            ends = _device_ends(evidence)
            out.append(_device_drift(label, controls, ends, found.bound, evidence.policy.keep_off_level))
        else:
            out.append(_drift_result(label, found))
    return out


def _control_values(evidence: Evidence, family: str) -> dict[tuple[str, int], list[DeviceBootValue]]:
    """Control boots per cell, for the cells two or more control boots measured (only there can control
    boots be compared: a cell one boot measured would read as no drift)."""
    names = evidence.control_names(family)
    cells: dict[tuple[str, int], list[DeviceBootValue]] = {}
    for (arm, workload, conc, metric), values in evidence.values.every.items():
        if arm in names and metric == "decode_tps":
            cells.setdefault((workload, conc), []).extend(values)
    shared = {cell: values for cell, values in cells.items() if len(values) >= 2}
    return shared if shared else dict(list(cells.items())[:1])


def _unshared(evidence: Evidence, family: str) -> int:
    """Control boots of a family that share no cell with another control boot (0 when any cell is shared)."""
    names = evidence.control_names(family)
    per_cell: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for (arm, workload, conc, metric), values in evidence.values.every.items():
        if arm in names and metric == "decode_tps":
            per_cell.setdefault((workload, conc), set()).update((v.arm, v.boot) for v in values)
    if any(len(boots) >= 2 for boots in per_cell.values()):
        return 0
    return len(set().union(*per_cell.values())) if per_cell else 0


def _family_floor(evidence: Evidence, family: str) -> float | None:
    """The family's floor at the selection metric (its worst cell), or None when unknown."""
    metric = str(evidence.policy.selection.metric)
    known = [f.floor for f in evidence.floors if f.family == family and f.metric == metric and f.known]
    return max(known) if known else None


_FINDINGS = {
    DriftFinding.SLOPE_SIZE: "the fitted drift is beyond the bound",
    DriftFinding.SLOPE_SIGNIFICANT: "the slope is significant",
    DriftFinding.CURVATURE_SIZE: "the ends differ from the middle beyond the bound (first and last alike)",
    DriftFinding.CURVATURE_SIGNIFICANT: "the curvature (first and last boots alike) is significant",
    DriftFinding.PAIR_SIZE: "the two control boots differ beyond the bound",
}


def _drift_result(label: str, found: DriftCheck) -> ControlResult:
    bound = f"{change(found.bound) * 100:.1f}%"
    boots = found.boots
    if found.status is DriftStatus.UNTESTABLE:
        first = boots[0]
        text = (
            f"{label}no bracketing control pair (one control boot measured: {first.arm} boot {first.boot}): "
            "drift across the campaign and the null control cannot be checked"
            if DriftFinding.ONE_BOOT in found.findings
            else f"{label}every control boot sits at one position of the campaign: drift cannot be checked"
        )
        return ControlResult("drift", ControlStatus.UNTESTABLE, text, None)
    if len(boots) == 2:
        text = f"{label}the two control boots differ by {pct(found.drift)} (first to last), bound {bound}"
        if found.status is DriftStatus.FAIL:
            return ControlResult(
                "drift",
                ControlStatus.FAIL,
                f"{text}: beyond it; one pair cannot tell drift from boot noise",
                found.drift,
            )
        return ControlResult(
            "drift",
            ControlStatus.PASS,
            f"{text}: within it; the null control is weak with one pair (one degree of freedom)",
            found.drift,
        )
    shape = f"drift {pct(found.drift)} (slope p={found.p_drift:.3g})"
    if math.isfinite(found.curvature):
        curvature_p = "" if math.isnan(found.p_curvature) else f", p={found.p_curvature:.3g}"
        shape += f", ends vs middle {pct(found.curvature)}{curvature_p}"
    text = f"{label}{len(boots)} control boots: {shape}; bound {bound}"
    if found.status is DriftStatus.FAIL:
        why = "; ".join(_FINDINGS[f] for f in found.findings if f in _FINDINGS)
        return ControlResult(
            "drift", ControlStatus.FAIL, f"{text}: {why}; the controls are not exchangeable", found.drift
        )
    return ControlResult("drift", ControlStatus.PASS, f"{text}: null control passes", found.drift)


def _boot_places(evidence: Evidence) -> dict[tuple[str, int], tuple[int, str]]:
    """(arm, boot) -> (order, device) of every measured boot."""
    where: dict[tuple[str, int], tuple[int, str]] = {}
    for (_arm, _workload, _conc, metric), values in evidence.values.boots.items():
        if metric == "decode_tps":
            where.update({(v.arm, v.boot): (v.order, v.device) for v in values})
    return where


def _device_ends(evidence: Evidence) -> dict[tuple[str, int], bool]:
    """(arm, boot) -> whether the boot is the first or the last measured boot of its device."""
    where = _boot_places(evidence)
    keys = sorted(where)
    names = sorted({d for _, d in where.values()})
    ends = end_positions(
        np.array([where[k][0] for k in keys], dtype=float),
        np.array([names.index(where[k][1]) for k in keys]),
    )
    return {k: bool(e) for k, e in zip(keys, ends, strict=True)}


def position_checks(evidence: Evidence) -> list[ControlResult]:
    """Control boots whose positions are confounded with their role: every one an end of its device.

    Whatever wrote the records (off_A first and off_B last with one round per device, or one round on
    one device), a slow first or last boot is then indistinguishable from slow controls, and no check
    on the controls can see it. Such a family is not decided (decide/engine.py makes it a blocker).
    """
    ends = _device_ends(evidence)
    devices = {k: device for k, (_, device) in _boot_places(evidence).items()}
    out = []
    multi = len(evidence.campaign.families) > 1
    for family in evidence.campaign.families:
        names = evidence.control_names(family)
        arms = {a.name for a in evidence.campaign.arms if a.family == family} | set(names)
        keys = sorted(k for k in ends if k[0] in arms)
        if not keys:
            continue
        labels = sorted({devices[k] for k in keys})
        control = np.array([k[0] in names for k in keys])
        if not confounded(
            control, np.array([ends[k] for k in keys]), np.array([labels.index(devices[k]) for k in keys])
        ):
            continue
        label = f"{family}: " if multi else ""
        count = int(control.sum())
        text = (
            f"{label}all {count} control boots sit at the first or last boot of their device, so the "
            "controls' position is confounded with their role: a slow start or end of a device reads as "
            "slow controls, and the comparisons with them cannot be trusted (collect draws the arm order "
            "of every round, controls included, on campaigns over devices; one device needs two or more "
            "rounds)"
        )
        out.append(ControlResult("positions", ControlStatus.FAIL, text, float(count)))
    return out


def _device_drift(
    label: str,
    controls: Mapping[tuple[str, int], Sequence[DeviceBootValue]],
    ends: Mapping[tuple[str, int], bool],
    bound: float,
    alpha: float,
) -> ControlResult:
    """Slope and ends-vs-middle of control boots within devices (devices keep their own levels)."""
    residuals: dict[tuple[str, int], list[float]] = {}
    where: dict[tuple[str, int], tuple[int, str]] = {}
    for values in controls.values():
        mean = sum(v.log_value for v in values) / len(values)
        for v in values:
            residuals.setdefault((v.arm, v.boot), []).append(v.log_value - mean)
            where[(v.arm, v.boot)] = (v.order, v.device)
    keys = sorted(residuals, key=lambda k: where[k])
    names = sorted({where[k][1] for k in keys})
    found = device_position(
        np.array([where[k][0] for k in keys], dtype=float),
        np.array([names.index(where[k][1]) for k in keys]),
        np.array([ends.get(k, False) for k in keys]),
        np.array([[sum(residuals[k]) / len(residuals[k]) for k in keys]]),
    )
    drift, p = float(found.drift[0]), float(found.p_drift[0])
    if not math.isfinite(drift):
        return ControlResult(
            "drift", ControlStatus.UNTESTABLE, f"{label}too few control boots per device to fit a drift", None
        )
    ends_fit, p_ends = float(found.ends[0]), float(found.p_ends[0])
    shape = f"drift {pct(drift)} (p={p:.3g})"
    if math.isfinite(ends_fit):
        shape += f", ends vs middle {pct(ends_fit)} (p={p_ends:.3g})"
    else:
        shape += ", ends vs middle not fitted (no device has control boots both at an end and inside)"
    bound_text = f"{change(bound) * 100:.1f}%"
    text = f"{label}control boots on {len(names)} devices, within devices: {shape}; bound {bound_text}"
    if bool(position_failing(found, alpha)[0]):
        return ControlResult("drift", ControlStatus.FAIL, f"{text}: the controls are not exchangeable", drift)
    if bool(position_beyond(found, bound)[0]):
        text += (
            f" (beyond it, but not significant at alpha {alpha / SHAPES:.3g} per shape: on this layout "
            "the controls' positions cannot tell that from noise)"
        )
    return ControlResult("drift", ControlStatus.PASS, f"{text}: null control passes", drift)


def _run_vectors(evidence: Evidence, names: set[str]) -> dict[tuple[str, int], dict[tuple[Any, ...], float]]:
    """Per control boot: every run-level value keyed by (workload, concurrency, rep, metric)."""
    values = evidence.tables.values
    sel = values[values["arm"].isin(sorted(names))]
    out: dict[tuple[str, int], dict[tuple[Any, ...], float]] = {}
    for arm, boot, workload, conc, rep, metric, value in zip(
        sel["arm"],
        sel["boot"],
        sel["workload"],
        sel["concurrency"],
        sel["rep"],
        sel["metric"],
        sel["value"],
        strict=True,
    ):
        out.setdefault((str(arm), int(boot)), {})[(workload, conc, rep, metric)] = float(value)
    return out


def duplicate_checks(evidence: Evidence) -> list[ControlResult]:
    """Control boots whose every shared run agrees to DUPLICATE_RTOL: one boot recorded twice (e.g.
    off_B's records copied from off_A, byte for byte or with its timings moved by microseconds).
    Their agreement would read as a tight control variance and as a null control that passes; the
    family is not decided on them (decide/engine.py)."""
    out = []
    for family in evidence.campaign.families:
        boots = _run_vectors(evidence, set(evidence.control_names(family)))
        keys = sorted(boots)
        pairs = []
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                shared = set(boots[a]) & set(boots[b])
                if len(shared) >= DUPLICATE_MIN_RUNS and all(
                    math.isclose(boots[a][k], boots[b][k], rel_tol=DUPLICATE_RTOL, abs_tol=0.0)
                    for k in shared
                ):
                    pairs.append(f"{a[0]} boot {a[1]} and {b[0]} boot {b[1]} ({len(shared)} runs)")
        if pairs:
            label = f"{family}: " if len(evidence.campaign.families) > 1 else ""
            text = (
                f"{label}control boots agree run for run to {DUPLICATE_RTOL:.0e} relative: "
                f"{'; '.join(pairs[:4])}"
                f"{'; ...' if len(pairs) > 4 else ''}: one measurement recorded twice (duplicated records), "
                "not independent boots; their variance and the null control mean nothing"
            )
            out.append(ControlResult("duplicates", ControlStatus.FAIL, text, float(len(pairs))))
    return out


def history_checks(evidence: Evidence) -> list[ControlResult]:
    """Archived A/A history (--noise-history): where it was pooled into the controls' variance, where
    its variance did not match the current controls' and was not (stats/history.py), whether it is
    lent to candidates booted once, and how its seat differs when --noise-history-any-seat let it in."""
    if not evidence.history:
        return []
    metric = str(evidence.policy.selection.metric)
    pooled: list[str] = []
    refused: list[str] = []
    for family in evidence.campaign.families:
        names = [a.name for a in evidence.campaign.controls(family)]
        design = design_cells(evidence.campaign, evidence.values, family, metric)
        controls = {cell: [v for c in names for v in evidence.values.of(c, cell, metric)] for cell in design}
        archived = {(w, c): h for (w, c, m), h in evidence.archived.items() if m == metric}
        _, fits = usable_history(controls, archived, design)
        for (workload, conc), fit in fits.items():
            where = f"{workload} c={conc}"
            if fit.compatible:
                pooled.append(where)
            elif math.isnan(fit.p):
                refused.append(f"{where} (fewer than two control boots to compare it with)")
            else:
                refused.append(
                    f"{where} (control variance {fit.ratio:.2f}x the archive's, F test p={fit.p:.3g})"
                )
    labels = ", ".join(h.label for h in evidence.history)
    parts = [f"noise history {labels} ({metric})"]
    parts.append(f"pooled into the controls' variance at {', '.join(pooled)}" if pooled else "pooled nowhere")
    if refused:
        parts.append("not pooled where it does not match the current controls: " + "; ".join(refused))
    lent = evidence.policy.floor.lend_history
    parts.append(
        "lent to candidates booted once ([floor] lend_history)"
        if lent
        else "not lent to candidates (a drafter can add its own noise; [floor] lend_history)"
    )
    foreign = [f"{h.label} differs in {'; '.join(h.differs)}" for h in evidence.history if h.differs]
    status = ControlStatus.INFO
    if foreign:
        parts.append("used under --noise-history-any-seat although " + " / ".join(foreign))
        status = ControlStatus.WARN
    return [ControlResult("history", status, "; ".join(parts), float(len(pooled)))]


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
            text = (
                f"{label}sensitivity floor unknown: no credible boot-to-boot variance (single boots, or "
                f"boots that agree closer than the harness can measure); {implication}"
            )
            out.append(ControlResult("floor", ControlStatus.INFO, text, None))
            continue
        worst = max(known, key=lambda f: f.floor)
        text = (
            f"{label}an arm alone is called better only beyond {change(worst.floor) * 100:.1f}% "
            f"({metric}, worst cell {worst.workload} c={worst.concurrency}: Holm's first step, with the "
            f"arm's own boot variance, Welch df {worst.df:.1f}, {', '.join(worst.sources)}); once other arms "
            f"are called better, Holm's later steps call effects down to "
            f"{change(worst.floor_last) * 100:.1f}% better, so this is not the smallest effect the "
            "campaign can call better"
        )
        out.append(ControlResult("floor", ControlStatus.INFO, text, finite(change(worst.floor))))
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


def partial_boots_check(evidence: Evidence) -> ControlResult | None:
    """Failed or interrupted boots that measured runs: left out of the cells, or counted (the policy's
    `[runs] partial_boots`); either way the boots per cell are in the decision's `cells`."""
    found = evidence.partial
    if not found:
        return None
    listed = ", ".join(f"{p.arm} boot {p.boot} ({p.status}, {p.requests} requests)" for p in found)
    if found[0].counted:
        detail = (
            f'runs of boots that did not finish count in their cells ([runs] partial_boots = "include"): '
            f"{listed}; boots per cell may differ by arm"
        )
        return ControlResult("partial_boots", ControlStatus.WARN, detail, float(len(found)))
    detail = (
        f"runs of boots that did not finish are left out of every cell ([runs] partial_boots = "
        f'"exclude"): {listed}'
    )
    return ControlResult("partial_boots", ControlStatus.PASS, detail, float(len(found)))


# Host states two arms' boots may start from and still be compared (docs/statistics.md, "host state"):
# a tenth of the host's (or accelerator's) memory less available changes what the page cache and the
# engine's KV pool get; one more runnable process on the 1-minute load average is a core's worth of
# other work beside the server.
HOST_MEMORY_SPREAD = 0.10  # of MemTotal (of an accelerator's memory)
HOST_LOAD_SPREAD = 1.0  # runnable processes, 1-minute load average


def _host_figures(evidence: Evidence) -> list[tuple[str, int, dict[str, tuple[float, float]]]]:
    """(arm, boot, figure -> (value, the bound on its spread)) of every boot that recorded its host;
    a figure's name holds the boot's device and node, so only boots on one device are compared."""
    boots = evidence.tables.results.boots
    if "host_state" not in boots.columns:
        return []
    devices = list(boots["device"]) if "device" in boots.columns else [None] * len(boots)
    nodes = list(boots["node"]) if "node" in boots.columns else [None] * len(boots)
    out = []
    for arm, boot, state, device, node in zip(
        boots["arm"], boots["boot"], boots["host_state"], devices, nodes, strict=True
    ):
        if not isinstance(state, HostState):
            continue
        figures: dict[str, tuple[float, float]] = {}
        if state.mem_available_gib is not None and state.mem_total_gib:
            figures["MemAvailable (GiB)"] = (
                state.mem_available_gib,
                HOST_MEMORY_SPREAD * state.mem_total_gib,
            )
        if state.load_1m is not None:
            figures["1-minute load"] = (state.load_1m, HOST_LOAD_SPREAD)
        for acc in state.accelerators:
            if acc.memory_free_mib is not None and acc.memory_total_mib:
                bound = HOST_MEMORY_SPREAD * acc.memory_total_mib / 1024
                figures[f"accelerator {acc.index} free memory (GiB)"] = (acc.memory_free_mib / 1024, bound)
        where = ", ".join(
            f"{kind} {name}" for kind, name in (("device", device), ("node", node)) if _named(name)
        )
        out.append((str(arm), int(boot), {f"{where}: {k}" if where else k: v for k, v in figures.items()}))
    return out


def _named(value: object) -> bool:
    """A device or node name a boot recorded (a missing one is None, or NaN in a table)."""
    return isinstance(value, str) and bool(value)


def host_state_check(evidence: Evidence) -> ControlResult | None:
    """Boots of different arms on one device (and node) that started from materially different host
    states (HOST_MEMORY_SPREAD, HOST_LOAD_SPREAD): reported, as drift is, since the arms then ran on
    different machines in effect. Arms are compared within a device, so boots on two devices are not."""
    boots = _host_figures(evidence)
    if len({arm for arm, _, _ in boots}) < 2:
        return None
    found = []
    names = sorted({name for _, _, figures in boots for name in figures})
    worst = 0.0
    for name in names:
        have = [(arm, boot, f[name]) for arm, boot, f in boots if name in f]
        pairs = [(a, b) for a in have for b in have if a[0] != b[0] and a[2][0] > b[2][0]]
        if not pairs:
            continue
        high, low = max(pairs, key=lambda p: p[0][2][0] - p[1][2][0])
        spread, bound = high[2][0] - low[2][0], min(high[2][1], low[2][1])
        worst = max(worst, spread / bound if bound else 0.0)
        if spread > bound:
            found.append(
                f"{name}: {high[0]} boot {high[1]} started at {high[2][0]:.2f}, {low[0]} boot {low[1]} at "
                f"{low[2][0]:.2f} (apart by more than {bound:.2f})"
            )
    if found:
        detail = "boots of different arms started from materially different host states: " + "; ".join(found)
        return ControlResult("host_state", ControlStatus.WARN, detail, round(worst, 3))
    detail = f"every boot recorded its host state; the arms' boots started alike ({', '.join(names)})"
    return ControlResult("host_state", ControlStatus.PASS, detail, round(worst, 3))
