"""Chained acceptance: position i of a draft round is accepted only if position i-1 was."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class ChainModel:
    """Draft rounds of k tokens accepted as a chain, with a per-request acceptance rate.

    Each request draws its per-position rate q from Beta(rate * concentration, (1 - rate) *
    concentration) (None: every request has q = rate); each of its rounds accepts position i with
    probability q given position i-1 was accepted. Requests run `rounds` rounds each, grouped
    `requests_per_window` to a window (a run's /metrics delta).
    """

    k: int = 3
    rate: float = 0.9
    concentration: float | None = None
    requests: int = 16
    rounds: int = 40
    requests_per_window: int = 4

    def truth(self) -> tuple[float, tuple[float, ...]]:
        """True acceptance rate and per-position rates: E[q^i] from the Beta moments."""
        moments = []
        for i in range(1, self.k + 1):
            if self.concentration is None:
                moments.append(self.rate**i)
                continue
            a, b = self.rate * self.concentration, (1 - self.rate) * self.concentration
            moments.append(math.prod((a + j) / (a + b + j) for j in range(i)))
        return sum(moments) / self.k, tuple(moments)


def simulate_chain(model: ChainModel, rng: np.random.Generator, campaigns: int) -> Any:
    """Per-request accepted counts by position, (campaigns, requests, k) integers, drawn as chains."""
    import numpy as np

    shape = (campaigns, model.requests)
    if model.concentration is None:
        q = np.full(shape, model.rate)
    else:
        q = rng.beta(model.rate * model.concentration, (1 - model.rate) * model.concentration, shape)
    draws = rng.random((*shape, model.rounds, model.k)) < q[..., None, None]
    chain = np.cumprod(draws, axis=-1)  # a position counts only when every earlier one was accepted
    return chain.sum(axis=2)
