"""KV-cache ceilings: pool / window, a ceiling on concurrency rather than a measured concurrency."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class KvCeiling:
    """An arm's KV pool (largest over its ready boots) and the concurrency ceiling it allows."""

    arm: str
    kv_cache_tokens: int | None
    boots: int
    window_tokens: int | None
    ceiling: float | None  # pool / window
    ratio_to_control: float | None  # pool / the family control's pool


class BootPool(Protocol):
    """What a KV ceiling needs of a boot: whether it served, and the pool it reported."""

    @property
    def status(self) -> str: ...

    @property
    def kv_cache_tokens(self) -> int | None: ...


def kv_pool(boots: Sequence[BootPool]) -> tuple[int | None, int]:
    """Largest KV pool over an arm's ready boots, and how many of its boots reported one."""
    pools = [b.kv_cache_tokens for b in boots if b.status == "ready" and b.kv_cache_tokens is not None]
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
