"""Latency percentiles as the evidence holds them: per arm and cell, per arm overall, per family's controls.

The streams come from stats/percentiles.py (the decode metrics' clock, warm-ups and, unless the policy
counts it, the cold run left out); each set of streams gets its p50 / p90 / p99 and the boot-level
interval of its median and each boot's own percentiles. The controls of a family are pooled per cell
(each control boot its own boot), whose boots a `ttft` rule with a `percentile` compares an arm's
boots against (stats/percentiles.py percentile_ratio).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from mtpverdict.formats.results import Campaign
from mtpverdict.stats.percentiles import LATENCY_METRICS, Latency, latency, stream_latencies

ArmKey = tuple[str, str | None, int | None, str]  # (arm, workload, concurrency, metric); None: every cell
ControlKey = tuple[str, str, int, str]  # (family, workload, concurrency, metric)


@dataclass(frozen=True, slots=True)
class Latencies:
    """Every latency summary the decision and the rules read."""

    arms: Mapping[ArmKey, Latency]
    controls: Mapping[ControlKey, Latency]
    timing: str | None  # "server" or "client": whose clock timed the streams; None without streams


def gather_latencies(
    campaign: Campaign, requests: pd.DataFrame, runs: pd.DataFrame, include_cold: bool, alpha: float
) -> Latencies:
    """The latency summaries of a campaign's measured streams (module docstring)."""
    streams = stream_latencies(requests, runs, include_cold)
    if streams.empty:
        return Latencies({}, {}, None)
    streams = streams.assign(boot_key=streams["arm"].astype(str) + "#" + streams["boot"].astype(str))
    arms: dict[ArmKey, Latency] = {}
    controls: dict[ControlKey, Latency] = {}
    for metric in LATENCY_METRICS:
        for (arm, workload, conc), group in streams.groupby(["arm", "workload", "concurrency"], sort=True):
            found = latency(group[metric].tolist(), group["boot_key"].tolist(), alpha)
            if found is not None:
                arms[(str(arm), str(workload), _int(conc), metric)] = found
        for arm, group in streams.groupby("arm", sort=True):
            found = latency(group[metric].tolist(), group["boot_key"].tolist(), alpha)
            if found is not None:
                arms[(str(arm), None, None, metric)] = found
        for family in campaign.families:
            names = {a.name for a in campaign.controls(family)}
            pooled = streams[streams["arm"].isin(names)]
            for (workload, conc), group in pooled.groupby(["workload", "concurrency"], sort=True):
                found = latency(group[metric].tolist(), group["boot_key"].tolist(), alpha)
                if found is not None:
                    controls[(family, str(workload), _int(conc), metric)] = found
    return Latencies(arms, controls, str(streams["timing"].iloc[0]))


def _int(value: object) -> int:
    """A concurrency from a groupby key (numpy's integer)."""
    return int(str(value))
