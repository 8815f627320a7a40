"""Latency percentiles of streams: TTFT, inter-token latency and end-to-end p50 / p90 / p99 per arm and cell.

Each measured stream (warm-ups out; the cold run out unless the policy counts it) gives three latencies,
on the same clock the decode and TTFT metrics use (stats/runs.py: the server's when it timed every
stream, else the client's, with streams read in a burst set aside):

- TTFT ms: time to the first token (server: queue wait + time to first token);
- ITL ms: per token over the decode window, 1000 / decode tok/s = (last - first token) / (tokens - 1);
- E2E ms: TTFT + the decode window (tokens - 1 of them), the request's whole latency.

Percentiles pool the streams of the cell (numpy's default linear interpolation between order
statistics, Hyndman and Fan's type 7). Streams of one boot are not independent, so the median also gets
a boot-level estimate: the geometric mean of the boots' medians with a two-sided 1 - 2 alpha Student t
interval on the log scale over the boots, as the comparisons treat a boot (docs/statistics.md); one
boot gives no interval.

A percentile compared between two arms (`percentile_ratio`, the `ttft` rule's `percentile`) is compared at
the boot level too: each boot's own percentile over its streams, the ratio of the two sides' geometric
means with a Welch t interval on the log scale. A boot's percentile q needs at least 1 / (1 - q) streams
(MIN_STREAMS: 2 for p50, 10 for p90, 100 for p99), so that one stream is expected beyond it; with fewer
streams in a boot the sample is too small and the ratio is not judged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mtpverdict._logscale import ratio
from mtpverdict.stats.runs import RUN_KEYS, _client_timing, _server_timing, server_timed
from mtpverdict.stats.tdist import t_ppf

PERCENTILES = (50, 90, 99)
LATENCY_METRICS = ("ttft_ms", "itl_ms", "e2e_ms")
LATENCY_LABELS = {"ttft_ms": "TTFT ms", "itl_ms": "ITL ms", "e2e_ms": "E2E ms"}
STREAM_COLUMNS = [*RUN_KEYS, "timing", *LATENCY_METRICS]
MIN_STREAMS = {50: 2, 90: 10, 99: 100}  # streams a boot needs for its own percentile q: 1 / (1 - q)


@dataclass(frozen=True, slots=True)
class BootPercentiles:
    """One boot's streams and their percentiles."""

    n: int
    p50: float
    p90: float
    p99: float

    def percentile(self, q: int) -> float:
        return {50: self.p50, 90: self.p90, 99: self.p99}[q]


@dataclass(frozen=True, slots=True)
class Latency:
    """The percentiles of one latency over a set of streams, and the boot-level estimate of its median."""

    n: int  # streams measured
    n_boots: int
    p50: float
    p90: float
    p99: float
    boot_median: float  # geometric mean of the boots' medians
    boot_median_low: float | None  # two-sided 1 - 2 alpha interval over boots; None with one boot
    boot_median_high: float | None
    boots: tuple[BootPercentiles, ...] = ()  # each boot's own percentiles, boots in a fixed order

    def percentile(self, q: int) -> float:
        """The stored percentile q (one of PERCENTILES)."""
        return {50: self.p50, 90: self.p90, 99: self.p99}[q]


@dataclass(frozen=True, slots=True)
class PercentileRatio:
    """One side's percentile over the other's, boot by boot: the ratio of the geometric means of the
    boots' percentiles and its one-sided 1 - alpha bounds (a Welch t interval on the log scale)."""

    ratio: float
    low: float
    high: float


def percentile_ratio(mine: Latency, off: Latency, q: int, alpha: float) -> PercentileRatio | str:
    """The boot-level ratio of percentile q (module docstring), or why it cannot be judged."""
    need = MIN_STREAMS[q]
    for side, found in (("the arm", mine), ("the controls", off)):
        if len(found.boots) < 2:
            return f"{side} measured {len(found.boots)} boot(s); the interval needs 2"
        fewest = min(b.n for b in found.boots)
        if fewest < need:
            return f"a boot of {side} has {fewest} streams; p{q} needs {need} per boot"
        if any(not b.percentile(q) > 0 for b in found.boots):
            return f"a boot of {side} has a p{q} of 0"
    a = np.log([b.percentile(q) for b in mine.boots])
    c = np.log([b.percentile(q) for b in off.boots])
    va, vc = float(np.var(a, ddof=1)) / a.size, float(np.var(c, ddof=1)) / c.size
    centre = float(np.mean(a) - np.mean(c))
    se = math.sqrt(va + vc)
    if se == 0.0:
        return PercentileRatio(ratio(centre), ratio(centre), ratio(centre))
    df = (va + vc) ** 2 / (va**2 / (a.size - 1) + vc**2 / (c.size - 1))  # Welch-Satterthwaite
    half = float(t_ppf(1.0 - alpha, df)) * se
    return PercentileRatio(ratio(centre), ratio(centre - half), ratio(centre + half))  # inf at alpha 0


def stream_latencies(requests: pd.DataFrame, runs: pd.DataFrame, include_cold: bool) -> pd.DataFrame:
    """One row per measured stream with its TTFT, ITL and E2E (ms; NaN where the clock set it aside).

    `runs` is stats.runs.run_table's output, whose `cold` column marks each boot's cold run.
    """
    if requests.empty:
        return pd.DataFrame(columns=STREAM_COLUMNS)
    req = requests[~requests["warmup"].astype(bool)]
    if req.empty:
        return pd.DataFrame(columns=STREAM_COLUMNS)
    ok = req["status"] == "ok"
    timed = server_timed(requests)
    _, decode, ttft = _server_timing(req, ok) if timed else _client_timing(req, ok)
    tokens = req["completion_tokens"].astype(float)
    itl = (1000.0 / decode).where(decode > 0)
    e2e = ttft + (itl * (tokens - 1.0)).where(tokens >= 2, 0.0)
    frame = pd.DataFrame(
        {
            **{k: req[k] for k in RUN_KEYS},
            "timing": "server" if timed else "client",
            "ttft_ms": ttft,
            "itl_ms": itl,
            "e2e_ms": e2e.where(itl.notna() | (tokens < 2)),
        }
    )
    if not include_cold and not runs.empty:
        cold = {tuple(row) for row in runs.loc[runs["cold"].astype(bool), RUN_KEYS].itertuples(index=False)}
        keep = [tuple(row) not in cold for row in frame[RUN_KEYS].itertuples(index=False)]
        frame = frame[keep]
    return frame[STREAM_COLUMNS].reset_index(drop=True)


MAX_LOG = 700.0  # math.exp overflows past ~709.78: an interval reaching beyond is stated as none


def latency(values: Sequence[float], boots: Sequence[object], alpha: float) -> Latency | None:
    """The percentiles of `values` (one per stream, `boots[i]` the boot stream i ran in), NaN dropped;
    None when no finite value is left."""
    v = np.asarray(values, dtype=float)
    b = np.asarray(boots, dtype=object)
    keep = np.isfinite(v)
    v, b = v[keep], b[keep]
    if v.size == 0:
        return None
    p50, p90, p99 = (float(x) for x in np.percentile(v, PERCENTILES))
    # boots in a fixed order, so the mean of their logs does not depend on the order of the records
    groups = [v[b == boot] for boot in sorted(set(b.tolist()), key=str)]
    medians = np.array([float(np.median(g)) for g in groups])
    per_boot = tuple(
        BootPercentiles(int(g.size), *(float(x) for x in np.percentile(g, PERCENTILES))) for g in groups
    )
    low, high = _boot_interval(medians, alpha)
    positive = medians[medians > 0]
    centre = (
        float(np.exp(np.mean(np.log(positive))))
        if positive.size == medians.size
        else float(np.median(medians))
    )
    return Latency(int(v.size), int(medians.size), p50, p90, p99, centre, low, high, per_boot)


def _boot_interval(medians: np.ndarray, alpha: float) -> tuple[float | None, float | None]:
    """Two-sided 1 - 2 alpha t interval of the geometric mean of boot medians (None: fewer than two
    boots, a median of zero, whose log is undefined, or no level left to state it at: a campaign whose
    looks spent its alpha decides at alpha 0, where the interval is the whole line)."""
    n = medians.size
    if n < 2 or not (medians > 0).all() or not 0.0 < alpha < 0.5:
        return None, None
    logs = np.log(medians)
    half = float(t_ppf(1.0 - alpha, n - 1)) * float(np.std(logs, ddof=1)) / math.sqrt(n)
    centre = float(np.mean(logs))
    if not math.isfinite(half) or centre + half > MAX_LOG:
        return None, None
    return math.exp(centre - half), math.exp(centre + half)
