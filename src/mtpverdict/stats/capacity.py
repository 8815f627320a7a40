"""KV-cache ceilings: pool / window, a ceiling on concurrency rather than a measured concurrency."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KvCeiling:
    """An arm's KV pool (largest over its ready boots) and the concurrency ceiling it allows."""

    arm: str
    kv_cache_tokens: int | None
    boots: int
    window_tokens: int | None
    ceiling: float | None  # pool / window
    ratio_to_control: float | None  # pool / the family control's pool


def kv_pool(boots: Sequence[Mapping[str, Any]]) -> tuple[int | None, int]:
    """Largest KV pool over an arm's ready boot records, and how many of its boots reported one."""
    pools = [
        int(b["kv_cache_tokens"])
        for b in boots
        if b["status"] == "ready"
        and isinstance(b["kv_cache_tokens"], int | float)
        and not math.isnan(b["kv_cache_tokens"])
    ]
    return (max(pools), len(pools)) if pools else (None, 0)


def kv_ceiling(
    arm: str, pool: tuple[int | None, int], control_pools: Sequence[int | None], window_tokens: int | None
) -> KvCeiling:
    """Ceiling = pool / window for one arm, and its pool relative to the family's control pool."""
    tokens, count = pool
    known = [p for p in control_pools if p is not None]
    ceiling = None if tokens is None or not window_tokens else tokens / window_tokens
    ratio = None if tokens is None or not known else tokens / max(known)
    return KvCeiling(
        arm=arm,
        kv_cache_tokens=tokens,
        boots=count,
        window_tokens=window_tokens,
        ceiling=ceiling,
        ratio_to_control=ratio,
    )
