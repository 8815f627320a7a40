"""Per-run and per-boot measurements from request and summary records (the seeds' timing definitions).

TTFT = wall time to the first content delta. Decode tok/s of a stream = (completion_tokens - 1) /
(last delta - first delta): the decode window only, prefill excluded. When the server reported its own
timing for every completed stream of the campaign (vLLM --enable-per-request-metrics), decode uses the
server's generation time (first to last token) and TTFT its queue wait plus time to first token, for
every stream: the server's clock cannot be read late, so no stream is set aside for arriving in a burst.
Otherwise a stream the client read from a buffer in a burst has no decode and no TTFT; each run counts
the streams it kept (n_decode) so that what was set aside can be compared across arms. Aggregate
throughput of a run = total completion tokens / wall clock of the whole run (never a sum of per-stream
rates).
A run is every request sharing (arm, boot, workload, concurrency, rep); the run of a boot with the
earliest start is its cold run, unless warm-up requests ran before it (they took the cold start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

METRICS = ("decode_tps", "ttft_ms", "aggregate_tps")
HIGHER_IS_BETTER = {"decode_tps": True, "aggregate_tps": True, "ttft_ms": False}
METRIC_UNITS = {"decode_tps": "tok/s", "aggregate_tps": "tok/s", "ttft_ms": "ms"}
METRIC_LABELS = {
    "decode_tps": "decode tok/s per stream",
    "aggregate_tps": "aggregate tok/s",
    "ttft_ms": "TTFT ms",
}
RUN_KEYS = ["arm", "boot", "workload", "concurrency", "rep"]
BURST_MIN_CHUNKS = 4  # a stream of fewer deltas cannot show it arrived in a burst
CELL_KEYS = ["arm", "workload", "concurrency"]
BOOT_KEYS = ["arm", "boot", "workload", "concurrency"]
VALUE_COLUMNS = [*RUN_KEYS, "metric", "value", "cold", "origin", "runs_known", "n_requests", "n_errors"]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


SERVER_TIMING = ("server_generation_ms", "server_ttft_ms")


def server_timed(requests: pd.DataFrame) -> bool:
    """True when every completed measured stream of 2 or more tokens carries the server's own timing.

    One surface for the whole campaign: mixing the server's clock for some streams with the client's
    for others would make the surface depend on the arm.
    """
    if requests.empty or any(c not in requests for c in SERVER_TIMING):
        return False
    measured = requests[
        ~requests["warmup"].astype(bool)
        & (requests["status"] == "ok")
        & (requests["completion_tokens"].astype(float) >= 2)
    ]
    if measured.empty:
        return False
    generation = measured["server_generation_ms"].astype(float)
    return bool((generation > 0).all() and measured["server_ttft_ms"].astype(float).notna().all())


Timing = tuple["pd.Series[bool]", "pd.Series[float]", "pd.Series[float]"]  # streamed, decode, TTFT


def _server_timing(req: pd.DataFrame, ok: pd.Series[bool]) -> Timing:
    """Decode and TTFT of each stream by the server's clock: every completed stream measured."""
    tokens = req["completion_tokens"].astype(float)
    generation = req["server_generation_ms"].astype(float) / 1000.0
    queue = req["server_queue_ms"].astype(float).fillna(0.0) if "server_queue_ms" in req else 0.0
    decode = ((tokens - 1.0) / generation).where(ok & (tokens >= 2) & (generation > 0))
    ttft = (queue + req["server_ttft_ms"].astype(float)).where(ok)
    return pd.Series(True, index=req.index), decode, ttft


def _client_timing(req: pd.DataFrame, ok: pd.Series[bool]) -> Timing:
    """Decode and TTFT by the client's clock; a stream read from a buffer in a burst measured the
    harness, not the server: no decode, no TTFT."""
    t_start, t_first = req["t_start"].astype(float), req["t_first"].astype(float)
    window = req["t_end"].astype(float) - t_first
    tokens = req["completion_tokens"].astype(float)
    missing = pd.Series(float("nan"), index=req.index)
    chunks = req["chunks"].astype(float) if "chunks" in req else missing
    bunched = req["bunched_chunks"].astype(float) if "bunched_chunks" in req else missing
    streamed = ~(bunched.notna() & chunks.notna() & (bunched * 2 > chunks - 1) & (chunks >= BURST_MIN_CHUNKS))
    decode = ((tokens - 1.0) / window).where(ok & (tokens >= 2) & (window > 0) & streamed)
    ttft = ((t_first - t_start) * 1000.0).where(ok & streamed)
    return streamed, decode, ttft


def clock_agreement(requests: pd.DataFrame) -> tuple[float, int, int] | None:
    """The client's clock against the server's, per stream: the median of client decode window / server
    generation time over the streams the client did not read in a burst, with their count and the
    count of streams both clocks timed (None when no stream carries the server's timing)."""
    if requests.empty or "server_generation_ms" not in requests:
        return None
    req = requests[~requests["warmup"].astype(bool)]
    ok = req["status"] == "ok"
    generation = req["server_generation_ms"].astype(float) / 1000.0
    window = req["t_end"].astype(float) - req["t_first"].astype(float)
    both = ok & (generation > 0) & (window > 0) & (req["completion_tokens"].astype(float) >= 2)
    if not both.any():
        return None
    streamed, _, _ = _client_timing(req, ok)
    kept = both & streamed
    ratios = (window / generation)[kept]
    return (float(ratios.median()) if len(ratios) else math.nan), int(kept.sum()), int(both.sum())


def run_table(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per measured run (warm-ups excluded) with its three metrics and error counts."""
    columns = [
        *RUN_KEYS,
        "t_start",
        "n_requests",
        "n_errors",
        "n_burst",
        "n_ok",
        "n_decode",
        "timing",
        "decode_tps",
        "ttft_ms",
        "aggregate_tps",
        "cold",
    ]
    warm = requests[requests["warmup"].astype(bool)]
    req = requests[~requests["warmup"].astype(bool)]
    if req.empty:
        return pd.DataFrame(columns=columns)
    ok = req["status"] == "ok"
    t_start = req["t_start"].astype(float)
    t_end = req["t_end"].astype(float)
    tokens = req["completion_tokens"].astype(float)
    timed = server_timed(requests)
    streamed, decode, ttft = _server_timing(req, ok) if timed else _client_timing(req, ok)
    frame = pd.DataFrame(
        {
            **{k: req[k] for k in RUN_KEYS},
            "t_start": t_start,
            "t_end_ok": t_end.where(ok),
            "tokens_ok": tokens.where(ok, 0.0),
            "ok": ok.astype(int),
            "decode": decode,
            "ttft": ttft,
            "burst": (~streamed & ok).astype(int),
        }
    )
    grouped = frame.groupby(RUN_KEYS, sort=True, dropna=False)
    runs = grouped.agg(
        t_start=("t_start", "min"),
        t_end=("t_end_ok", "max"),
        tokens=("tokens_ok", "sum"),
        n_requests=("ok", "size"),
        n_ok=("ok", "sum"),
        decode_tps=("decode", "median"),
        ttft_ms=("ttft", "median"),
        n_burst=("burst", "sum"),
        n_decode=("decode", "count"),
    ).reset_index()
    runs["timing"] = "server" if timed else "client"
    wall = runs["t_end"] - runs["t_start"]
    runs["aggregate_tps"] = (runs["tokens"] / wall).where((runs["n_ok"] > 0) & (wall > 0))
    runs["n_errors"] = runs["n_requests"] - runs["n_ok"]
    first = runs.groupby(["arm", "boot"])["t_start"].transform("min")
    runs["cold"] = runs["t_start"] == first
    if not warm.empty:  # warm-ups before a boot's first measured run took the cold start: it is not cold
        warmed = warm.groupby(["arm", "boot"])["t_start"].min()
        before = [
            (a, b) in warmed.index and warmed[(a, b)] <= t
            for a, b, t in zip(runs["arm"], runs["boot"], runs["t_start"], strict=True)
        ]
        runs.loc[before, "cold"] = False
    # only the first run of a boot is cold, even when two runs share its start time
    dup = runs[runs["cold"]].duplicated(["arm", "boot"])
    runs.loc[dup[dup].index, "cold"] = False
    return runs[columns].reset_index(drop=True)


def values_table(runs: pd.DataFrame, summaries: pd.DataFrame) -> pd.DataFrame:
    """Long table (one row per run and metric) from measured runs and imported summary records.

    A summary of n=1 is one run; n=2 or 3 with min and max gives its runs exactly (min, median, max);
    any other summary stands for its median only (runs_known False: weaker evidence).
    """
    parts: list[pd.DataFrame] = []
    if not runs.empty:
        long = runs.melt(
            id_vars=[*RUN_KEYS, "cold", "n_requests", "n_errors"],
            value_vars=list(METRICS),
            var_name="metric",
            value_name="value",
        )
        long["origin"] = "request"
        long["runs_known"] = True
        parts.append(long)
    if not summaries.empty:
        rows = []
        for rec in summaries.to_dict("records"):
            boot = 1 if _missing(rec["boot"]) else int(rec["boot"])
            lo = None if _missing(rec["min"]) else float(rec["min"])
            hi = None if _missing(rec["max"]) else float(rec["max"])
            if rec["n"] == 1:
                vals, known = [float(rec["median"])], True
            elif rec["n"] == 2 and lo is not None and hi is not None:
                vals, known = [lo, hi], True
            elif rec["n"] == 3 and lo is not None and hi is not None:
                vals, known = [lo, float(rec["median"]), hi], True
            else:
                vals, known = [float(rec["median"])], False
            for rep, value in enumerate(vals, start=1):
                rows.append(
                    {
                        "arm": rec["arm"],
                        "boot": boot,
                        "workload": rec["workload"],
                        "concurrency": int(rec["concurrency"]),
                        "rep": rep,
                        "cold": False,
                        "n_requests": int(rec["n"]) if not known else 1,
                        "n_errors": 0,
                        "metric": rec["metric"],
                        "value": value,
                        "origin": "summary",
                        "runs_known": known,
                    }
                )
        parts.append(pd.DataFrame(rows))
    if not parts:
        return pd.DataFrame(columns=VALUE_COLUMNS)
    out = pd.concat(parts, ignore_index=True)[VALUE_COLUMNS]
    out = out[out["value"].notna() & (out["value"] > 0)]
    return out.sort_values([*RUN_KEYS, "metric"], kind="mergesort").reset_index(drop=True)


@dataclass(frozen=True, slots=True)
class CellSummary:
    """Spread of one metric in one (arm, workload, concurrency) cell, over every counted run."""

    arm: str
    workload: str
    concurrency: int
    metric: str
    n: int
    n_boots: int
    n_cold: int
    median: float
    minimum: float
    maximum: float
    iqr: float
    runs_known: bool
    origin: str
    values: tuple[float, ...]


def cell_summaries(values: pd.DataFrame, include_cold: bool) -> list[CellSummary]:
    """Median, min, max and IQR per cell and metric (cold runs counted or not, per policy)."""
    groups: dict[tuple[str, str, int, str], list[tuple[float, bool, int, bool, str]]] = {}
    columns = zip(
        values["arm"],
        values["workload"],
        values["concurrency"],
        values["metric"],
        values["value"],
        values["cold"],
        values["boot"],
        values["runs_known"],
        values["origin"],
        strict=True,
    )
    for arm, workload, conc, metric, value, cold, boot, known, origin in columns:
        groups.setdefault((str(arm), str(workload), int(conc), str(metric)), []).append(
            (float(value), bool(cold), int(boot), bool(known), str(origin))
        )
    out: list[CellSummary] = []
    for (arm, workload, conc, metric), rows in sorted(groups.items()):
        counted = rows if include_cold else [r for r in rows if not r[1]] or rows
        vals = np.array([r[0] for r in counted])
        q1, q3 = np.percentile(vals, [25, 75])
        out.append(
            CellSummary(
                arm=arm,
                workload=workload,
                concurrency=conc,
                metric=metric,
                n=int(vals.size),
                n_boots=len({r[2] for r in counted}),
                n_cold=sum(1 for r in rows if r[1]),
                median=float(np.median(vals)),
                minimum=float(vals.min()),
                maximum=float(vals.max()),
                iqr=float(q3 - q1),
                runs_known=all(r[3] for r in counted),
                origin="summary" if any(r[4] == "summary" for r in counted) else "request",
                values=tuple(float(v) for v in vals),
            )
        )
    return out


def boot_statistics(values: pd.DataFrame, include_cold: bool) -> pd.DataFrame:
    """One value per (arm, boot, workload, concurrency, metric): the median of the counted runs.

    The boot is the replication unit: runs inside one boot share its state, so comparisons across
    arms use these per-boot values, never the runs themselves.
    """
    cols = [*BOOT_KEYS, "metric", "value", "log_value", "n_runs", "runs_known"]
    if values.empty:
        return pd.DataFrame(columns=cols)
    # cold runs follow the policy even when a boot has no other run in the cell: that boot did not
    # measure the cell warm (counting its cold run compared a cold boot with warm ones)
    counted = values if include_cold else values[~values["cold"].astype(bool)]
    if counted.empty:
        return pd.DataFrame(columns=cols)
    stats = (
        counted.groupby([*BOOT_KEYS, "metric"], sort=True)
        .agg(value=("value", "median"), n_runs=("value", "size"), runs_known=("runs_known", "all"))
        .reset_index()
    )
    stats["log_value"] = np.log(stats["value"].astype(float))
    return stats[cols]
