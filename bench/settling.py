"""Settling: where the default policy spends its boots on a null, and what a futility look buys.

`python bench/calibration.py --settling` runs this. Per-boot statistics from mtpverdict.sim.
simulate_boots (off_A, k1, k2, k3, off_B; two cells; the default alpha, margin and max_drift), decided
by stats.procedure.batch_procedure and the drift control (procedure_calibration.decide_batch):

- fixed: one decision at 3 / 5 / 8 / 10 boots per arm. A null campaign (every depth = off) is
  settled, "keep off", when every arm is equivalent, worse or below min_effect and the controls
  pass; false promotions are any arm called better there. Power: k2 at twice the floor the design
  states (plan.welch_floor, min_effect included; k1 and k3 null), promoted with the controls passing;
  "k2 kept off" is the price: k2 settled not better although it is. False promotions are also
  counted with every depth exactly at +min_effect (the promotion boundary), where they are largest.
- adaptive: a campaign planned for 10 boots per arm under --until-resolved, looking before each round
  from its second at stats/looks.look_alpha (Bonferroni over the planned looks); an arm settled at a
  look is frozen there; the column is the share of null campaigns every arm of which is settled (and
  none promoted) by the look at that many boots.
Rates carry two-sided 95% Clopper-Pearson intervals.
"""

from __future__ import annotations

import math

import numpy as np
from procedure_calibration import (
    ALPHA,
    BETTER,
    BOOT_SD,
    CANDIDATES,
    DESIGN,
    INCONCLUSIVE,
    MARGIN,
    _rate,
    decide_batch,
    sweep,
)

from mtpverdict.plan import welch_floor
from mtpverdict.sim import BootBatch, BootScenario, simulate_boots
from mtpverdict.stats.looks import look_alpha
from mtpverdict.stats.procedure import OUTCOMES, Outcome, batch_procedure

SEED = 20261227
BOOTS = (3, 5, 8, 10)
PLANNED = 10  # boots per arm of the adaptive campaign
KEPT_OFF = [OUTCOMES.index(o) for o in (Outcome.EQUIVALENT, Outcome.WORSE, Outcome.BELOW_MIN_EFFECT)]


def _null(boots: int) -> BootScenario:
    return BootScenario("settle", sweep(), boots=boots)


def _power(boots: int) -> BootScenario:
    effect = 2.0 * welch_floor(BOOT_SD, boots, DESIGN, ALPHA, MARGIN)
    return BootScenario("power", sweep({"k2": (effect, effect)}), boots=boots)


def _boundary(boots: int) -> BootScenario:
    edge = math.log1p(MARGIN)
    return BootScenario("boundary", sweep(dict.fromkeys(CANDIDATES, (edge, edge))), boots=boots)


def fixed_rows(campaigns: int) -> list[str]:
    out = [
        "| boots per arm | null: keep off [95% CP] | null: inconclusive | null: every depth settled | "
        "null: drift control fails | false promotions, null | "
        "false promotions, every depth at +min_effect [95% CP] | power at 2x floor [95% CP] | "
        "k2 kept off at 2x floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in BOOTS:
        null = decide_batch(simulate_boots(_null(b), np.random.default_rng([SEED, 1, b]), campaigns), None)
        promoted = (null.outcome == BETTER).any(axis=1) & null.controls_pass
        settled = (null.outcome != INCONCLUSIVE).all(axis=1) & ~promoted & null.controls_pass
        win = decide_batch(simulate_boots(_power(b), np.random.default_rng([SEED, 2, b]), campaigns), None)
        power = (win.outcome[:, 1] == BETTER) & win.controls_pass
        lost = (win.outcome[:, 1] != BETTER) & (win.outcome[:, 1] != INCONCLUSIVE)
        edge_batch = simulate_boots(_boundary(b), np.random.default_rng([SEED, 4, b]), campaigns)
        edge = decide_batch(edge_batch, None)
        false = int(((edge.outcome == BETTER).any(axis=1) & edge.controls_pass).sum())
        out.append(
            f"| {b} | {_rate(int(settled.sum()), campaigns)} | {1 - settled.mean() - promoted.mean():.3f} | "
            f"{(null.outcome != INCONCLUSIVE).all(axis=1).mean():.3f} | "
            f"{_rate(int((~null.controls_pass).sum()), campaigns)} | "
            f"{_rate(int(promoted.sum()), campaigns)} | {_rate(false, campaigns)} | "
            f"{_rate(int(power.sum()), campaigns)} | "
            f"{lost.mean():.3f} |"
        )
    return out


def _first(batch: BootBatch, r: int) -> tuple[np.ndarray, np.ndarray]:
    control = np.concatenate(
        [batch.control[..., :r], batch.control[..., PLANNED : PLANNED + r]], axis=-1
    )  # off_A's and off_B's first r boots
    return batch.arm[..., :r], control


def _adaptive(batch: BootBatch, futility: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Follow each campaign's looks: the look each settled at (0: never), promoted, k2's outcome.

    futility: the level of the futility decision at every look (None: the look's alpha)."""
    campaigns = batch.arm.shape[0]
    frozen = np.full((campaigns, 3), INCONCLUSIVE)
    promoted = np.zeros(campaigns, dtype=bool)
    settled_at = np.full(campaigns, 0)
    spent: list[float] = []
    for r in range(2, PLANNED + 1):
        alpha = look_alpha(ALPHA, PLANNED, spent)
        spent.append(alpha)
        arm, control = _first(batch, r)
        _, arrays = batch_procedure(
            arm, control, alpha=alpha, equivalence_margin=MARGIN, keep_off_alpha=futility
        )
        open_ = (settled_at == 0) & ~promoted
        frozen = np.where(open_[:, None] & (frozen == INCONCLUSIVE), arrays.outcome, frozen)
        promoted |= open_ & (frozen == BETTER).any(axis=1)
        done = open_ & ~promoted & (frozen != INCONCLUSIVE).all(axis=1)
        settled_at = np.where(done, r, settled_at)
    return settled_at, promoted, frozen[:, 1]


def adaptive_row(campaigns: int) -> list[str]:
    """Campaigns planned for PLANNED boots under --until-resolved, the futility decision at the look's
    alpha and at the policy's alpha, on the same campaigns: nulls settled by each look, false
    promotions (null; every depth at +min_effect), power with k2 at 2x and 1x the floor of the last
    look (plan.welch_floor at PLANNED boots and alpha / PLANNED) and k2 kept off there."""
    floor = welch_floor(BOOT_SD, PLANNED, DESIGN, ALPHA / PLANNED, MARGIN)
    edge = math.log1p(MARGIN)
    batches = {
        "null": simulate_boots(_null(PLANNED), np.random.default_rng([SEED, 3]), campaigns),
        "edge": simulate_boots(
            BootScenario("boundary", sweep(dict.fromkeys(CANDIDATES, (edge, edge))), boots=PLANNED),
            np.random.default_rng([SEED, 5]),
            campaigns,
        ),
        **{
            f"{x}x": simulate_boots(
                BootScenario("power", sweep({"k2": (x * floor, x * floor)}), boots=PLANNED),
                np.random.default_rng([SEED, 6, x]),
                campaigns,
            )
            for x in (2, 1)
        },
    }
    head = " | ".join(f"settled by {b}" for b in BOOTS)
    out = [
        f"| futility level | {head} | false promotions, null | false promotions, every depth at "
        "+min_effect | power at 2x floor | k2 kept off at 2x floor | power at 1x floor | "
        "k2 kept off at 1x floor |",
        "|---|" + "---|" * (len(BOOTS) + 7),
    ]
    promotions: list[np.ndarray] = []
    for name, futility in (("the look's alpha", None), (f"alpha ({ALPHA})", ALPHA)):
        settled_at, promoted, _ = _adaptive(batches["null"], futility)
        cols = [_rate(int(((settled_at > 0) & (settled_at <= b)).sum()), campaigns) for b in BOOTS]
        edge_promoted = _adaptive(batches["edge"], futility)[1]
        cols += [_rate(int(promoted.sum()), campaigns), _rate(int(edge_promoted.sum()), campaigns)]
        promotions += [promoted, edge_promoted]
        for x in ("2x", "1x"):
            k2 = _adaptive(batches[x], futility)[2]
            promotions.append(k2 == BETTER)
            cols += [_rate(int((k2 == BETTER).sum()), campaigns), f"{np.isin(k2, KEPT_OFF).mean():.3f}"]
        out.append(f"| {name} | " + " | ".join(cols) + " |")
    half = len(promotions) // 2
    names = ("null", "every depth at +min_effect", "2x floor", "1x floor")
    gained = [int((b & ~a).sum()) for a, b in zip(promotions[:half], promotions[half:], strict=True)]
    lost = [int((a & ~b).sum()) for a, b in zip(promotions[:half], promotions[half:], strict=True)]
    out += [
        "",
        "promotions at the policy's alpha against the look's, same campaigns: "
        + "; ".join(f"{n} +{g} -{x}" for n, g, x in zip(names, gained, lost, strict=True)),
    ]
    return out


def run(campaigns: int) -> str:
    return "\n".join(
        [
            f"Null (every depth = off) and power (k2 at 2x the floor) campaigns; boot sd {BOOT_SD:.2%}; "
            f"{campaigns} campaigns per row; alpha {ALPHA}, margin = min_effect {MARGIN:.0%}.",
            "",
            "Fixed designs:",
            "",
            *fixed_rows(campaigns),
            "",
            f"Adaptive: a campaign planned for {PLANNED} boots per arm, a look before each round from "
            f"the second at alpha / {PLANNED}, the futility decision at the look's alpha or at alpha:",
            "",
            *adaptive_row(campaigns),
        ]
    )


def decide_rows(campaigns: int, boots: int = 8) -> list[str]:
    """The fixed row's parts as `decide` counts them end to end: calibration.py's null campaigns (its
    seeds) decided by the real engine under the default policy; every depth rejected, the drift
    control failing, and keep off."""
    import calibration
    from calibration import scenario

    from mtpverdict.decide import decide
    from mtpverdict.formats.decision import ControlStatus, DecisionKind, Verdict
    from mtpverdict.formats.results_io import results_from_records
    from mtpverdict.rules import load_policy
    from mtpverdict.sim import simulate_campaign

    policy = load_policy("default")
    sc = scenario(boots, "null", policy)
    seed = calibration.SEED + 100 * boots  # the null scenario's seed in calibration.run
    settled = drift = keep = 0
    for i in range(campaigns):
        campaign, records = simulate_campaign(sc, np.random.default_rng([seed, i]))
        d = decide(results_from_records(campaign, records, label=f"sim-{i}"), policy)
        depths = [a for a in d.arms if a.verdict is not Verdict.CONTROL]
        settled += all(a.verdict in (Verdict.REJECTED, Verdict.VOID) for a in depths)
        drift += any(c.name == "drift" and c.status is ControlStatus.FAIL for c in d.controls)
        keep += d.decision is DecisionKind.KEEP_MTP_DISABLED
    return [
        "| boots per arm | campaigns | null: keep off [95% CP] | every depth settled | "
        "drift control fails [95% CP] |",
        "|---|---|---|---|---|",
        f"| {boots} | {campaigns} | {_rate(keep, campaigns)} | {settled / campaigns:.3f} | "
        f"{_rate(drift, campaigns)} |",
    ]
