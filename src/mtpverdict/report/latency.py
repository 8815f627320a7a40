"""Latency percentiles as the report and the terminal show them: TTFT, ITL and E2E p50 / p90 / p99.

Every number comes from the decision's `latency` section (stats/percentiles.py), so neither can
disagree with it: per arm over every cell for the terminal, per arm and cell for the report, with the
boot-level interval of the median beside the pooled percentiles.
"""

from __future__ import annotations

from collections.abc import Sequence

from mtpverdict._text import terminal_safe
from mtpverdict.formats.decision import Decision, LatencyResult
from mtpverdict.report.data import ReportData, finite
from mtpverdict.report.tables import NONE, Table, ci_label
from mtpverdict.report.verdict import fit_table
from mtpverdict.stats.percentiles import LATENCY_LABELS, LATENCY_METRICS


def _ms(value: float | None) -> str:
    return NONE if not finite(value) else f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _triple(found: LatencyResult | None) -> str:
    return NONE if found is None else "/".join(_ms(v) for v in (found.p50, found.p90, found.p99))


def _index(decision: Decision) -> dict[tuple[str, str | None, int | None, str], LatencyResult]:
    return {(x.arm, x.workload, x.concurrency, x.metric): x for x in decision.latency}


def latency_text(decision: Decision, width: int) -> str:
    """Each arm's TTFT, ITL and E2E p50/p90/p99 over every cell, one row an arm ("" without streams)."""
    found = _index(decision)
    rows = [
        [terminal_safe(arm.name), *(_triple(found.get((arm.name, None, None, m))) for m in LATENCY_METRICS)]
        for arm in decision.arms
        if any((arm.name, None, None, m) in found for m in LATENCY_METRICS)
    ]
    if not rows:
        return ""
    timing = decision.latency[0].timing
    headers = ["arm", *(f"{LATENCY_LABELS[m]} p50/p90/p99" for m in LATENCY_METRICS)]
    title = f"latency over every cell ({timing} clock; per cell in the report):"
    return title + "\n" + fit_table(headers, rows, width)


def _median_text(found: LatencyResult) -> str:
    text = _ms(found.boot_median)
    if found.boot_median_low is not None and found.boot_median_high is not None:
        text += f" [{_ms(found.boot_median_low)}, {_ms(found.boot_median_high)}]"
    return text


def _rows(data: ReportData, results: Sequence[LatencyResult]) -> list[tuple[str, ...]]:
    labels = {a.name: a.label for a in data.decision.arms}
    out: list[tuple[str, ...]] = []
    for found in results:
        cell = "every cell" if found.workload is None else f"{found.workload} c={found.concurrency}"
        out.append(
            (
                found.arm,
                labels.get(found.arm, ""),
                cell,
                LATENCY_LABELS[found.metric],
                f"{found.n} ({found.n_boots})",
                _ms(found.p50),
                _ms(found.p90),
                _ms(found.p99),
                _median_text(found),
            )
        )
    return out


def latency_table(data: ReportData) -> Table | None:
    """TTFT, ITL and E2E percentiles per arm and cell, then over every cell, with the boot median."""
    doc = data.decision
    if not doc.latency:
        return None
    ordered = sorted(
        doc.latency,
        key=lambda x: (
            data.index.arm_rank.get(x.arm, 0),
            x.workload is None,
            data.workload_rank(x.workload or ""),
            x.concurrency or 0,
            LATENCY_METRICS.index(x.metric),
        ),
    )
    return Table(
        key="latency",
        title="Latency percentiles (ms)",
        headers=(
            "arm",
            "spec",
            "cell",
            "latency",
            "streams (boots)",
            "p50",
            "p90",
            "p99",
            f"boot median ({ci_label(doc.policy.alpha)})",
        ),
        rows=tuple(_rows(data, ordered)),
        note=(
            f"Per stream, on the {doc.latency[0].timing}'s clock (the decode metrics' clock): TTFT to the "
            "first token, ITL per token over the decode window ((last - first token) / (tokens - 1)), E2E "
            "= TTFT + the decode window. Percentiles pool the cell's streams (linear interpolation); the "
            "boot median is the geometric mean of the boots' medians with a Student t interval over boots "
            "(none with one boot). Warm-ups and, unless the policy counts it, each boot's cold run are left "
            "out."
        ),
    )
