"""Adaptive campaigns on simulated seats: boots saved against a fixed design, and the error rates kept.

For each simulated campaign of B rounds, the fixed design decides once on all B rounds. The adaptive
design (what `collect --until-resolved` does) decides after every round, stops booting candidates whose
verdict is settled (eligible, rejected, void), and tests each look at alpha / B. Both read the same
simulated measurements, so the comparison is paired. Prints boots used, false promotions under the null
with a Clopper-Pearson interval, and power at a real effect.

    python bench/adaptive.py [--campaigns 300] [--rounds 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from mtpverdict.decide import decide
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

SETTLED = ("eligible", "rejected", "void")


def scenarios(rounds: int) -> dict[str, Scenario]:
    common: dict[str, Any] = {
        "boots_per_arm": rounds,
        "reps": 2,
        "concurrency": (1, 4),
        "completion_tokens": 64,
    }
    return {
        "null": Scenario(
            name="null",
            arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
            **common,
        ),
        "one void, one winner": Scenario(
            name="mixed",
            arms=(
                SimArm("off_A"),
                SimArm("k1", 1, 0.08),
                SimArm("k2", 2, -0.05, first_position_rate=0.0),
                SimArm("k3", 3, -0.10),
                SimArm("off_B"),
            ),
            **common,
        ),
        "all win": Scenario(
            name="win",
            arms=(
                SimArm("off_A"),
                SimArm("k1", 1, 0.08),
                SimArm("k2", 2, 0.12),
                SimArm("k3", 3, 0.10),
                SimArm("off_B"),
            ),
            **common,
        ),
    }


def one(args: tuple[Scenario, int, int]) -> tuple[int, int, str, str | None, str, str | None]:
    """(boots used adaptively, boots of the fixed design, adaptive decision, its arm, fixed decision, arm)."""
    scenario, seed, rounds = args
    policy = load_policy("default")
    campaign, records = simulate_campaign(scenario, np.random.default_rng([seed, 7]))
    fixed = decide(results_from_records(campaign, records), policy)
    sequential = {**campaign, "sequential_looks": rounds}
    candidates = [a.name for a in scenario.arms if a.k]
    kept: set[tuple[str, int]] = set()
    settled: set[str] = set()
    decision = None
    for round_ in range(1, rounds + 1):
        kept |= {(a.name, round_) for a in scenario.arms if a.name not in settled}
        subset = [r for r in records if (r["arm"], r["boot"]) in kept]
        decision = decide(results_from_records(sequential, subset), policy)
        settled = {a.name for a in decision.arms if not a.is_control and a.verdict in SETTLED}
        if all(c in settled for c in candidates):
            break
    assert decision is not None
    return (
        len(kept),
        len(scenario.arms) * rounds,
        decision.decision,
        None if decision.selected is None else decision.selected.arm,
        fixed.decision,
        None if fixed.selected is None else fixed.selected.arm,
    )


def _promotions(
    out: list[tuple[Any, ...]], truth: dict[str, float], index: int, arm_index: int
) -> tuple[int, int]:
    """(promotions, promotions of an arm whose true effect is positive) in one column of the results."""
    promoted = [o for o in out if o[index] == "promote"]
    return len(promoted), sum(1 for o in promoted if truth[str(o[arm_index])] > 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(
        f"adaptive vs fixed: {args.campaigns} simulated campaigns per scenario, {args.rounds} rounds, "
        "policy default (alpha 0.05; adaptive looks at alpha / rounds)"
    )
    rows = []
    for label, scenario in scenarios(args.rounds).items():
        truth = {a.name: a.effect for a in scenario.arms}
        start = time.time()
        with multiprocessing.Pool(args.workers) as pool:
            out = pool.map(one, [(scenario, seed, args.rounds) for seed in range(args.campaigns)])
        used = sum(o[0] for o in out)
        total = sum(o[1] for o in out)

        a_prom, a_good = _promotions(out, truth, 2, 3)
        f_prom, f_good = _promotions(out, truth, 4, 5)
        n = args.campaigns
        a_false, f_false = a_prom - a_good, f_prom - f_good
        a_ci = proportion_confint(a_false, n, alpha=0.05, method="beta")
        f_ci = proportion_confint(f_false, n, alpha=0.05, method="beta")
        rows.append(
            (
                label,
                used / total,
                a_false / n,
                a_ci,
                f_false / n,
                f_ci,
                a_good / n,
                f_good / n,
                time.time() - start,
            )
        )
    print(
        f"{'scenario':<22} {'boots used':>10} {'false promo adaptive [95% CI]':>32} "
        f"{'false promo fixed [95% CI]':>30} {'power adaptive':>15} {'power fixed':>12}"
    )
    for label, frac, af, aci, ff, fci, ap, fp, secs in rows:
        print(
            f"{label:<22} {frac * 100:>9.1f}% {af * 100:>8.1f}% [{aci[0] * 100:.1f}, {aci[1] * 100:.1f}]%"
            f"{'':>11} {ff * 100:>6.1f}% [{fci[0] * 100:.1f}, {fci[1] * 100:.1f}]%{'':>8} {ap * 100:>13.1f}% "
            f"{fp * 100:>11.1f}%   ({secs:.0f} s)"
        )


if __name__ == "__main__":
    main()
