"""The nuisance matrix: every design the tool can collect crossed with the nuisances that fooled it.

`python bench/calibration.py --nuisances` runs the full matrix; tests/sim/test_nuisance_matrix.py runs
a small one with fixed seeds and fails when any cell's Clopper-Pearson lower bound on false
promotions exceeds 5%. Every depth is null (truth 0; the default policy's margin mode, where min_effect
is the ±3% margin, and min_effect = 0), so any promotion is false. Decided as `decide` decides:

- `one device` (3 rounds, the arms' order each round; `one device drawn`: each round's order drawn
  per campaign as collect draws it, controls included): stats.procedure.batch_procedure with the control
  check (stats.drift: slope and curvature at alpha / 2, or beyond max_drift), control boots recorded
  twice refused (evidence/controls.py's duplicates: off_B identical to off_A run for run);
- `devices` (8 devices x 1 round, every round's order drawn, controls included), `devices x rounds`
  (4 x 2, drawn) and `fixed order` (4 x 2, off_A first and off_B last on every round: records written
  before collect drew the order): stats.blocked with each arm compared with the controls' drift line
  (slope and ends against middle) at its own positions, the position check and the confounded-layout
  refusal (stats/positions.py);
- `history` (one device, 1-boot candidates, off_A and off_B booted 3 times each, an accurate archive
  pooled into the controls' variance, not lent to candidates: the default);
- `looks` (collect --until-resolved for 5 rounds, a look before each round from the second, each at
  alpha / 5: stats/looks.py);
- `schedule` (`[selection] mode = "schedule"`: one device, 3 rounds in the arms' order, one workload at
  concurrency 1, 2, 4 and 8): the depth the engine's schedule runs at each measured concurrency
  (scheduled_depths: decide/schedule.py's fixed_default, choose_among and _around_default, else
  decide/regime.py's choices), with the one-device controls (drift, duplicates). Under the null a
  schedule that runs any depth at any concurrency is a false promotion. The engine's schedule compares
  at the equivalence margin whatever a faster_than_off rule's min_effect says (that rule is exempt
  in schedule mode), and a policy in schedule mode may not set a margin below
  formats/policy.py's SCHEDULE_MIN_MARGIN (1%), so its second mode is `floor`, that margin, not
  `zero` (at a margin of 0 a schedule promoted falsely 7.7% with cells missing not at random, 5.6%
  with candidates 2x noisier, which is why the policy refuses it).

Nuisances (simulate.BootScenario): device levels 5x the boot noise, first and last boot 5% slow,
first boot 5% slow, linear drift 5%, hump 5% (middle boots fast) and its reverse (middle boots 5%
slow), candidates 2x noisier, heavy tails (t with 3 df), AR(1) boot state (rho 0.7), a cell missing
not at random (slow candidate runs lost half the time), off_B's records duplicated from off_A's.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
from procedure_calibration import ALPHA, BETTER, MARGIN, MAX_DRIFT, sweep
from statsmodels.stats.proportion import proportion_confint

from mtpverdict.evidence.controls import DUPLICATE_RTOL
from mtpverdict.formats.policy import SCHEDULE_MIN_MARGIN
from mtpverdict.sim import BootBatch, BootScenario, simulate_boots
from mtpverdict.stats.blocked import blocked_batch
from mtpverdict.stats.drift import failing, fit_shapes
from mtpverdict.stats.looks import look_alpha
from mtpverdict.stats.positions import device_position, position_failing
from mtpverdict.stats.procedure import batch_procedure
from mtpverdict.stats.welch import Method

SEED = 20261227
DEVICE_SD = 5 * 0.02  # device levels 5x the boot noise
NOISY: dict[str, dict[str, object]] = {n: {"sd_scale": 2.0} for n in ("k1", "k2", "k3")}
NUISANCES: dict[str, dict[str, object]] = {
    "none": {},
    "device levels": {"device_sd": DEVICE_SD},
    "slow ends 5%": {"ends_slow": -0.05},
    "slow first boot 5%": {"first_slow": -0.05},
    "linear drift 5%": {"drift_total": 0.05},
    "hump 5%": {"hump_total": 0.05},
    "middle slow 5%": {"hump_total": -0.05},  # the hump the other way: a fixed order's middle controls slow
    "heavy tails (t3)": {"boot_tail_df": 3.0},
    "AR(1) 0.7": {"ar1": 0.7},
    "missing not at random": {"keep_slow": 0.5},
}
LOOK_ROUNDS = 5
SCHEDULE_CELLS = tuple(("chat", c) for c in (1, 2, 4, 8))  # bench/schedule_calibration.py's design
CONFIDENCE_ALPHA = 0.05  # two-sided 95% Clopper-Pearson


@dataclass(frozen=True, slots=True)
class Cell:
    design: str
    nuisance: str
    mode: str
    false: int
    campaigns: int

    @property
    def bounds(self) -> tuple[float, float]:
        low, high = proportion_confint(self.false, self.campaigns, alpha=CONFIDENCE_ALPHA, method="beta")
        return float(low), float(high)


def _residuals(control: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a control boot with no cell left is NaN
        return np.asarray(np.nanmean(control - np.nanmean(control, axis=2, keepdims=True), axis=1))


def _duplicated(control: np.ndarray, boots: int) -> np.ndarray:
    """Campaigns whose off_B boots equal off_A's run for run (the duplicates control)."""
    a, b = control[..., :boots], control[..., boots : 2 * boots]
    return np.asarray(np.isclose(a, b, rtol=DUPLICATE_RTOL, atol=0.0).all(axis=(1, 2)))


def _one_device(batch: BootBatch, boots: int, min_effect: float | None) -> np.ndarray:
    _, arrays = batch_procedure(
        batch.arm, batch.control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=min_effect
    )
    return np.asarray((arrays.outcome == BETTER).any(axis=1) & ~_controls_fail(batch, boots))


def promoted_by_arm(batch: BootBatch, min_effect: float | None, line: bool = True) -> np.ndarray:
    """(B, A) arms called better while the position check passes; `line` compares against the
    controls' within-device drift line (as decide does), else against their plain mean."""
    arm, control = batch.blocked()
    _, arrays = blocked_batch(
        arm,
        control,
        alpha=ALPHA,
        equivalence_margin=MARGIN,
        min_effect=min_effect,
        positions=batch.positions() if line else None,
    )
    found = device_position(
        batch.control_order, np.asarray(batch.control_device), batch.control_end, _residuals(batch.control)
    )
    ends = np.broadcast_to(batch.control_end, found.drift.shape + (batch.control.shape[-1],))
    passed = ~position_failing(found, ALPHA) & ~ends.all(axis=1)
    return np.asarray((arrays.outcome == BETTER) & passed[:, None])


def _devices(batch: BootBatch, min_effect: float | None) -> np.ndarray:
    return np.asarray(promoted_by_arm(batch, min_effect).any(axis=1))


def _history(batch: BootBatch, min_effect: float | None, s2: float) -> np.ndarray:
    cells = batch.control.shape[1]
    _, arrays = batch_procedure(
        batch.arm,
        batch.control,
        alpha=ALPHA,
        equivalence_margin=MARGIN,
        min_effect=min_effect,
        hist_s2=np.full(cells, s2),
        hist_df=np.full(cells, 20.0),
    )
    return np.asarray((arrays.outcome == BETTER).any(axis=1))


def _looks(batch: BootBatch, boots: int, min_effect: float | None) -> np.ndarray:
    promoted = np.zeros(batch.arm.shape[0], dtype=bool)
    spent: list[float] = []
    for r in range(2, boots + 1):
        a = look_alpha(ALPHA, boots, spent)
        spent.append(a)
        control = np.concatenate([batch.control[..., :r], batch.control[..., boots : boots + r]], axis=-1)
        _, arrays = batch_procedure(
            batch.arm[..., :r], control, alpha=a, equivalence_margin=MARGIN, min_effect=min_effect
        )
        promoted |= (arrays.outcome == BETTER).any(axis=1)
    return promoted


def _controls_fail(batch: BootBatch, boots: int) -> np.ndarray:
    """One device's blockers: the drift control failing, or off_B's boots duplicating off_A's."""
    fail = failing(fit_shapes(batch.control_order, _residuals(batch.control)), math.log1p(MAX_DRIFT), ALPHA)
    return np.asarray(fail | _duplicated(batch.control, boots))


Versus = tuple[int, tuple[int, ...], tuple[int, ...], float]  # base, challengers, cells, alpha


def _strongest(
    arm: np.ndarray,
    asked: list[Versus | None],
    otherwise: np.ndarray,
    min_effect: float | None,
    margin: float = MARGIN,
) -> np.ndarray:
    """Per campaign, the challenger resolved better than its base over the cells with the largest mean
    estimate (decide/regime.py's versus and strongest_better: the family procedure with the base in the
    controls' place), else `otherwise`; campaigns sharing a question are decided in one batch."""
    out = otherwise.copy()
    rows: dict[Versus, list[int]] = {}
    for i, key in enumerate(asked):
        if key is not None:
            rows.setdefault(key, []).append(i)
    for (base, challengers, cells, alpha), found in rows.items():
        at = np.asarray(found)
        sub = arm[at][:, :, list(cells)]
        tests, arrays = batch_procedure(
            sub[:, list(challengers)],
            sub[:, base],
            alpha=alpha,
            equivalence_margin=margin,
            min_effect=min_effect,
        )
        estimate = np.where(tests.method == Method.MISSING, np.nan, tests.estimate)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a challenger that measured no cell
            mean = np.nanmean(estimate, axis=-1)
        won = np.where((arrays.outcome == BETTER) & np.isfinite(mean), mean, -np.inf)
        hit = np.isfinite(won.max(axis=1))
        out[at[hit]] = np.asarray(challengers)[np.argmax(won, axis=1)[hit]]
    return out


def _around_default(
    batch: BootBatch, better: np.ndarray, min_effect: float | None, margin: float = MARGIN
) -> np.ndarray:
    """(B, C) arm per measured concurrency where some depth is better than off over every cell
    (decide/schedule.py: fixed_default's choose_among, then _around_default at alpha / concurrencies)."""
    arms, cells = batch.arm.shape[1], batch.arm.shape[2]
    lowest = np.argmax(better, axis=1)
    asked: list[Versus | None] = [
        (int(low), tuple(int(a) for a in np.flatnonzero(row)[1:]), tuple(range(cells)), ALPHA)
        if row.sum() > 1
        else None
        for low, row in zip(lowest, better, strict=True)
    ]
    default = _strongest(batch.arm, asked, lowest, min_effect, margin)
    picks = []
    for c in range(cells):
        near: list[Versus | None] = [
            (int(d), tuple(a for a in range(arms) if a != d), (c,), ALPHA / cells) for d in default
        ]
        picks.append(_strongest(batch.arm, near, default, min_effect, margin))
    return np.stack(picks, axis=1)


def _choices(
    batch: BootBatch, supported: np.ndarray, min_effect: float | None, margin: float = MARGIN
) -> np.ndarray:
    """(B, C) arm per measured concurrency, -1 for off, where no depth is better over every cell
    (decide/regime.py's choices: the smallest supported depth unless a deeper one is better than it
    there, at alpha / the concurrencies needing that step)."""
    needing = np.maximum((supported.sum(axis=1) > 1).sum(axis=1), 1)
    picks = []
    for c in range(supported.shape[2]):
        here = supported[:, :, c]
        lowest = np.where(here.any(axis=1), np.argmax(here, axis=1), -1)
        asked: list[Versus | None] = [
            (int(low), tuple(int(a) for a in np.flatnonzero(row)[1:]), (c,), ALPHA / int(m))
            if row.sum() > 1
            else None
            for low, row, m in zip(lowest, here, needing, strict=True)
        ]
        picks.append(_strongest(batch.arm, asked, lowest, min_effect, margin))
    return np.stack(picks, axis=1)


def scheduled_depths(
    batch: BootBatch, boots: int, min_effect: float | None, margin: float = MARGIN
) -> np.ndarray:
    """(B, C) depth the engine's schedule runs at each measured concurrency (0: off), one workload and
    one device, candidates k1, k2, k3 in depth order; 0 everywhere where a control blocks the decision
    (decide/engine.py: drift and duplicates make the campaign inconclusive)."""
    _, arrays = batch_procedure(
        batch.arm, batch.control, alpha=ALPHA, equivalence_margin=margin, min_effect=min_effect
    )
    better = arrays.outcome == BETTER
    arm = np.full(better.shape[:1] + (batch.arm.shape[2],), -1)
    some = better.any(axis=1)
    if some.any():
        arm[some] = _around_default(_rows(batch, some), better[some], min_effect, margin)
    if (~some).any():
        arm[~some] = _choices(_rows(batch, ~some), arrays.cell_outcome[~some] == BETTER, min_effect, margin)
    depth = arm + 1  # k1, k2, k3 are the candidates in depth order; -1 (off) is depth 0
    return np.where(_controls_fail(batch, boots)[:, None], 0, depth)


def _rows(batch: BootBatch, keep: np.ndarray) -> BootBatch:
    return replace(batch, arm=batch.arm[keep], control=batch.control[keep])


def _schedule(batch: BootBatch, boots: int, mode: str) -> np.ndarray:
    """Campaigns whose schedule runs a depth somewhere: at the default margin, or (`floor`) with the
    policy's margin at the smallest schedule mode accepts, as such a policy decides."""
    margin = SCHEDULE_MIN_MARGIN if mode == "floor" else MARGIN
    return np.asarray((scheduled_depths(batch, boots, None, margin) > 0).any(axis=1))


def _duplicate(batch: BootBatch, boots: int) -> BootBatch:
    control = batch.control.copy()
    control[..., boots : 2 * boots] = control[..., :boots]
    return replace(batch, control=control)


def _scenario(
    settings: dict[str, object],
    boots: int,
    devices: int = 1,
    arms: dict[str, dict[str, object]] | None = None,
) -> BootScenario:
    sc = BootScenario("nuisance", sweep(None, arms), boots=boots, devices=devices)
    return replace(sc, **settings)  # type: ignore[arg-type]


MODE_EFFECT = {"margin": None, "zero": 0.0, "floor": None}  # floor: a schedule's, at the margin (_schedule)


def cell(design: str, nuisance: str, mode: str, campaigns: int) -> Cell:
    """False promotions of one (design, nuisance, mode) over `campaigns` fixed-seed campaigns."""
    min_effect = MODE_EFFECT[mode]
    settings = dict(NUISANCES.get(nuisance, {}))
    arms = NOISY if nuisance == "noisy candidates 2x" else None
    words = [SEED, DESIGNS.index(design), ALL_NUISANCES.index(nuisance), int(mode != "margin")]
    rng = np.random.default_rng(words)
    if design in BLOCKED:
        devices, rounds, drawn = BLOCKED[design]
        settings = {"device_sd": 0.0, **settings, "drawn": drawn}
        batch = simulate_boots(_scenario(settings, rounds, devices=devices, arms=arms), rng, campaigns)
        hits = _devices(batch, min_effect)
    elif design == "history":
        history_arms = {n: {**(arms or {}).get(n, {}), "boots": 1} for n in ("k1", "k2", "k3")}
        batch = simulate_boots(_scenario(settings, 3, arms=history_arms), rng, campaigns)
        boot = BootScenario("sd", ())
        hits = _history(batch, min_effect, boot.boot_sd**2 + boot.cell_sd**2)
    elif design == "schedule":
        laid = simulate_boots(
            replace(_scenario(settings, 3, arms=arms), cells=SCHEDULE_CELLS), rng, campaigns
        )
        hits = _schedule(_duplicate(laid, 3) if nuisance == "duplicated off_B" else laid, 3, mode)
    elif design == "looks":
        batch = simulate_boots(_scenario(settings, LOOK_ROUNDS, arms=arms), rng, campaigns)
        hits = _looks(batch, LOOK_ROUNDS, min_effect)
    elif design == "one device drawn":
        laid = simulate_boots(
            replace(_scenario(settings, 3, arms=arms), draw_one_device=True), rng, campaigns
        )
        if nuisance == "duplicated off_B":
            laid = _duplicate(laid, 3)
        hits = _one_device(laid, 3, min_effect)
    else:
        batch = simulate_boots(_scenario(settings, 3, arms=arms), rng, campaigns)
        if nuisance == "duplicated off_B":
            batch = _duplicate(batch, 3)
        hits = _one_device(batch, 3, min_effect)
    return Cell(design, nuisance, mode, int(hits.sum()), campaigns)


# blocked designs: (devices, rounds per device, order drawn); "fixed order" is records laid out off_A
# first and off_B last on every round (written before collect drew the order), which decide still reads
BLOCKED = {"devices": (8, 1, True), "devices x rounds": (4, 2, True), "fixed order": (4, 2, False)}
# appended last: a design's index seeds its cells, so the earlier designs keep their draws
DESIGNS = (
    "one device",
    "devices",
    "devices x rounds",
    "fixed order",
    "history",
    "looks",
    "one device drawn",
    "schedule",
)
ONE_DEVICE = ("one device", "one device drawn", "schedule")  # off_B's records can duplicate off_A's
ALL_NUISANCES = (*NUISANCES, "noisy candidates 2x", "duplicated off_B")


def matrix(campaigns: int, modes: tuple[str, ...] = ("margin", "zero")) -> list[Cell]:
    """Every design crossed with every nuisance it can meet (duplicates: one device, schedules too)."""
    out: list[Cell] = []
    for design in DESIGNS:
        for nuisance in ALL_NUISANCES:
            if nuisance == "duplicated off_B" and design not in ONE_DEVICE:
                continue
            if nuisance == "device levels" and design not in BLOCKED:
                continue
            # a schedule's margin cannot go below the policy's floor: its second mode is that floor
            mine = tuple("floor" if design == "schedule" and m == "zero" else m for m in modes)
            out.extend(cell(design, nuisance, mode, campaigns) for mode in mine)
    return out


def run(campaigns: int) -> str:
    rows = [
        "| design | nuisance | mode | false promotions | 95% CP |",
        "|---|---|---|---|---|",
    ]
    for c in matrix(campaigns):
        low, high = c.bounds
        rate = c.false / c.campaigns
        rows.append(f"| {c.design} | {c.nuisance} | {c.mode} | {rate:.3f} | [{low:.3f}, {high:.3f}] |")
    return "\n".join([f"Every depth null; {campaigns} campaigns per cell.", "", *rows])
