"""KV-cache ceilings: pool / window, a ceiling on concurrency rather than a measured concurrency."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True, slots=True)
class KvCeiling:
    """An arm's KV pool (largest over its ready boots) and the concurrency ceiling it allows."""

    arm: str
    kv_cache_tokens: int | None
    boots: int
    window_tokens: int | None
    ceiling: float | None  # pool / window
    ratio_to_control: float | None  # pool / the family control's pool


def kv_pool(boots: pd.DataFrame, arm: str) -> tuple[int | None, int]:
    """Largest reported KV pool over an arm's ready boots, and how many boots reported one."""
    rows = boots[(boots["arm"] == arm) & (boots["status"] == "ready") & boots["kv_cache_tokens"].notna()]
    if rows.empty:
        return None, 0
    return int(rows["kv_cache_tokens"].astype(int).max()), int(len(rows))


def kv_ceiling(boots: pd.DataFrame, arm: str, control_arms: tuple[str, ...],
               window_tokens: int | None) -> KvCeiling:
    """Ceiling = pool / window for one arm, and its pool relative to the family's control pool."""
    pool, count = kv_pool(boots, arm)
    control_pools = [p for p, _ in (kv_pool(boots, c) for c in control_arms) if p is not None]
    ceiling = None if pool is None or not window_tokens else pool / window_tokens
    ratio = None
    if pool is not None and control_pools:
        ratio = pool / max(control_pools)
    return KvCeiling(arm=arm, kv_cache_tokens=pool, boots=count, window_tokens=window_tokens,
                     ceiling=ceiling, ratio_to_control=ratio)
