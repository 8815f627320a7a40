"""Procedure-level calibration: the family procedure and the control check on simulated per-boot statistics.

`python bench/calibration.py --procedure` runs this. Every campaign is drawn at the boot level
(mtpverdict.sim.simulate_boots: boot shift shared by a boot's cells, cell noise, and each
scenario's twist), then decided by stats.procedure.batch_procedure and stats.drift (the same code the
typed call runs, on a batch). A promotion is an arm called better while the control check passes; it
is false when the arm's true effect is not beyond log(1 + min_effect) at every design cell.

Modes: `margin` (min_effect defaults to the +-3% equivalence margin: the procedure's default) and
`zero` (min_effect 0, equivalence decided first: the test alone, with no cushion).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from mtpverdict.plan import Design, welch_floor
from mtpverdict.sim import BootArm, BootBatch, BootScenario, ChainModel, simulate_boots, simulate_chain
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.acceptance_ci import ratio_interval
from mtpverdict.stats.drift import failing, fit_shapes
from mtpverdict.stats.procedure import OUTCOMES, Outcome, batch_procedure

ALPHA = 0.05  # the default policy's family-wise alpha
MARGIN = 0.03  # the default policy's equivalence margin
MAX_DRIFT = 0.05  # the default policy's max_drift
CONFIDENCE_ALPHA = 0.05  # two-sided 95% Clopper-Pearson intervals on the rates
SEED = 20261213
MODES: dict[str, float | None] = {"margin": None, "zero": 0.0}
BETTER, WORSE = OUTCOMES.index(Outcome.BETTER), OUTCOMES.index(Outcome.WORSE)
INCONCLUSIVE = OUTCOMES.index(Outcome.INCONCLUSIVE)
C1, C4, C8 = ("chat", 1), ("chat", 4), ("chat", 8)
BOOT_SD = math.sqrt(BootScenario("sd", ()).boot_sd ** 2 + BootScenario("sd", ()).cell_sd ** 2)
DESIGN = Design(depths=3, control_arms=2, cells=2)
CANDIDATES = ("k1", "k2", "k3")


def sweep(
    effects: Mapping[str, tuple[float, ...]] | None = None,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[BootArm, ...]:
    """off_A, k1, k2, k3, off_B with the given true log effects and per-arm settings."""
    middle = tuple(
        replace(BootArm(n, effects=(effects or {}).get(n, ())), **dict((settings or {}).get(n, {})))
        for n in CANDIDATES
    )
    return (BootArm("off_A", control=True), *middle, BootArm("off_B", control=True))


def _plus(p: float) -> float:
    return math.log1p(p)


NULLS: dict[str, tuple[str, Callable[[int], BootScenario]]] = {
    "homoscedastic": ("every depth = off", lambda b: BootScenario("homoscedastic", sweep(), boots=b)),
    "missing-cell": (
        "k1 +10% at c=1 and c=4, -10% at c=8, its c=8 runs missing",
        lambda b: BootScenario(
            "missing-cell",
            sweep({"k1": (_plus(0.10), _plus(0.10), _plus(-0.10))}, {"k1": {"missing_cells": (2,)}}),
            cells=(C1, C4, C8),
            boots=b,
        ),
    ),
    "one-boot-candidates": (
        "controls n+n boots, candidates 1 boot with 4x boot variance",
        lambda b: BootScenario(
            "one-boot-candidates",
            sweep(settings={n: {"boots": 1, "sd_scale": 2.0} for n in CANDIDATES}),
            boots=b,
        ),
    ),
    "candidate-variance-x12": (
        "candidate boot variance x12",
        lambda b: BootScenario(
            "candidate-variance-x12",
            sweep(settings={n: {"sd_scale": math.sqrt(12)} for n in CANDIDATES}),
            boots=b,
        ),
    ),
    "null-at-one-cell": (
        "k1 null at c=1 only, k2 null at c=8 only (+15% elsewhere)",
        lambda b: BootScenario(
            "null-at-one-cell",
            sweep({"k1": (0.0, _plus(0.15), _plus(0.15)), "k2": (_plus(0.15), _plus(0.15), 0.0)}),
            cells=(C1, C4, C8),
            boots=b,
        ),
    ),
    "ends-slow": (
        "first and last boots of the campaign 4% slow",
        lambda b: BootScenario("ends-slow", sweep(), boots=b, ends_slow=math.log(0.96)),
    ),
    "ends-slow-spread": (
        "first and last boots 4% slow, control boots rotated through the campaign",
        lambda b: BootScenario(
            "ends-slow-spread", sweep(), boots=b, ends_slow=math.log(0.96), spread_controls=True
        ),
    ),
    "outlier-boot": (
        "one k3 boot +15%",
        lambda b: BootScenario("outlier-boot", sweep(), boots=b, outlier_arm="k3", outlier_shift=_plus(0.15)),
    ),
    "heavy-tailed": (
        "boot shifts Student t with 2 df (scale = boot sd)",
        lambda b: BootScenario("heavy-tailed", sweep(), boots=b, boot_tail_df=2.0),
    ),
    "missing-not-at-random": (
        "a candidate's slow (boot, cell) measurements kept half the time, others 90%",
        lambda b: BootScenario("missing-not-at-random", sweep(), boots=b, keep_slow=0.5, keep=0.9),
    ),
}


@dataclass(frozen=True, slots=True)
class Decided:
    """One batch decided: per-arm outcomes, per-cell outcomes, and whether the controls passed."""

    outcome: np.ndarray  # (B, A)
    cell_outcome: np.ndarray  # (B, A, C)
    controls_pass: np.ndarray  # (B,)
    shift: float


def decide_batch(batch: BootBatch, min_effect: float | None) -> Decided:
    tests, arrays = batch_procedure(
        batch.arm, batch.control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=min_effect
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a control boot with no cell left is NaN
        centred = batch.control - np.nanmean(batch.control, axis=2, keepdims=True)
        residuals = np.nanmean(centred, axis=1)
    fail = failing(fit_shapes(batch.control_order, residuals), math.log1p(MAX_DRIFT), ALPHA)
    shift = math.log1p(MARGIN if min_effect is None else min_effect)
    return Decided(arrays.outcome, arrays.cell_outcome, ~fail, shift)


def old_promotes(batch: BootBatch, i: int) -> bool:
    """Campaign i decided the way decide/evidence.py used stats/compare.py before the family procedure:
    one variance pooled over the controls and every arm booted twice or more, Holm per cell, an arm
    better at every cell it measured (missing cells not counted), and the old drift control (slope
    significant at alpha and beyond max_drift)."""
    better = np.ones(len(batch.candidates), dtype=bool)
    for j in range(batch.control.shape[1]):
        base = batch.control[i, j][~np.isnan(batch.control[i, j])]
        arms = [batch.arm[i, a, j][~np.isnan(batch.arm[i, a, j])] for a in range(len(batch.candidates))]
        present = [a for a, v in enumerate(arms) if v.size]
        if base.size == 0 or not present:
            continue
        variance = cmp.pooled_variance([("controls", base), *((str(a), arms[a]) for a in present)])
        raw = [
            cmp.compare_boots(
                arms[a], base, variance, alpha=ALPHA, family_size=len(present), equivalence_margin=MARGIN
            )
            for a in present
        ]
        for a, comp in zip(present, cmp.classify(raw, alpha=ALPHA), strict=True):
            better[a] &= comp.outcome == cmp.BETTER
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        residual = np.nanmean(batch.control[i] - np.nanmean(batch.control[i], axis=1, keepdims=True), axis=0)
    keep = ~np.isnan(residual)
    x, y = batch.control_order[keep], residual[keep]
    fit = sps.linregress(x, y)
    drift_fails = fit.pvalue < ALPHA and abs(fit.slope * np.ptp(x)) > math.log1p(MAX_DRIFT)
    return bool(better.any()) and not drift_fails


def _rate(count: int, total: int) -> str:
    low, high = proportion_confint(count, total, alpha=CONFIDENCE_ALPHA, method="beta")
    return f"{count / total:.3f} [{low:.3f}, {high:.3f}]"


def null_rows(boots: list[int], campaigns: int) -> list[str]:
    rows = [
        "| null scenario | boots | false promotions, margin mode | zero mode | old method | controls fail | "
        "arms inconclusive (margin) |",
        "|---|---|---|---|---|---|---|",
    ]
    for s, (name, (text, build)) in enumerate(NULLS.items()):
        for b in boots:
            batch = simulate_boots(build(b), np.random.default_rng([SEED, s, b]), campaigns)
            rates = []
            for min_effect in MODES.values():
                d = decide_batch(batch, min_effect)
                truly = (batch.truth > d.shift).all(axis=1)
                promoted = (d.outcome == BETTER) & d.controls_pass[:, None]
                rates.append(_rate(int((promoted & ~truly[None, :]).any(axis=1).sum()), campaigns))
            old = _rate(sum(old_promotes(batch, i) for i in range(campaigns)), campaigns)
            margin = decide_batch(batch, MODES["margin"])
            rows.append(
                f"| {name}: {text} | {b} | {rates[0]} | {rates[1]} | {old} | "
                f"{1 - margin.controls_pass.mean():.3f} | {(margin.outcome == INCONCLUSIVE).mean():.3f} |"
            )
    return rows


def power_rows(boots: list[int], campaigns: int) -> list[str]:
    rows = [
        "| design | boots | mode | floor | k2 true effect | power [95% CP] | without the control check |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in boots:
        for mode, min_effect in MODES.items():
            floor = welch_floor(
                BOOT_SD, b, DESIGN, ALPHA, min_effect=MARGIN if min_effect is None else min_effect
            )
            shift = math.log1p(MARGIN if min_effect is None else min_effect)
            for label, effect in (
                ("1x floor", floor),
                ("2x floor", 2 * floor),
                ("min_effect + 2x (t se)", 2 * floor - shift),
            ):
                if mode == "zero" and label.startswith("min_effect"):
                    continue
                sc = BootScenario("power", sweep({"k2": (effect, effect)}), boots=b)
                batch = simulate_boots(
                    sc, np.random.default_rng([SEED, 99, b, round(effect * 1e6)]), campaigns
                )
                d = decide_batch(batch, min_effect)
                hit = d.outcome[:, 1] == BETTER
                shown = f"{math.expm1(floor):+.1%} | {math.expm1(effect):+.1%}"
                rows.append(
                    f"| clean, k2 at {label} | {b} | {mode} | {shown} | "
                    f"{_rate(int((hit & d.controls_pass).sum()), campaigns)} | {hit.mean():.3f} |"
                )
    return rows


def crossover_rows(boots: list[int], campaigns: int) -> list[str]:
    cases = {
        "crossover: k2 +30% at c=1, -15% at c=8": ((_plus(0.30), _plus(-0.15)), (BETTER, WORSE)),
        "no crossover: k2 +30% at c=1 and c=8": ((_plus(0.30), _plus(0.30)), (BETTER, BETTER)),
        "no effect anywhere": ((0.0, 0.0), None),
    }
    rows = [
        "| scenario | boots | recovered [95% CP] | a false per-cell claim [95% CP] |",
        "|---|---|---|---|",
    ]
    for c, (name, (truth, wanted)) in enumerate(cases.items()):
        for b in boots:
            sc = BootScenario("crossover", sweep({"k2": truth}), cells=(C1, C8), boots=b)
            batch = simulate_boots(sc, np.random.default_rng([SEED, 50 + c, b]), campaigns)
            d = decide_batch(batch, None)
            cells = d.cell_outcome
            claims = (cells == BETTER) | (cells == WORSE)
            true_better = batch.truth[None] > d.shift
            true_worse = batch.truth[None] < 0
            wrong = claims & ~(((cells == BETTER) & true_better) | ((cells == WORSE) & true_worse))
            false = int((wrong.any(axis=(1, 2)) & d.controls_pass).sum())
            recovered = "-"
            if wanted is not None:
                hit = (cells[:, 1, 0] == wanted[0]) & (cells[:, 1, 1] == wanted[1]) & d.controls_pass
                recovered = _rate(int(hit.sum()), campaigns)
            rows.append(f"| {name} | {b} | {recovered} | {_rate(false, campaigns)} |")
    return rows


def settle_rows(boots: list[int], campaigns: int) -> list[str]:
    rows = ["| null, boots per arm | every arm settled, controls pass | an arm settled |", "|---|---|---|"]
    for b in boots:
        batch = simulate_boots(
            BootScenario("settle", sweep(), boots=b), np.random.default_rng([SEED, 77, b]), campaigns
        )
        d = decide_batch(batch, None)
        settled = (d.outcome != INCONCLUSIVE).all(axis=1) & d.controls_pass
        rows.append(
            f"| {b} | {_rate(int(settled.sum()), campaigns)} | {(d.outcome != INCONCLUSIVE).mean():.3f} |"
        )
    return rows


def acceptance_rows(campaigns: int) -> list[str]:
    """Coverage of nominal 90% intervals of the acceptance rate (and last position) on chained drafts."""
    alpha = 0.10
    rows = [
        "| chain (k=3, q=0.9, 16 requests x 40 rounds) | Wilson on tokens (today) | clustered by request | "
        "by window (4 requests) | by draft round | last position, by request |",
        "|---|---|---|---|---|---|",
    ]
    for label, concentration in (
        ("no per-request variation", None),
        ("per-request q ~ Beta, concentration 100", 100.0),
        ("concentration 30", 30.0),
    ):
        model = ChainModel(concentration=concentration)
        truth, positions = model.truth()
        pos = simulate_chain(model, np.random.default_rng([SEED, 7, int(concentration or 0)]), campaigns)
        accepted = pos.sum(axis=-1).astype(float)
        drafted = np.full(accepted.shape, float(model.rounds * model.k))

        def cover(low: np.ndarray, high: np.ndarray, t: float = truth) -> str:
            return f"{((low <= t) & (t <= high)).mean():.3f}"

        wl, wh = proportion_confint(accepted.sum(1), drafted.sum(1), alpha=alpha, method="wilson")
        _, rl, rh, _, _ = ratio_interval(accepted, drafted, alpha)
        shape = (campaigns, -1, model.requests_per_window)
        _, gl, gh, _, _ = ratio_interval(
            accepted.reshape(shape).sum(-1), drafted.reshape(shape).sum(-1), alpha
        )
        lengths = _round_lengths(pos.sum(axis=1), model)
        _, ol, oh, _, _ = ratio_interval(lengths, np.full(lengths.shape, float(model.k)), alpha)
        _, ll, lh, _, _ = ratio_interval(
            pos[..., -1].astype(float), np.full(accepted.shape, float(model.rounds)), alpha
        )
        rows.append(
            f"| {label} | {cover(wl, wh)} | {cover(rl, rh)} | {cover(gl, gh)} | {cover(ol, oh)} | "
            f"{cover(ll, lh, positions[-1])} |"
        )
    return rows


def _round_lengths(pooled: np.ndarray, model: ChainModel) -> np.ndarray:
    """Accepted length of every round, rebuilt from pooled per-position counts (B, k)."""
    drafts = model.requests * model.rounds
    reach = np.concatenate(
        [np.full((pooled.shape[0], 1), drafts), pooled, np.zeros((pooled.shape[0], 1))], axis=1
    )
    hist = (reach[:, :-1] - reach[:, 1:]).astype(int)
    return np.stack([np.repeat(np.arange(model.k + 1, dtype=float), h) for h in hist])


def run(boots: list[int], campaigns: int) -> str:
    """Every table, as markdown."""
    parts = [
        f"Boot-level sd {BOOT_SD:.4f} (log): boot sd 0.02 and one counted run of one stream (0.0112).",
        "",
        "False promotions under the null (a promotion = an arm called better while the controls pass):",
        "",
        *null_rows(boots, campaigns),
        "",
        "Power on the clean design (k1 and k3 null):",
        "",
        *power_rows(boots, campaigns),
        "",
        "Per-cell outcomes (regime map, Holm across every arm x cell), margin mode:",
        "",
        *crossover_rows(boots, campaigns),
        "",
        "Null campaigns settled by a fixed number of boots (margin mode):",
        "",
        *settle_rows([*boots, 8, 10], campaigns),
        "",
        "Acceptance intervals, coverage at nominal 90%:",
        "",
        *acceptance_rows(campaigns),
    ]
    return "\n".join(parts)
