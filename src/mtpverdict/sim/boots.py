"""Boot-level campaigns for the procedure-level calibration: per-boot log statistics, vectorised."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class BootArm:
    """One arm of a boot-level scenario: its true log effect per design cell and its boot noise."""

    name: str
    control: bool = False
    effects: tuple[float, ...] = ()  # true log effect at each design cell; empty = 0 everywhere
    sd_scale: float = 1.0  # multiplies the boot-to-boot sd (variance x12 is sqrt(12))
    boots: int | None = None  # None: the scenario's boots per arm
    missing_cells: tuple[int, ...] = ()  # design cells this arm never measures (indices)


@dataclass(frozen=True, slots=True)
class BootScenario:
    """A design (arms in round order, cells, boots) and the truth behind its per-boot statistics.

    A boot's log statistic in a cell = the arm's effect there + the boot's shift (sd boot_sd x the
    arm's sd_scale, shared by the boot's cells; Student t with boot_tail_df when set) + cell noise
    (sd cell_sd: the runs of that boot and cell) + drift and slow-ends terms by boot position.
    """

    name: str
    arms: tuple[BootArm, ...]
    cells: tuple[tuple[str, int], ...] = (("chat", 1), ("chat", 4))
    boots: int = 3
    boot_sd: float = 0.02  # the simulator's default (Scenario.boot_sd)
    cell_sd: float = math.sqrt(0.01**2 + 0.005**2)  # one counted run of one stream (Scenario run/request sd)
    boot_tail_df: float | None = None
    drift_total: float = 0.0  # log drift from the first boot to the last
    ends_slow: float = 0.0  # log shift of the campaign's first and last boots
    first_slow: float = 0.0  # log shift of the first boot only (warm-up)
    hump_total: float = 0.0  # log shift of the middle boots against the ends: hump x 4u(1 - u), u in [0, 1]
    ar1: float = 0.0  # AR(1) coefficient of a state drifting through boot order (marginal sd boot_sd)
    outlier_arm: str | None = None  # one boot of this arm (drawn at random) is shifted
    outlier_shift: float = 0.0
    keep_slow: float = 1.0  # probability a candidate's measurement slower than its truth is kept
    keep: float = 1.0  # probability any other measurement is kept
    spread_controls: bool = False  # rotate each round, so control boots sit through the campaign
    description: str = ""
    devices: int = 1  # > 1: every device runs every arm `boots` rounds (a blocked campaign)
    device_sd: float = 0.0  # sd of a device's level, shared by every arm, boot and cell on it
    # devices > 1: True draws every round's order on every device, controls included (collect's
    # layout, stats/layout.py), afresh for each campaign; False keeps the arms' order (off_A first,
    # off_B last: the layout that confounds the controls with the ends of a device)
    drawn: bool = True
    # drawn with a layout_seed: the one layout collect draws from that order_seed (stats/layout.py),
    # the same for every campaign (the measurements vary, the layout does not)
    layout_seed: int | None = None
    # one device, its rounds' order drawn as collect draws it (controls included): laid out by the
    # devices code with one device, so control_order is (B, Nc)
    draw_one_device: bool = False

    def arm_boots(self, arm: BootArm) -> int:
        return self.boots if arm.boots is None else arm.boots


@dataclass(frozen=True, slots=True)
class BootBatch:
    """Per-boot log statistics of many campaigns, shaped for stats.procedure.batch_procedure."""

    arm: Any  # (B, A, C, Na) float array, NaN = not measured
    control: Any  # (B, C, Nc)
    control_order: Any  # (Nc,) boot positions of the control slots; (B, Nc) when drawn per campaign
    candidates: tuple[str, ...]
    truth: Any  # (A, C) true log effects of the candidates
    devices: int = 1
    arm_blocked: Any = None  # (B, A, C, D, Na / D): the same boots by device (None: one device)
    control_blocked: Any = None  # (B, C, D, Nc / D)
    control_device: Any = None  # (Nc,) device index of each control slot; control_order is per device
    control_end: Any = None  # (Nc,) or (B, Nc): the slot is the first or last boot of its device
    arm_position: Any = None  # (B, A, D, Na / D): each arm boot's position on its device (devices only)

    def blocked(self) -> tuple[Any, Any]:
        """arm (B, A, C, D, n) and control (B, C, D, m) for stats.blocked.blocked_batch."""
        if self.arm_blocked is None:
            return self.arm[:, :, :, None, :], self.control[:, :, None, :]
        return self.arm_blocked, self.control_blocked

    def positions(self) -> tuple[Any, Any]:
        """arm (B, A, D, n) and control (B, D, m) positions on their device, for blocked_batch."""
        import numpy as np

        control = np.asarray(self.control_order).reshape(self.control.shape[0], self.devices, -1)
        return self.arm_position, control


def _position_terms(scenario: BootScenario, pos: Any, last: float, state: Any) -> Any:
    """Drift, slow ends, slow first boot, hump and the AR(1) state at boot positions (from 1)."""
    import numpy as np

    u = (pos - 1) / max(last - 1, 1)
    terms = scenario.drift_total * u + np.where((pos == 1) | (pos == last), scenario.ends_slow, 0.0)
    terms = terms + np.where(pos == 1, scenario.first_slow, 0.0) + scenario.hump_total * 4 * u * (1 - u)
    if state is not None:
        terms = terms + np.take_along_axis(state, np.asarray(pos - 1).astype(int), axis=-1)
    return terms


def _ar1_state(scenario: BootScenario, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    """An AR(1) series over boot positions, (..., last), marginal sd boot_sd; None without ar1."""
    import numpy as np

    if not scenario.ar1:
        return None
    rho = scenario.ar1
    e = rng.normal(0.0, scenario.boot_sd * math.sqrt(1 - rho**2), shape)
    out = np.empty(shape)
    out[..., 0] = rng.normal(0.0, scenario.boot_sd, shape[:-1])
    for t in range(1, shape[-1]):
        out[..., t] = rho * out[..., t - 1] + e[..., t]
    return out


def boot_orders(scenario: BootScenario) -> dict[tuple[str, int], int]:
    """(arm, boot) -> position in boot order: round-robin, rotated each round when spread_controls."""
    rounds = max(scenario.arm_boots(a) for a in scenario.arms)
    order: dict[tuple[str, int], int] = {}
    arms = list(scenario.arms)
    for r in range(rounds):
        shift = r % len(arms) if scenario.spread_controls else 0
        for arm in arms[shift:] + arms[:shift]:
            if r < scenario.arm_boots(arm):
                order[(arm.name, r + 1)] = len(order) + 1
    return order


def simulate_boots(scenario: BootScenario, rng: np.random.Generator, campaigns: int) -> BootBatch:
    """Draw `campaigns` campaigns of per-boot log statistics at once."""
    import numpy as np

    if scenario.devices > 1 or (scenario.draw_one_device and scenario.drawn):
        return _simulate_devices(scenario, rng, campaigns)
    orders = boot_orders(scenario)
    last = max(orders.values())
    cells = len(scenario.cells)
    slots = {a.name: scenario.arm_boots(a) for a in scenario.arms}
    state = _ar1_state(scenario, rng, (campaigns, last))
    values: dict[str, Any] = {}
    for arm in scenario.arms:
        n = slots[arm.name]
        if scenario.boot_tail_df is None:
            shift = rng.normal(0.0, 1.0, (campaigns, n))
        else:
            shift = rng.standard_t(scenario.boot_tail_df, (campaigns, n))
        shift = shift * scenario.boot_sd * arm.sd_scale
        pos = np.array([orders[(arm.name, b + 1)] for b in range(n)], dtype=float)
        trend = _position_terms(scenario, np.broadcast_to(pos, (campaigns, n)), last, state)
        effects = np.asarray(arm.effects if arm.effects else (0.0,) * cells, dtype=float)
        noise = rng.normal(0.0, scenario.cell_sd, (campaigns, n, cells))
        deviation = shift[:, :, None] + noise
        if scenario.outlier_arm == arm.name:
            hit = rng.integers(0, n, campaigns)
            deviation[np.arange(campaigns), hit, :] += scenario.outlier_shift
        value = effects[None, None, :] + deviation + trend[:, :, None]
        keep = np.where((deviation < 0) & (not arm.control), scenario.keep_slow, scenario.keep)
        value = np.where(rng.random(value.shape) < keep, value, np.nan)
        value[:, :, list(arm.missing_cells)] = np.nan
        values[arm.name] = np.transpose(value, (0, 2, 1))  # (B, C, n)
    controls = [a for a in scenario.arms if a.control]
    candidates = [a for a in scenario.arms if not a.control]
    width = max(slots[a.name] for a in candidates)
    stacked = np.full((campaigns, len(candidates), cells, width), np.nan)
    for i, a in enumerate(candidates):
        stacked[:, i, :, : slots[a.name]] = values[a.name]
    control = np.concatenate([values[a.name] for a in controls], axis=2)
    control_order = np.array(
        [orders[(a.name, b + 1)] for a in controls for b in range(slots[a.name])], dtype=float
    )
    truth = np.array([a.effects if a.effects else (0.0,) * cells for a in candidates], dtype=float)
    ends = (control_order == 1) | (control_order == last)
    return BootBatch(
        stacked, control, control_order, tuple(a.name for a in candidates), truth, control_end=ends
    )


def device_positions(scenario: BootScenario, rng: np.random.Generator, campaigns: int) -> dict[str, Any]:
    """arm -> (B, D, n) position of each of its boots on its device, from 1.

    Drawn per campaign, device and round (every arm, controls included, in a uniform permutation) when
    scenario.drawn, else the arms' order on every device.
    """
    import numpy as np

    arms, devices = scenario.arms, scenario.devices
    rounds = max(scenario.arm_boots(a) for a in arms)
    if scenario.drawn and scenario.layout_seed is not None:
        rank = np.broadcast_to(_fixed_ranks(scenario, rounds), (campaigns, devices, rounds, len(arms)))
    elif scenario.drawn:
        rank = np.argsort(np.argsort(rng.random((campaigns, devices, rounds, len(arms))), axis=-1), axis=-1)
    else:
        rank = np.broadcast_to(np.arange(len(arms)), (campaigns, devices, rounds, len(arms)))
    start = (np.arange(rounds) * len(arms))[None, None, :, None]
    pos = (rank + start + 1).astype(float)
    return {a.name: pos[:, :, : scenario.arm_boots(a), i] for i, a in enumerate(arms)}


def _fixed_ranks(scenario: BootScenario, rounds: int) -> Any:
    """(D, R, A) place of each arm in its round, as collect lays it out from layout_seed."""
    import numpy as np

    from mtpverdict.stats.layout import round_order

    names = [a.name for a in scenario.arms]
    out = np.zeros((scenario.devices, rounds, len(names)), dtype=int)
    for d in range(scenario.devices):
        for r in range(rounds):
            order = round_order(names, seed=scenario.layout_seed, device=d, round_=r + 1)
            out[d, r] = [order.index(n) for n in names]
    return out


def _simulate_devices(scenario: BootScenario, rng: np.random.Generator, campaigns: int) -> BootBatch:
    """A blocked campaign: each device runs every arm each round; its level is added to all its boots.

    Positions (drift, slow ends, control_order) are positions on the boot's own device, laid out as
    collect lays them out (device_positions). The flat arrays (arm, control) hold the same boots
    device-major, for the analysis that ignores devices.
    """
    import numpy as np

    devices, cells = scenario.devices, len(scenario.cells)
    where = device_positions(scenario, rng, campaigns)
    last = float(len(scenario.arms) * max(scenario.arm_boots(a) for a in scenario.arms))
    level = rng.normal(0.0, scenario.device_sd, (campaigns, devices))
    state = _ar1_state(scenario, rng, (campaigns, devices, int(last)))
    values: dict[str, Any] = {}
    for arm in scenario.arms:
        n = scenario.arm_boots(arm)
        size = (campaigns, devices, n)
        tail = scenario.boot_tail_df
        shift = (rng.normal(0.0, 1.0, size) if tail is None else rng.standard_t(tail, size)) * (
            scenario.boot_sd * arm.sd_scale
        )
        pos = where[arm.name]  # (B, D, n)
        trend = _position_terms(scenario, pos, last, state)
        effects = np.asarray(arm.effects if arm.effects else (0.0,) * cells, dtype=float)
        deviation = shift[..., None] + rng.normal(0.0, scenario.cell_sd, (campaigns, devices, n, cells))
        if scenario.outlier_arm == arm.name:
            hit = rng.integers(0, devices * n, campaigns)
            deviation.reshape(campaigns, devices * n, cells)[np.arange(campaigns), hit, :] += (
                scenario.outlier_shift
            )
        value = effects + deviation + trend[..., None] + level[:, :, None, None]
        keep = np.where((deviation < 0) & (not arm.control), scenario.keep_slow, scenario.keep)
        value = np.where(rng.random(value.shape) < keep, value, np.nan)
        value[..., list(arm.missing_cells)] = np.nan
        values[arm.name] = np.transpose(value, (0, 3, 1, 2))  # (B, C, D, n)
    controls = [a for a in scenario.arms if a.control]
    candidates = [a for a in scenario.arms if not a.control]
    width = max(scenario.arm_boots(a) for a in candidates)
    blocked = np.full((campaigns, len(candidates), cells, devices, width), np.nan)
    for i, a in enumerate(candidates):
        blocked[:, i, :, :, : scenario.arm_boots(a)] = values[a.name]
    control = np.concatenate([values[a.name] for a in controls], axis=3)  # (B, C, D, m)
    positions = np.concatenate([where[a.name] for a in controls], axis=2)  # (B, D, m)
    truth = np.array([a.effects if a.effects else (0.0,) * cells for a in candidates], dtype=float)
    arm_position = np.full((campaigns, len(candidates), devices, width), np.nan)
    for i, a in enumerate(candidates):
        arm_position[:, i, :, : scenario.arm_boots(a)] = where[a.name]
    return BootBatch(
        arm_position=arm_position,
        arm=blocked.reshape(campaigns, len(candidates), cells, devices * width),
        control=control.reshape(campaigns, cells, -1),
        control_order=positions.reshape(campaigns, -1),
        candidates=tuple(a.name for a in candidates),
        truth=truth,
        devices=devices,
        arm_blocked=blocked,
        control_blocked=control,
        control_device=np.repeat(np.arange(devices), positions.shape[2]),
        control_end=((positions == 1) | (positions == last)).reshape(campaigns, -1),
    )
