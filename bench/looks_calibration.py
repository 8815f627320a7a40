"""Calibration of the looks: following an inconclusive decision's next step by hand until it settles.

`python bench/calibration.py --looks` runs this. Every depth is truly at the promotion boundary
(+min_effect: the default policy's margin, or 0 with min_effect = 0), so any promotion is false. A
user starts with a fixed campaign of START boots per arm and decides it; while it is inconclusive
they follow the next step:

- `continued` (what decide now says): the fixed campaign's one look spent its alpha, so the next
  step is a new campaign of `budget` boots per arm under --until-resolved that continues it
  (`--continues`): its looks share what the first left, alpha - alpha = 0, so it cannot promote;
- `new campaign` (the next step before it added `--continues`): the same new campaign with an alpha
  of its own, looking after every round from its second, each look at alpha / budget
  (stats/looks.look_alpha: Bonferroni over the planned looks), stopping at a promotion or when every
  depth is settled;
- `uncounted` (the earlier next step, resumed without --until-resolved as collect required): the
  same campaign resumed one boot per arm at a time, every look at the full alpha.

Per-boot statistics from mtpverdict.sim.simulate_boots, decided by stats.procedure.
batch_procedure; each look sees the first r boots of every arm. A depth settled at a look (better,
equivalent, worse, below min_effect) is not booted again in real life; here its later boots are
drawn but its outcome is frozen at the look that settled it.
"""

from __future__ import annotations

import math

import numpy as np
from procedure_calibration import ALPHA, BETTER, INCONCLUSIVE, MARGIN, _rate, sweep

from mtpverdict.sim import BootBatch, BootScenario, simulate_boots
from mtpverdict.stats.looks import SPENT, look_alpha
from mtpverdict.stats.procedure import batch_procedure

SEED = 20261226
START = 3  # boots per arm of the first, fixed campaign
BUDGETS = (10, 40)  # boots per arm the user is willing to spend
MODES: dict[str, float | None] = {"margin": None, "zero": 0.0}


def _first(batch: BootBatch, r: int, boots: int) -> tuple[np.ndarray, np.ndarray]:
    """The first r boots of every arm (controls: off_A's and off_B's first r each)."""
    control = np.concatenate([batch.control[..., :r], batch.control[..., boots : boots + r]], axis=-1)
    return batch.arm[..., :r], control


def _look(batch: BootBatch, r: int, boots: int, alpha: float, min_effect: float | None) -> np.ndarray:
    arm, control = _first(batch, r, boots)
    _, arrays = batch_procedure(arm, control, alpha=alpha, equivalence_margin=MARGIN, min_effect=min_effect)
    return np.asarray(arrays.outcome)  # (B, A)


def _scenario(boots: int, min_effect: float | None) -> BootScenario:
    truth = math.log1p(MARGIN if min_effect is None else min_effect)
    return BootScenario("boundary", sweep(dict.fromkeys(("k1", "k2", "k3"), (truth, truth))), boots=boots)


def _sequence(
    batch: BootBatch, boots: int, looks: list[tuple[int, float]], min_effect: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Promoted and settled per campaign after looking at (boots so far, alpha) in turn."""
    campaigns, arms = batch.arm.shape[0], batch.arm.shape[1]
    frozen = np.full((campaigns, arms), INCONCLUSIVE)
    done = np.zeros(campaigns, dtype=bool)
    promoted = np.zeros(campaigns, dtype=bool)
    for r, alpha in looks:
        if alpha <= 0:
            break
        outcome = _look(batch, r, boots, alpha, min_effect)
        fresh = (frozen == INCONCLUSIVE) & ~done[:, None]
        frozen = np.where(fresh, outcome, frozen)
        promoted |= ~done & (frozen == BETTER).any(axis=1)
        done |= promoted | (frozen != INCONCLUSIVE).all(axis=1)
    return promoted, done


def counted(
    campaigns: int, budget: int, min_effect: float | None, seed: int, carried: float = 0.0
) -> tuple[int, int]:
    """False promotions and settled campaigns following a next step that starts a new campaign, which
    carries `carried` of alpha as spent (decide/looks.py: what the continued campaign's looks spent)."""
    first = simulate_boots(_scenario(START, min_effect), np.random.default_rng([seed, 1]), campaigns)
    promoted1, settled1 = _sequence(first, START, [(START, ALPHA)], min_effect)
    second = simulate_boots(_scenario(budget, min_effect), np.random.default_rng([seed, 2]), campaigns)
    spent: list[float] = []
    looks = []
    budget_alpha = ALPHA - carried
    for r in range(2, budget + 1):  # collect --until-resolved looks before each round from the second
        a = 0.0 if budget_alpha <= SPENT else look_alpha(budget_alpha, budget, spent)
        spent.append(a)
        looks.append((r, a))
    promoted2, settled2 = _sequence(second, budget, looks, min_effect)
    go_on = ~settled1
    return int((promoted1 | (go_on & promoted2)).sum()), int((settled1 | (go_on & settled2)).sum())


def continued(campaigns: int, budget: int, min_effect: float | None, seed: int) -> tuple[int, int]:
    """The next step now: the new campaign continues the fixed one, whose one look spent alpha."""
    return counted(campaigns, budget, min_effect, seed, carried=ALPHA)


def uncounted(campaigns: int, budget: int, min_effect: float | None, seed: int) -> tuple[int, int]:
    """The earlier next step: the fixed campaign resumed a boot per arm at a time, each look at alpha."""
    batch = simulate_boots(_scenario(budget, min_effect), np.random.default_rng([seed, 3]), campaigns)
    promoted, settled = _sequence(batch, budget, [(r, ALPHA) for r in range(START, budget + 1)], min_effect)
    return int(promoted.sum()), int(settled.sum())


def rows(campaigns: int) -> list[str]:
    out = [
        "| mode | truth | budget (boots per arm) | next step | false promotions [95% CP] | settled |",
        "|---|---|---|---|---|---|",
    ]
    for mode, min_effect in MODES.items():
        truth = f"{MARGIN if min_effect is None else min_effect:+.0%} (= min_effect)"
        for budget in BUDGETS:
            steps = (
                ("uncounted (earlier)", uncounted),
                ("new campaign (earlier)", counted),
                ("continued (now)", continued),
            )
            for name, fn in steps:
                false, settled = fn(campaigns, budget, min_effect, SEED + budget)
                out.append(
                    f"| {mode} | {truth} | {budget} | {name} | {_rate(false, campaigns)} | "
                    f"{settled / campaigns:.3f} |"
                )
    return out


def run(campaigns: int) -> str:
    return "\n".join(
        [
            f"Every depth at +min_effect; a fixed campaign of {START} boots per arm first; "
            f"{campaigns} campaigns per row.",
            "",
            *rows(campaigns),
        ]
    )
