"""Acceptance per draft position: how often the i-th drafted token of a round is kept, per arm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict.formats.decision import ArmDecision, SurfaceSummary
from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import (
    COLORS,
    MAX_PLOTTED_ARMS,
    PlotKind,
    Series,
    errorbar,
    figure,
    ordered,
    too_many,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

POSITION_DODGE = 0.05  # draft positions: sideways offset between arms, so equal rates stay visible


def _positions_of(arm: ArmDecision) -> SurfaceSummary | None:
    """The surface an arm's per-position rates come from: the primary surface's first."""
    acc = arm.acceptance
    if acc is None:
        return None
    return next((s for s in (acc.primary, *acc.surfaces) if s.per_position_rate), None)


@dataclass(frozen=True, slots=True)
class _AcceptanceData:
    title: str
    series: tuple[Series, ...]
    minimum: float | None  # the policy's minimum last-position rate, when the arms share one


def _acceptance_data(data: ReportData) -> _AcceptanceData | str:
    doc = data.decision
    series = []
    arms = ordered([a for a in doc.arms if not a.is_control and _positions_of(a) is not None])
    if len(arms) > MAX_PLOTTED_ARMS:
        return too_many(len(arms), "arms with per-position rates")
    for i, arm in enumerate(arms):
        found = _positions_of(arm)
        assert found is not None and found.per_position_rate is not None
        rates, source = found.per_position_rate, found.source
        lows = [
            (lo if lo is not None else r) * 100
            for r, lo in zip(rates, found.per_position_low or rates, strict=True)
        ]
        highs = [
            (hi if hi is not None else r) * 100
            for r, hi in zip(rates, found.per_position_high or rates, strict=True)
        ]
        selected = arm.name == doc.selected_arm
        primary = arm.acceptance.primary if arm.acceptance is not None else None
        if primary is not None and primary.draft_tokens is not None:
            n_text = f"{primary.draft_tokens:,} drafted tokens ({primary.source})"
        else:
            n_text = "sample size not recorded"
        if primary is None or primary.source != source:
            n_text += f", positions from {source}"
        series.append(
            Series(
                label=f"{arm.name} ({arm.label}): {n_text}" + (" [selected]" if selected else ""),
                color=COLORS[i % len(COLORS)],
                # a small sideways offset per arm keeps equal rates at one position from hiding each other
                xs=tuple(p + POSITION_DODGE * (i - 1) for p in range(1, len(rates) + 1)),
                ys=tuple(r * 100 for r in rates),
                lows=tuple(lows),
                highs=tuple(highs),
                width=3.4 if selected else 1.8,
            )
        )
    if not series:
        return "no arm recorded per-position acceptance (overall rates are in the acceptance table)"
    minima = {
        r.param("min_last_position_rate") for a in doc.arms for r in a.rules_of("stable_acceptance")
    } - {None}
    minimum = minima.pop() if len(minima) == 1 else None
    return _AcceptanceData(
        title=f"{data.campaign_label}: acceptance per draft position",
        series=tuple(series),
        minimum=minimum,
    )


def _draw_acceptance(d: _AcceptanceData) -> Figure:
    from matplotlib.ticker import MaxNLocator

    fig = figure(5.6)
    ax = fig.subplots()
    for s in d.series:
        errorbar(ax, s, label=s.label, zorder=3)
    if d.minimum is not None:
        ax.axhline(
            d.minimum * 100,
            color="black",
            linestyle="--",
            linewidth=1.2,
            label=f"policy minimum for the last position ({d.minimum * 100:.0f}%)",
        )
    ax.set_ylim(0, 105)
    ax.set_xlim(0.6, max(max(s.xs) for s in d.series) + 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("draft position (1 = first drafted token of a round)")
    ax.set_ylabel("accepted at this position\n(% of draft rounds)")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    fig.suptitle(d.title + "\nwhiskers: Wilson interval on the draft rounds where the sample size is known")
    return fig


PLOT: PlotKind[_AcceptanceData] = PlotKind(
    key="acceptance",
    title="Acceptance per draft position",
    caption="Per-position acceptance rate of each speculative arm: how often the i-th drafted token of a "
    "round is kept. A curve that falls towards the last position means the deepest drafts are "
    "mostly wasted work; the dashed line is the policy's minimum for the last position.",
    extract=lambda data, _family: _acceptance_data(data),
    draw=_draw_acceptance,
)
