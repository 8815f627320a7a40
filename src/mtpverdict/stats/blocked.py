"""The family procedure with the device as a block: arms compared with the controls of their own device.

Two cards of one model often differ by more than the effect being tested, so an arm's boots are only
ever compared with the control boots of the same device. Per (arm, cell) and device d the difference
Delta_d = mean log(arm on d) - mean log(controls on d); the estimate is their weighted mean with
w_d = n_ad n_cd / (n_ad + n_cd) (precision weights when both groups have one boot variance; equal
weights in a balanced design). The device level cancels out of every Delta_d, so device effects add
nothing to the estimate's variance. Its standard error comes from one of two sources, chosen by the
design, never by which gives the smaller number:
- `blocked`: when the arm and the controls are each booted more than once on some device, each group's
  boot variance is pooled within device (the residuals of its boots around its device mean, sum of
  n_gd - 1 df); se^2 = k_a s2_a + k_c s2_c with k_g = sum_d w_d^2 / n_gd / W^2, Welch-Satterthwaite df.
  The floor is then built from within-device control pairs. With one device this is stats/welch.py's
  comparison exactly.
- `devices`: when a group has no within-device replicate (one boot of the arm per device, the usual
  design on many devices), the spread of the Delta_d across the U devices that ran both:
  s^2 = sum_d w_d (Delta_d - mean)^2 / (U - 1), se^2 = s^2 / W, U - 1 df. It includes any arm x device
  interaction, so it is the honest error of "better on these devices".
A group whose boot sd is below MIN_CREDIBLE_SD is unknown variance, as in stats/welch.py. Then the
family is combined exactly as stats/procedure.py does: intersection-union over cells, Holm across arms,
leave-one-boot-out (each boot dropped in turn, the variances kept), equivalence first.

The device-to-device spread is reported beside the outcome: variance components by statsmodels mixedlm
(REML), the device as a random intercept, the boot inside its device as a variance component.
Archived A/A history is per seat and is not used across devices.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from mtpverdict.stats.positions import drift_line
from mtpverdict.stats.procedure import (
    OUTCOMES,
    WHYS,
    ArchivedVariance,
    ArmArrays,
    ArmOutcome,
    BootValue,
    Cell,
    CellComparison,
    FamilyOutcome,
    VarianceMethod,
    combine,
    family_procedure,
    thresholds,
)
from mtpverdict.stats.welch import Array, CellTests, Method, Thresholds, _t_tests

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class BlockedMethod(IntEnum):
    """The variance behind one blocked comparison (codes in the arrays)."""

    BLOCKED = 0  # each group's boot variance pooled within device
    DEVICES = 1  # the spread of the per-device differences
    UNKNOWN = 2
    MISSING = 3


_TYPED = {
    BlockedMethod.BLOCKED: VarianceMethod.BLOCKED,
    BlockedMethod.DEVICES: VarianceMethod.DEVICES,
    BlockedMethod.UNKNOWN: VarianceMethod.UNKNOWN,
    BlockedMethod.MISSING: VarianceMethod.MISSING,
}


@dataclass(frozen=True, slots=True)
class DeviceBootValue:
    """One boot's statistic in one cell (log of its median counted run), with its device."""

    arm: str
    boot: int
    order: int
    device: str
    log_value: float


@dataclass(frozen=True, slots=True)
class BlockedTests:
    """The per (campaign, arm, cell) tests, in stats/welch.py's shape, and the blocked method used."""

    tests: CellTests  # method holds welch codes (WELCH for both known methods) so combine() applies
    method: Ints  # BlockedMethod codes
    devices_used: Ints  # devices that ran both the arm and the controls
    delta: Array  # (B, A, C, D) per-device differences, NaN where a device lacks a group


@dataclass(frozen=True, slots=True)
class DeviceEffect:
    """One arm against the controls of one device at one cell (log, arm minus control)."""

    arm: str
    cell: Cell
    device: str
    estimate: float  # NaN when the device lacks the arm or the controls there
    n_arm: int
    n_control: int


@dataclass(frozen=True, slots=True)
class DeviceSpread:
    """Variance components of the per-boot log statistics across devices (mixedlm, REML)."""

    devices: int
    device_sd: float  # sd of a device's level (log); NaN when it could not be estimated
    boot_sd: float  # sd of a boot inside its device (log)
    cell_sd: float  # sd of a cell inside its boot (NaN with one cell: it is part of boot_sd then)
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BlockedFamilyOutcome:
    """The family outcome (the type decide consumes), the devices, and how much they differ."""

    family: FamilyOutcome
    devices: tuple[str, ...]
    blocked: bool  # False: one device, the un-blocked procedure ran unchanged
    effects: tuple[DeviceEffect, ...]  # per arm, cell and device
    spread: DeviceSpread | None  # None with one device, or when the fit failed (see notes)
    notes: tuple[str, ...]


# --------------------------------------------------------------------------------------------------
# arrays: arm (B, A, C, D, Na), control (B, C, D, Nc), NaN = absent


def _groups(x: Array) -> tuple[Array, Array, Array, Array]:
    """Count, sum, mean and within-device sum of squares along the last axis, ignoring NaN."""
    present = ~np.isnan(x)
    n = present.sum(axis=-1).astype(float)
    total = np.where(present, x, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
    ss = (np.where(present, x - mean[..., None], 0.0) ** 2).sum(axis=-1)
    return n, total, mean, ss


def _terms(n_a: Array, sum_a: Array, n_c: Array, sum_c: Array) -> tuple[Array, ...]:
    """Per-device weights and weighted terms: w, w Delta, w^2/n_a, w^2/n_c, usable, Delta."""
    usable = (n_a > 0) & (n_c > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(usable, n_a * n_c / (n_a + n_c), 0.0)
        delta = np.where(usable, sum_a / n_a - sum_c / n_c, np.nan)
        ka = np.where(usable, w**2 / n_a, 0.0)
        kc = np.where(usable, w**2 / n_c, 0.0)
    return w, np.where(usable, w * delta, 0.0), ka, kc, usable.astype(float), delta


def _variances(
    n_a: Array, ss_a: Array, n_c: Array, ss_c: Array, min_sd: float
) -> tuple[Array, Array, Array, Array, Bools, Bools]:
    """Within-device s2 and df of the arm (B, A, C) and controls (B, 1, C); whether each is credible."""
    df_a = np.maximum(n_a - 1, 0).sum(axis=-1).astype(float)
    df_c = np.maximum(n_c - 1, 0).sum(axis=-1).astype(float)[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        s2_a = ss_a.sum(axis=-1) / df_a
        s2_c = ss_c.sum(axis=-1)[:, None, :] / df_c
    return s2_a, df_a, s2_c, df_c, (df_a > 0) & (s2_a >= min_sd**2), (df_c > 0) & (s2_c >= min_sd**2)


def _device_ends(arm_pos: Array, ctrl_pos: Array) -> tuple[Array, Array]:
    """1.0 where a boot is the first or last of its device over every arm and control of the cell
    (arm_pos (B, A, C, D, Na), ctrl_pos (B, C, D, Nc)), else 0.0; NaN positions are no boot."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.fmin(np.nanmin(arm_pos, axis=(1, -1)), np.nanmin(ctrl_pos, axis=-1))[..., None]
        hi = np.fmax(np.nanmax(arm_pos, axis=(1, -1)), np.nanmax(ctrl_pos, axis=-1))[..., None]
    arm_end = (arm_pos == lo[:, None]) | (arm_pos == hi[:, None])
    return arm_end.astype(float), ((ctrl_pos == lo) | (ctrl_pos == hi)).astype(float)


def _weighted_gap(
    arm: Array, control: Array, counts: tuple[Array, Array], arm_x: Array, ctrl_x: Array
) -> Array:
    """Per (B, A, C): the device-weighted mean of x over the arm's boots less over the controls'
    (`counts`: the arm's and the controls' boots per device, _groups)."""
    n_a, n_c = counts
    sum_a = np.where(np.isnan(arm), 0.0, arm_x).sum(-1)
    sum_c = np.where(np.isnan(control), 0.0, ctrl_x).sum(-1)[:, None]
    w, w_gap = _terms(n_a, sum_a, n_c[:, None], sum_c)[:2]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w.sum(-1) > 0, w_gap.sum(-1) / w.sum(-1), 0.0)


def _adjusted(
    arm: Array, control: Array, positions: tuple[Array, Array] | None
) -> tuple[Array, Array, Array, Array]:
    """Values less the controls' within-device drift line (stats/positions.drift_line: a slope and
    a device's ends against its middle), and per (B, A, C) the variance the line's error adds to the
    arm's comparison (g' V g, g the arm's gaps to the controls in mean position and share of ends)
    and the line's df. Without positions: the values as given, nothing added."""
    n_shape = arm.shape[:3]
    if positions is None:
        return arm, control, np.zeros(n_shape), np.full(n_shape, np.nan)
    arm_pos = np.asarray(positions[0], dtype=float)
    ctrl_pos = np.asarray(positions[1], dtype=float)
    arm_pos = arm_pos[:, :, None] if arm_pos.ndim == 4 else arm_pos  # (B, A, C or 1, D, Na)
    ctrl_pos = ctrl_pos[:, None] if ctrl_pos.ndim == 3 else ctrl_pos  # (B, C or 1, D, Nc)
    cells = max(arm_pos.shape[2], ctrl_pos.shape[1])
    arm_pos = np.broadcast_to(arm_pos, (*arm_pos.shape[:2], cells, *arm_pos.shape[3:]))
    ctrl_pos = np.broadcast_to(ctrl_pos, (ctrl_pos.shape[0], cells, *ctrl_pos.shape[2:]))
    arm_end, ctrl_end = _device_ends(arm_pos, ctrl_pos)
    line = drift_line(control, ctrl_pos, ctrl_end)
    slope, bend = line.slope[:, None, :, None, None], line.ends[:, None, :, None, None]
    arm_adj = arm - slope * arm_pos - bend * arm_end
    control_adj = control - line.slope[..., None, None] * ctrl_pos - line.ends[..., None, None] * ctrl_end
    counts = (_groups(arm)[0], _groups(control)[0])
    g = np.stack(
        [
            _weighted_gap(arm, control, counts, arm_pos, ctrl_pos),
            _weighted_gap(arm, control, counts, arm_end, ctrl_end),
        ],
        -1,
    )
    extra = np.einsum("baci,bcij,bacj->bac", g, line.var, g)
    return arm_adj, control_adj, extra, np.broadcast_to(line.df[:, None], n_shape)


def blocked_cell_tests(
    arm: Array, control: Array, th: Thresholds, positions: tuple[Array, Array] | None = None
) -> BlockedTests:
    """Compare every arm with the controls of each device at every cell (module docstring).

    `positions` (arm (B, A, D, Na), controls (B, D, Nc), or per cell (B, A, C, D, Na), (B, C, D, Nc):
    each boot's place on its device, any unit linear in it) compares
    each arm with the controls' drift line at the arm's own positions (module docstring)."""
    arm, control, extra, df_line = _adjusted(arm, control, positions)  # extra: the line's error
    n_a, sum_a, _, ss_a = _groups(arm)
    n_c, sum_c, _, ss_c = _groups(control)
    n_cb, sum_cb = n_c[:, None], sum_c[:, None]
    w, wd, ka, kc, usable, delta = _terms(n_a, sum_a, n_cb, sum_cb)
    big_w, units = w.sum(-1), usable.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(big_w > 0, wd.sum(-1) / big_w, np.nan)
        k_a, k_c = ka.sum(-1) / big_w**2, kc.sum(-1) / big_w**2
        spread = np.where(usable > 0, w * (delta - estimate[..., None]) ** 2, 0.0).sum(-1) / (units - 1)
    s2_a, df_a, s2_c, df_c, ok_a, ok_c = _variances(n_a, ss_a, n_c, ss_c, th.min_sd)
    replicated = (df_a > 0) & (df_c > 0)
    method = np.select(
        [
            n_a.sum(-1) == 0,
            (big_w > 0) & replicated & ok_a & ok_c,
            (big_w > 0) & ~replicated & (units >= 2) & (spread >= th.min_sd**2),
        ],
        [BlockedMethod.MISSING, BlockedMethod.BLOCKED, BlockedMethod.DEVICES],
        BlockedMethod.UNKNOWN,
    ).astype(np.int64)
    blocked, by_devices = method == BlockedMethod.BLOCKED, method == BlockedMethod.DEVICES
    with np.errstate(invalid="ignore", divide="ignore"):
        v_a, v_c = k_a * s2_a, k_c * s2_c
        v_own = np.where(blocked, v_a + v_c, np.where(by_devices, spread / big_w, np.nan))
        df_own = np.where(
            blocked,
            (v_a + v_c) ** 2 / (v_a**2 / df_a + v_c**2 / df_c),
            np.where(by_devices, units - 1, np.nan),
        )
        se = np.sqrt(v_own + extra)
        df = np.where(extra > 0, (v_own + extra) ** 2 / (v_own**2 / df_own + extra**2 / df_line), df_own)
    estimate = np.where(method != BlockedMethod.MISSING, estimate, np.nan)
    p_better, p_short, p_worse, p_equiv, t_ci, t_first = _t_tests(estimate, se, df, th)
    known = blocked | by_devices
    loo_p, loo_est, loo_drop = _leave_one_out(
        arm, control, (n_a, sum_a, n_cb, sum_cb), (blocked, s2_a, s2_c, spread, extra), df, th
    )
    welch_code = np.where(
        known, Method.WELCH, np.where(method == BlockedMethod.MISSING, Method.MISSING, Method.UNKNOWN)
    )
    tests = CellTests(
        n_arm=n_a.sum(-1).astype(np.int64),
        n_control=np.broadcast_to(n_cb.sum(-1), estimate.shape).astype(np.int64),
        estimate=estimate,
        se=se,
        sd_arm=np.where(blocked, np.sqrt(s2_a), np.where(by_devices, np.sqrt(spread), np.nan)),
        sd_control=np.where(blocked, np.sqrt(np.broadcast_to(s2_c, estimate.shape)), np.nan),
        df=df,
        ci_low=estimate - t_ci * se,
        ci_high=estimate + t_ci * se,
        p_better=p_better,
        p_short=p_short,
        p_worse=p_worse,
        p_equivalent=p_equiv,
        floor_first=th.shift + t_first * se,
        floor_last=th.shift + t_ci * se,
        method=welch_code.astype(np.int64),
        loo_p=np.where(known, loo_p, np.nan),
        loo_estimate=np.where(known, loo_est, np.nan),
        loo_drop=loo_drop,
    )
    return BlockedTests(tests, method, usable.sum(-1).astype(np.int64), delta)


def _leave_one_out(
    arm: Array,
    control: Array,
    counts: tuple[Array, Array, Array, Array],
    variance: tuple[Bools, Array, Array, Array, Array],
    df: Array,
    th: Thresholds,
) -> tuple[Array, Array, Ints]:
    """The worst p_better with any one boot (arm or control, on any device) left out.

    The dropped boot leaves its device's mean; each group's variance stays the one estimated from all
    boots, and the standard error is recomputed from the counts that remain. A group of one boot in
    all cannot lose it. Drops are indexed device-major: arm d * Na + j, control -1 - (d * Nc + j).
    """
    n_a, sum_a, n_c, sum_c = counts
    full = _terms(n_a, sum_a, n_c, sum_c)[:4]

    def worst_z(
        n_a2: Array, sum_a2: Array, n_c2: Array, sum_c2: Array, allowed: Bools
    ) -> tuple[Array, Array]:
        return _drop_z(full, _terms(n_a2, sum_a2, n_c2, sum_c2)[:4], variance, th, allowed)

    present_a = ~np.isnan(arm)
    z_a, est_a = worst_z(
        n_a[..., None] - 1.0,
        sum_a[..., None] - np.where(present_a, arm, 0.0),
        np.broadcast_to(n_c[..., None], arm.shape),
        np.broadcast_to(sum_c[..., None], arm.shape),
        present_a & (n_a.sum(-1) >= 2)[..., None, None],
    )
    ctrl = np.broadcast_to(control[:, None], (*n_a.shape, control.shape[-1]))
    present_c = ~np.isnan(ctrl)
    z_c, est_c = worst_z(
        np.broadcast_to(n_a[..., None], ctrl.shape),
        np.broadcast_to(sum_a[..., None], ctrl.shape),
        n_c[..., None] - 1.0,
        sum_c[..., None] - np.where(present_c, ctrl, 0.0),
        present_c & (np.broadcast_to(n_c, n_a.shape).sum(-1) >= 2)[..., None, None],
    )
    lead = n_a.shape[:-1]
    z = np.concatenate([z_a.reshape(*lead, -1), z_c.reshape(*lead, -1)], axis=-1)
    est = np.concatenate([est_a.reshape(*lead, -1), est_c.reshape(*lead, -1)], axis=-1)
    worst = np.argmin(z, axis=-1)
    z_worst = np.take_along_axis(z, worst[..., None], axis=-1)[..., 0]
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        p = np.asarray(_t_sf(z_worst, df))
    n_arm_slots = z_a.shape[-1] * z_a.shape[-2]
    drop = np.where(worst < n_arm_slots, worst, -1 - (worst - n_arm_slots)).astype(np.int64)
    finite = np.isfinite(z_worst)
    est_worst = th.sign * np.take_along_axis(est, worst[..., None], axis=-1)[..., 0]
    return np.where(finite, p, np.nan), np.where(finite, est_worst, np.nan), np.where(finite, drop, 0)


def _drop_z(
    full: tuple[Array, ...],
    new: tuple[Array, ...],
    variance: tuple[Bools, Array, Array, Array, Array],
    th: Thresholds,
    allowed: Bools,
) -> tuple[Array, Array]:
    """z against the threshold, and the estimate, with one boot's device terms replaced (inf: no drop)."""
    blocked, s2_a, s2_c, spread, extra = variance
    w, wd, ka, kc = (t.sum(-1)[..., None, None] - t[..., None] + n for t, n in zip(full, new, strict=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        est = wd / w
        var = (
            np.where(
                blocked[..., None, None],
                (ka * s2_a[..., None, None] + kc * s2_c[..., None, None]) / w**2,
                spread[..., None, None] / w,
            )
            + extra[..., None, None]
        )
        z = (th.sign * est - th.shift) / np.sqrt(var)
    return np.asarray(np.where(allowed & (w > 0) & np.isfinite(z), z, np.inf)), np.asarray(est)


def _t_sf(z: Array, df: Array) -> Array:
    from mtpverdict.stats import tdist

    return np.asarray(tdist.t_sf(z, df))


def blocked_batch(
    arm: Array,
    control: Array,
    *,
    alpha: float,
    equivalence_margin: float,
    min_effect: float | None = None,
    higher_is_better: bool = True,
    positions: tuple[Array, Array] | None = None,
    keep_off_alpha: float | None = None,
) -> tuple[BlockedTests, ArmArrays]:
    """The blocked procedure over many campaigns at once (arm (B, A, C, D, Na), control (B, C, D, Nc));
    `positions` as blocked_cell_tests, `keep_off_alpha` as procedure.combine."""
    if (
        arm.ndim != 5
        or control.ndim != 4
        or arm.shape[0] != control.shape[0]
        or arm.shape[2:4] != control.shape[1:3]
    ):
        raise ValueError(f"shapes do not match: arm {arm.shape}, control {control.shape}")
    th = thresholds(alpha, equivalence_margin, min_effect, higher_is_better, arm.shape[1])
    found = blocked_cell_tests(arm, control, th, positions)
    return found, combine(found.tests, alpha, keep_off_alpha)


# --------------------------------------------------------------------------------------------------
# the typed call


def _devices_of(
    controls: Mapping[Cell, Sequence[DeviceBootValue]],
    candidates: Mapping[str, Mapping[Cell, Sequence[DeviceBootValue]]],
) -> tuple[str, ...]:
    values = [v for vs in controls.values() for v in vs]
    values += [v for cells in candidates.values() for vs in cells.values() for v in vs]
    return tuple(sorted({v.device for v in values}))


def _plain(values: Sequence[DeviceBootValue]) -> list[BootValue]:
    return [BootValue(v.arm, v.boot, v.order, v.log_value) for v in values]


def _orders(slots: Sequence[Sequence[Sequence[DeviceBootValue]]], width: int) -> Array:
    """(C, D, N) boot orders behind the slots of _grid (NaN: no boot)."""
    out = np.full((len(slots), len(slots[0]) if slots else 0, max(width, 1)), np.nan)
    for c, per_cell in enumerate(slots):
        for d, values in enumerate(per_cell):
            out[c, d, : len(values)] = [float(v.order) for v in values]
    return out


def _grid(
    rows: Sequence[Sequence[DeviceBootValue]], devices: tuple[str, ...]
) -> tuple[Array, list[list[list[DeviceBootValue]]]]:
    """(C, D, N) values and the boots behind each slot, each (cell, device) in boot order."""
    slots = [
        [sorted((v for v in row if v.device == d), key=lambda v: (v.order, v.arm, v.boot)) for d in devices]
        for row in rows
    ]
    width = max((len(s) for per_cell in slots for s in per_cell), default=1)
    out = np.full((len(rows), len(devices), max(width, 1)), np.nan)
    for c, per_cell in enumerate(slots):
        for d, values in enumerate(per_cell):
            out[c, d, : len(values)] = [v.log_value for v in values]
    return out, slots


def blocked_family_procedure(
    controls: Mapping[Cell, Sequence[DeviceBootValue]],
    candidates: Mapping[str, Mapping[Cell, Sequence[DeviceBootValue]]],
    design_cells: Sequence[Cell],
    *,
    alpha: float,
    equivalence_margin: float,
    min_effect: float | None = None,
    higher_is_better: bool = True,
    history: Mapping[Cell, ArchivedVariance] | None = None,
    lend_history: bool = False,
    keep_off_alpha: float | None = None,
) -> BlockedFamilyOutcome:
    """Each candidate against the controls of its own device at every design cell, combined once.

    With one device this is family_procedure unchanged (history included). With several, history is
    not used (it is per seat) and the outcome says so. Raises ValueError as family_procedure does.
    """
    design = tuple(design_cells)
    devices = _devices_of(controls, candidates)
    one = len(devices) <= 1
    plain = family_procedure(  # on several devices: its input checks, and the family's levels
        {c: _plain(v) for c, v in controls.items()},
        {a: {c: _plain(v) for c, v in cells.items()} for a, cells in candidates.items()},
        design,
        alpha=alpha,
        equivalence_margin=equivalence_margin,
        min_effect=min_effect,
        higher_is_better=higher_is_better,
        history=history if one else None,
        lend_history=lend_history,
        keep_off_alpha=keep_off_alpha,
    )
    if one:
        return BlockedFamilyOutcome(plain, devices, False, (), None, ())
    arm, control, slots = _stack(controls, candidates, design, devices)
    positions = (
        np.stack([_orders(s[0], arm.shape[-1]) for s in slots])[None],
        _orders(slots[0][1], control.shape[-1])[None],
    )
    found, arrays = blocked_batch(
        arm,
        control,
        alpha=alpha,
        equivalence_margin=equivalence_margin,
        min_effect=min_effect,
        higher_is_better=higher_is_better,
        positions=positions,
        keep_off_alpha=keep_off_alpha,
    )
    arms = tuple(_arm_outcome(i, name, design, found, arrays, slots[i]) for i, name in enumerate(candidates))
    effects = _effects(list(candidates), design, devices, found, arm[0], control[0])
    notes = ["archived A/A history is per seat and is not used across devices"] if history else []
    spread, spread_notes = _spread(controls, candidates, design)
    family = dataclasses.replace(plain, arms=arms)
    return BlockedFamilyOutcome(family, devices, True, effects, spread, (*notes, *spread_notes))


Slots = tuple[list[list[list[DeviceBootValue]]], list[list[list[DeviceBootValue]]], int, int]


def _stack(
    controls: Mapping[Cell, Sequence[DeviceBootValue]],
    candidates: Mapping[str, Mapping[Cell, Sequence[DeviceBootValue]]],
    design: tuple[Cell, ...],
    devices: tuple[str, ...],
) -> tuple[Array, Array, list[Slots]]:
    """arm (1, A, C, D, Na) and control (1, C, D, Nc), and each arm's boots behind the slots."""
    control, ctrl_slots = _grid([controls.get(c, ()) for c in design], devices)
    grids = [_grid([cells.get(c, ()) for c in design], devices) for cells in candidates.values()]
    width = max(g[0].shape[-1] for g in grids)
    arm = np.full((1, len(grids), len(design), len(devices), width), np.nan)
    for i, (values, _) in enumerate(grids):
        arm[0, i, :, :, : values.shape[-1]] = values
    return arm, control[None], [(g[1], ctrl_slots, width, control.shape[-1]) for g in grids]


def _effects(
    names: list[str],
    design: tuple[Cell, ...],
    devices: tuple[str, ...],
    found: BlockedTests,
    arm: Array,
    control: Array,
) -> tuple[DeviceEffect, ...]:
    n_a = (~np.isnan(arm)).sum(-1)
    n_c = (~np.isnan(control)).sum(-1)
    return tuple(
        DeviceEffect(name, cell, device, float(found.delta[0, i, j, d]), int(n_a[i, j, d]), int(n_c[j, d]))
        for i, name in enumerate(names)
        for j, cell in enumerate(design)
        for d, device in enumerate(devices)
    )


def _dropped(drop: int, slots: Slots, j: int) -> str | None:
    arm_slots, ctrl_slots, width_a, width_c = slots
    if drop >= 0:
        d, k = divmod(drop, width_a)
        boots = arm_slots[j][d]
    else:
        d, k = divmod(-1 - drop, width_c)
        boots = ctrl_slots[j][d]
    if k >= len(boots):
        return None
    return f"{boots[k].arm} boot {boots[k].boot} ({boots[k].device})"


def _reason(method: BlockedMethod, tests: CellTests, found: BlockedTests, i: int, j: int) -> str:
    n_a, n_c, used = (
        int(tests.n_arm[0, i, j]),
        int(tests.n_control[0, i, j]),
        int(found.devices_used[0, i, j]),
    )
    if method == BlockedMethod.BLOCKED:
        return (
            f"blocked: arm and controls compared within each of {used} devices; each group's boot variance "
            f"pooled within device ({n_a} and {n_c} boots); not pooled across arms"
        )
    if method == BlockedMethod.DEVICES:
        return (
            f"devices: one arm boot per device, so the error is the spread of the per-device differences "
            f"over {used} devices ({used - 1} df), arm x device interaction included"
        )
    if method == BlockedMethod.MISSING:
        return "no boot of the arm measured this cell"
    return (
        f"unknown: no device ran the arm and the controls more than once with a credible spread, and "
        f"{used} device(s) ran both (two are needed to use their spread)"
    )


def _arm_outcome(
    i: int,
    name: str,
    design: tuple[Cell, ...],
    found: BlockedTests,
    arrays: ArmArrays,
    slots: Slots,
) -> ArmOutcome:
    tests = found.tests
    cells: list[CellComparison] = []
    for j, cell in enumerate(design):
        method = BlockedMethod(int(found.method[0, i, j]))
        if method == BlockedMethod.MISSING:
            continue
        loo_p = float(tests.loo_p[0, i, j])
        value = {name_: float(getattr(tests, name_)[0, i, j]) for name_ in _FLOAT_FIELDS}
        cells.append(
            CellComparison(
                arm=name,
                cell=cell,
                n_arm=int(tests.n_arm[0, i, j]),
                n_control=int(tests.n_control[0, i, j]),
                **value,
                p_below_min_effect=float(tests.p_short[0, i, j]),
                variance=_TYPED[method],
                variance_reason=_reason(method, tests, found, i, j),
                loo_p=loo_p,
                loo_estimate=float(tests.loo_estimate[0, i, j]),
                loo_boot=None if math.isnan(loo_p) else _dropped(int(tests.loo_drop[0, i, j]), slots, j),
                cell_outcome=OUTCOMES[int(arrays.cell_outcome[0, i, j])],
            )
        )
    measured = {c.cell for c in cells}
    loo_p = float(arrays.loo_p[0, i])
    loo_cell = None if math.isnan(loo_p) else design[int(arrays.loo_cell[0, i])]
    floors = [c.floor_first for c in cells]
    return ArmOutcome(
        arm=name,
        outcome=OUTCOMES[int(arrays.outcome[0, i])],
        why=WHYS[int(arrays.why[0, i])],
        cells=tuple(cells),
        missing_cells=tuple(c for c in design if c not in measured),
        unknown_cells=tuple(c.cell for c in cells if c.variance == VarianceMethod.UNKNOWN),
        worst_cell=design[int(arrays.worst_cell[0, i])],
        p_better=float(arrays.p_better[0, i]),
        p_better_holm=float(arrays.p_better_holm[0, i]),
        p_equivalent=float(arrays.p_equivalent[0, i]),
        p_equivalent_holm=float(arrays.p_equivalent_holm[0, i]),
        p_worse=float(arrays.p_worse[0, i]),
        p_worse_holm=float(arrays.p_worse_holm[0, i]),
        p_below_min_effect=float(arrays.p_short[0, i]),
        p_below_min_effect_holm=float(arrays.p_short_holm[0, i]),
        loo_p=loo_p,
        loo_boot=None if loo_cell is None else next(c.loo_boot for c in cells if c.cell == loo_cell),
        loo_cell=loo_cell,
        floor_first=max(floors) if floors and not any(math.isnan(f) for f in floors) else math.nan,
        floor_last=max((c.floor_last for c in cells), default=math.nan),
    )


_FLOAT_FIELDS = (
    "estimate",
    "se",
    "sd_arm",
    "sd_control",
    "df",
    "ci_low",
    "ci_high",
    "p_better",
    "p_worse",
    "p_equivalent",
    "floor_first",
    "floor_last",
)


# --------------------------------------------------------------------------------------------------
# the device-to-device spread


def _spread(
    controls: Mapping[Cell, Sequence[DeviceBootValue]],
    candidates: Mapping[str, Mapping[Cell, Sequence[DeviceBootValue]]],
    design: tuple[Cell, ...],
) -> tuple[DeviceSpread | None, list[str]]:
    rows = [("control", c, v) for c in design for v in controls.get(c, ())]
    rows += [(a, c, v) for a, cells in candidates.items() for c in design for v in cells.get(c, ())]
    try:
        spread = device_spread(
            [f"{config}|{cell[0]}|{cell[1]}" for config, cell, _ in rows],
            [v.device for _, _, v in rows],
            [f"{v.arm}#{v.boot}" for _, _, v in rows],
            [v.log_value for _, _, v in rows],
        )
    except ValueError as exc:
        return None, [f"the device-to-device spread could not be estimated: {exc}"]
    return spread, []


def device_spread(
    groups: Sequence[str], devices: Sequence[str], boots: Sequence[str], log_values: Sequence[float]
) -> DeviceSpread:
    """Device, boot and cell sds of log statistics by statsmodels mixedlm (REML).

    Fixed effects per group (configuration and cell), the device as a random intercept, the boot
    inside its device as a variance component when boots measured several cells (else the boot is the
    residual). Raises ValueError when the data cannot carry the model (fewer than two devices, no
    spread, a singular fit).
    """
    import pandas as pd
    import statsmodels.formula.api as smf

    frame = pd.DataFrame(
        {"y": list(log_values), "g": list(groups), "device": list(devices), "boot": list(boots)}
    )
    if frame["device"].nunique() < 2:
        raise ValueError("fewer than two devices")
    # statsmodels judges the boundary on an absolute scale: fit on y over its spread (plan._mixedlm)
    scale = float((frame["y"] - frame.groupby("g")["y"].transform("mean")).std())
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError("every boot of a group has the same value")
    frame["y"] = frame["y"] / scale
    several_cells = bool((frame.groupby("boot").size() > 1).any())
    formula = "y ~ C(g)" if frame["g"].nunique() > 1 else "y ~ 1"
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = smf.mixedlm(
                formula,
                frame,
                groups=frame["device"],
                re_formula="1",
                vc_formula={"boot": "0 + C(boot)"} if several_cells else None,
            )
            fit = model.fit(reml=True)
        except (np.linalg.LinAlgError, ValueError) as exc:
            raise ValueError(f"the mixed model could not be fitted ({exc})") from None
    device_var = float(np.asarray(fit.cov_re)[0, 0]) * scale**2
    resid = float(fit.scale) * scale**2
    boot_var = float(np.asarray(fit.vcomp)[0]) * scale**2 if several_cells else resid
    if not all(math.isfinite(v) for v in (device_var, resid, boot_var)):
        raise ValueError("the mixed model gave no finite variance")
    notes += sorted({f"mixed model: {str(w.message).splitlines()[0]}" for w in caught})
    if frame["device"].nunique() < 5:
        notes.append(f"{frame['device'].nunique()} devices: the device sd rests on few degrees of freedom")
    return DeviceSpread(
        devices=int(frame["device"].nunique()),
        device_sd=math.sqrt(max(device_var, 0.0)),
        boot_sd=math.sqrt(max(boot_var, 0.0)),
        cell_sd=math.sqrt(max(resid, 0.0)) if several_cells else math.nan,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------------------------------
# control exchangeability within device


@dataclass(frozen=True, slots=True)
class DeviceDrift:
    """The within-device drift of control boots, per row: fitted first-to-last change and its p."""

    drift: Array  # log, slope x the span of positions on a device
    p: Array  # two-sided; NaN when it cannot be fitted
    df: Ints


def device_drift(position: Array, device: Ints, y: Array) -> DeviceDrift:
    """Fit one slope to control residuals y (B, N) against their position on their device (N,).

    Each device keeps its own level (positions and residuals are centred per device: the fixed-effects
    or within estimator), so device-to-device differences cannot look like drift; the slope is common
    to the devices and has N - devices - 1 degrees of freedom (absent boots, NaN, left out). With one
    device it is the ordinary least-squares slope of stats/drift.py's linear shape.
    """
    from mtpverdict.stats import tdist

    x = np.broadcast_to(np.asarray(position, dtype=float), y.shape)
    present = ~np.isnan(y)
    labels = np.unique(device)
    xc = np.zeros_like(y)
    yc = np.zeros_like(y)
    groups = np.zeros(y.shape[0])
    for label in labels:
        in_d = (np.asarray(device) == label)[None, :] & present
        n = in_d.sum(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx = np.where(in_d, x, 0).sum(-1, keepdims=True) / n
            my = np.where(in_d, y, 0).sum(-1, keepdims=True) / n
        xc = np.where(in_d, x - mx, xc)
        yc = np.where(in_d, y - my, yc)
        groups += (n[:, 0] > 0).astype(float)
    sxx = (xc**2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (xc * yc).sum(-1) / sxx
        df = present.sum(-1) - groups - 1
        s2 = ((yc - slope[:, None] * xc) ** 2 * present).sum(-1) / df
        t = slope / np.sqrt(s2 / sxx)
    span = float(np.ptp(np.asarray(position, dtype=float))) if len(position) else 0.0
    ok = (df >= 1) & (sxx > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p = np.where(ok, 2.0 * tdist.t_sf(np.abs(t), np.maximum(df, 1)), np.nan)
    return DeviceDrift(np.where(ok, slope * span, np.nan), np.asarray(p), df.astype(np.int64))
