"""Coverage of the acceptance intervals at nominal 90% by clusters, per-request skew and mean rate.

    python bench/acceptance_coverage.py --campaigns 2000

prints a markdown table (docs/performance.md, Acceptance intervals): for each per-request mean rate,
Beta concentration of the per-request rates (None: every request at the mean) and requests per window,
the share of campaigns whose interval covers the true rate, as shipped (stats/acceptance_ci.py:
Korn-Graubard capped at CLUSTER_CAP * n^2 effective trials below UNCAPPED_CLUSTERS clusters) and,
in brackets, the plain Korn-Graubard interval it replaced. One cluster is reported `too small` (no
interval covers: the decision says so). Chains of k = 3 positions, 40 draft rounds a request.
"""

from __future__ import annotations

import argparse

import numpy as np

from mtpverdict.sim import ChainModel, simulate_chain
from mtpverdict.stats import acceptance_ci

ALPHA = 0.10
CLUSTERS = (1, 2, 3, 4, 6, 8, 11, 12, 16, 24)
RATES = (0.6, 0.9, 0.97)
CONCENTRATIONS = (3.0, 10.0, 30.0, None)


def _plain(a: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The uncapped Korn-Graubard interval (the shipped one with the cap lifted)."""
    saved = acceptance_ci.UNCAPPED_CLUSTERS
    acceptance_ci.UNCAPPED_CLUSTERS = 0
    try:
        _, low, high, _, _ = acceptance_ci.ratio_interval(a, d, ALPHA)
    finally:
        acceptance_ci.UNCAPPED_CLUSTERS = saved
    return low, high


def cell(rate: float, concentration: float | None, clusters: int, per_window: int, campaigns: int) -> str:
    if clusters < acceptance_ci.MIN_CLUSTERS:
        return "too small"
    model = ChainModel(
        rate=rate, concentration=concentration, requests=clusters * per_window, requests_per_window=per_window
    )
    truth, _ = model.truth()
    seed = int(rate * 1000) * 100 + clusters * 7 + per_window
    accepted = simulate_chain(model, np.random.default_rng(seed), campaigns).sum(-1)
    a = accepted.reshape(campaigns, clusters, per_window).sum(-1).astype(float)
    d = np.full(a.shape, float(model.rounds * model.k * per_window))
    _, low, high, _, _ = acceptance_ci.ratio_interval(a, d, ALPHA)
    shipped = float(((low <= truth) & (truth <= high)).mean())
    low, high = _plain(a, d)
    plain = float(((low <= truth) & (truth <= high)).mean())
    return f"{shipped * 100:.0f} ({plain * 100:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=2000)
    args = parser.parse_args()
    print("| mean rate | concentration | requests / window | " + " | ".join(f"{n}" for n in CLUSTERS) + " |")
    print("|---|---|---|" + "---|" * len(CLUSTERS))
    for rate in RATES:
        for conc in CONCENTRATIONS:
            for per_window in (1, 4):
                row = [cell(rate, conc, n, per_window, args.campaigns) for n in CLUSTERS]
                print(f"| {rate} | {conc} | {per_window} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
