"""Calibration of schedules: does a schedule follow a true crossover, and does it switch without one?

`python bench/calibration.py --schedule` runs this. Each campaign is simulated at the request level
(mtpverdict.sim.simulate_campaign: off_A, k1, k2, k3, off_B in round-robin boot order, one `chat`
workload at concurrency 1, 2, 4 and 8, 2 reps, 128 tokens, the simulator's default noise) and decided by
the real engine under the default policy with `[selection] mode = "schedule"`. A depth's true effect is
log-linear in concurrency doublings (SimArm.effect at c=1, effect_slope per doubling). Scenarios:
- crossover: k2 is +30% at c=1 and -15% at c=8 (about +13% at c=2, -2% at c=4); k1 and k3 run as off;
- ranked crossover: k1 +12% to -3%, k2 +30% to -15%, k3 +25% to -30% (the synthetic-crossover fixture);
- null: every depth runs as off;
- flat: k2 +30% at every concurrency; k1 and k3 run as off;
- flat near the floor: k2 +10% at every concurrency (about the floor 3 boots resolve).
Per campaign, at each measured concurrency c the schedule's depth D(c) (Schedule.depth_at):
- recovered (crossover scenarios): D(1) is the truly best depth at c=1, D(8) = 0, and D(c) never runs a
  depth whose true effect at c is below zero;
- exact: D(c) is the truly best depth at every measured c (0 where no depth's true effect exceeds the
  policy's 3% equivalence margin: a smaller effect is no practical difference);
- false switch: some D(c) is a depth whose true effect at c is within the margin (it leaves off where
  no true difference exists);
- varies: D differs between two measured concurrencies whose truly best depth is the same.
Rates carry two-sided 95% Clopper-Pearson intervals.

    python bench/calibration.py --schedule [--campaigns 1000] [--boots 3] [--workers 2]
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mtpverdict.decide import decide
from mtpverdict.formats.decision import Decision
from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules.registry import parse_rules
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

SEED = 20261218
CONCURRENCY = (1, 2, 4, 8)
CHUNK = 25  # campaigns per worker task
CONFIDENCE_ALPHA = 0.05  # two-sided 95% Clopper-Pearson intervals
POLICY_FILE = "rules/default.toml"
MARGIN = math.log1p(0.03)  # the default policy's equivalence_margin: a smaller true effect is no difference


def _arm(name: str, k: int, at_1: float = 0.0, at_8: float | None = None) -> SimArm:
    """A depth whose gain goes log-linearly from `at_1` at c=1 to `at_8` at c=8."""
    at_8 = at_1 if at_8 is None else at_8
    return SimArm(name, k, math.log1p(at_1), (math.log1p(at_8) - math.log1p(at_1)) / 3)


SCENARIOS = {
    "crossover": (_arm("k1", 1), _arm("k2", 2, 0.30, -0.15), _arm("k3", 3)),
    "ranked crossover": (_arm("k1", 1, 0.12, -0.03), _arm("k2", 2, 0.30, -0.15), _arm("k3", 3, 0.25, -0.30)),
    "null": (_arm("k1", 1), _arm("k2", 2), _arm("k3", 3)),
    "flat": (_arm("k1", 1), _arm("k2", 2, 0.30), _arm("k3", 3)),
    "flat near the floor": (_arm("k1", 1), _arm("k2", 2, 0.10), _arm("k3", 3)),
}
CROSSOVERS = ("crossover", "ranked crossover")


def scenario(name: str, boots: int) -> Scenario:
    return Scenario(
        name=f"{name.replace(' ', '-')}-{boots}",
        arms=(SimArm("off_A"), *SCENARIOS[name], SimArm("off_B")),
        boots_per_arm=boots,
        reps=2,
        concurrency=CONCURRENCY,
        completion_tokens=128,
    )


def true_effect(arm: SimArm, conc: int) -> float:
    return arm.effect + arm.effect_slope * math.log2(conc)


def true_best(arms: Sequence[SimArm], conc: int) -> int:
    """The depth with the largest true effect at a concurrency, when it exceeds the margin; else 0."""
    best = max(arms, key=lambda a: true_effect(a, conc))
    return best.k if true_effect(best, conc) > MARGIN else 0


@dataclass(frozen=True, slots=True)
class Counts:
    """Outcomes of one scenario's campaigns."""

    campaigns: int = 0
    recovered: int = 0
    exact: int = 0
    false_switch: int = 0
    varies: int = 0
    promote: int = 0
    inconclusive: int = 0
    keep_disabled: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(_fields(self), _fields(other), strict=True)))


def _fields(c: Counts) -> tuple[int, ...]:
    return (
        c.campaigns,
        c.recovered,
        c.exact,
        c.false_switch,
        c.varies,
        c.promote,
        c.inconclusive,
        c.keep_disabled,
    )


def judge(decision: Decision, arms: Sequence[SimArm]) -> Counts:
    """One campaign's schedule against the truth (module docstring)."""
    by_k = {a.k: a for a in arms}
    depth = {c: (decision.schedule.depth_at(c) if decision.schedule else 0) for c in CONCURRENCY}
    best = {c: true_best(arms, c) for c in CONCURRENCY}
    effect = {c: (true_effect(by_k[depth[c]], c) if depth[c] else 0.0) for c in CONCURRENCY}
    recovered = depth[1] == best[1] and depth[8] == 0 and all(e >= 0 for e in effect.values())
    pairs = zip(CONCURRENCY, CONCURRENCY[1:], strict=False)
    kind = str(decision.decision)
    return Counts(
        campaigns=1,
        recovered=int(recovered),
        exact=int(all(depth[c] == best[c] for c in CONCURRENCY)),
        false_switch=int(any(depth[c] and abs(effect[c]) <= MARGIN for c in CONCURRENCY)),
        varies=int(any(depth[a] != depth[b] and best[a] == best[b] for a, b in pairs)),
        promote=int(kind == "promote"),
        inconclusive=int(kind == "inconclusive"),
        keep_disabled=int(kind == "keep_mtp_disabled"),
    )


def _policy() -> Policy:
    with open(POLICY_FILE, encoding="utf-8") as fh:
        text = fh.read().replace('mode = "fastest"', 'mode = "schedule"')
    return parse_rules(text, "default-schedule.toml")


def _task(job: tuple[str, int, int, int]) -> tuple[str, int, Counts]:
    name, boots, start, n = job
    policy = _policy()
    design = scenario(name, boots)
    arms = SCENARIOS[name]
    total = Counts()
    for i in range(start, start + n):
        campaign, records = simulate_campaign(design, np.random.default_rng([SEED, boots, i]))
        decision = decide(results_from_records(campaign, records, label=f"sim-{i}"), policy)
        total = total + judge(decision, arms)
    return name, boots, total


def _rate(count: int, n: int) -> str:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(count, n, alpha=CONFIDENCE_ALPHA, method="beta")
    return f"{count / n:.1%} [{low:.1%}, {high:.1%}]"


def table(results: dict[tuple[str, int], Counts]) -> str:
    lines = [
        "| scenario | boots | campaigns | recovered | exact | false switch | varies "
        "| promote / inconclusive / keep off |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (name, boots), c in results.items():
        recovered = _rate(c.recovered, c.campaigns) if name in CROSSOVERS else "-"
        lines.append(
            f"| {name} | {boots} | {c.campaigns} | {recovered} | {_rate(c.exact, c.campaigns)} | "
            f"{_rate(c.false_switch, c.campaigns)} | {_rate(c.varies, c.campaigns)} | "
            f"{c.promote} / {c.inconclusive} / {c.keep_disabled} |"
        )
    return "\n".join(lines)


def run(boots: Sequence[int], campaigns: int, workers: int) -> str:
    jobs = [
        (name, b, start, min(CHUNK, campaigns - start))
        for name in SCENARIOS
        for b in boots
        for start in range(0, campaigns, CHUNK)
    ]
    results: dict[tuple[str, int], Counts] = {(name, b): Counts() for name in SCENARIOS for b in boots}
    t0 = time.time()
    with multiprocessing.Pool(workers) as pool:
        for name, b, counts in pool.imap_unordered(_task, jobs):
            results[(name, b)] = results[(name, b)] + counts
    return f"{campaigns} campaigns per row in {time.time() - t0:.0f} s\n" + table(results)
