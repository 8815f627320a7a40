"""Control boots' positions on their device: ends against middle and a slope, and confounded layouts.

A device's first and last boots can differ from its middle ones (warm-up, thermal state at the end of
a shift) and its boots can drift. When every control boot of a campaign sits at an end of its device
(off_A first and off_B last, one round per device) such a shape is the same thing as "control": the
candidates are compared with slow controls and a null depth looks better. `confounded` says when a
layout is like that, whatever wrote the records; no check on the controls alone can see it, because
the controls never sit anywhere else.

When the layout draws the controls' positions (stats/layout.py), devices differ in where the
controls fall and `device_position` fits, to the control residuals, one model with each device's own
level (the within estimator, so device levels cannot look like a shape):

    residual = level(device) + slope x position on the device + ends x [first or last boot] + error,

N - devices - 2 degrees of freedom. `drift` is the slope times the span of positions, `ends` the fitted
ends minus middle (negative when the first and last boots are slow). The controls fail
(`position_failing`) when a shape is significant at alpha / SHAPES (Bonferroni over the two, as in
stats/drift.py): for normal errors the t tests are exact given the layout, so clean controls fail at
most alpha on every drawn layout. A point estimate beyond the policy's bound is not a failure by
itself: on a layout whose controls sit at an end of only one or two devices the ends are fitted from
those few and their estimate is wide, and "beyond the bound whatever its p-value" failed clean
controls up to 14-16% of the time on some 8 x 1 layouts. (A shape large enough to matter is also
large against the noise, once the layout can see it; a layout that cannot is stated as such.) decide
and the calibration use this function and this level, so the calibration measures the check `decide`
runs.

Closed-form least squares on arrays with a leading batch axis; tests check it against statsmodels OLS
with device dummies.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mtpverdict.stats import tdist
from mtpverdict.stats.drift import SHAPES
from mtpverdict.stats.welch import Array

Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]
MIN_CONFOUNDED_CONTROLS = 2  # one control boot is a missing null control (stats/drift.py), not a layout


@dataclass(frozen=True, slots=True)
class DevicePosition:
    """Per row: the within-device slope (as first-to-last change) and ends-vs-middle of control boots."""

    drift: Array  # log; NaN when it cannot be fitted
    p_drift: Array  # two-sided
    ends: Array  # log, ends minus middle; NaN when no device has controls both at an end and inside
    p_ends: Array
    df: Ints


def end_positions(position: Array, device: Ints) -> Bools:
    """Which boots are the first or the last boot of their device (position (..., N), device (N,))."""
    pos = np.asarray(position, dtype=float)
    dev = np.asarray(device)
    out = np.zeros(pos.shape, dtype=bool)
    for label in np.unique(dev):
        on = dev == label
        first = np.min(pos[..., on], axis=-1, keepdims=True)
        last = np.max(pos[..., on], axis=-1, keepdims=True)
        out[..., on] = (pos[..., on] == first) | (pos[..., on] == last)
    return out


def confounded(control: Bools, end: Bools, device: Ints) -> bool:
    """Every control boot at an end of its device: position and role cannot be told apart.

    `control`, `end` (end_positions over every boot of the device) and `device` describe the boots of
    one family (N,). Two or more control boots are needed (one is an untestable null control, stated
    by the drift check), and a device with a control must also hold a candidate (else there is
    nothing the position could bias).
    """
    control = np.asarray(control, dtype=bool)
    ends = np.asarray(end, dtype=bool)
    dev = np.asarray(device)
    if int(control.sum()) < MIN_CONFOUNDED_CONTROLS:
        return False
    with_control = np.unique(dev[control])
    if not all((~control[dev == d]).any() for d in with_control):
        return False
    return bool(ends[control].all())


def device_position(position: Array, device: Ints, end: Bools, y: Array) -> DevicePosition:
    """Fit slope and ends-vs-middle to control residuals y (B, N) within devices (module docstring).

    position and end are (N,) or (B, N) (a layout drawn per campaign); NaN in y is an absent boot.
    """
    present = ~np.isnan(y)
    x = np.where(present, np.broadcast_to(np.asarray(position, dtype=float), y.shape), 0.0)
    e = np.where(present, np.broadcast_to(np.asarray(end, dtype=float), y.shape), 0.0)
    yz = np.where(present, y, 0.0)
    xc, ec, yc = np.zeros_like(yz), np.zeros_like(yz), np.zeros_like(yz)
    groups = np.zeros(y.shape[0])
    dev = np.asarray(device)
    for label in np.unique(dev):
        on = (dev == label)[None, :] & present
        n = on.sum(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            for src, dst in ((x, xc), (e, ec), (yz, yc)):
                mean = np.where(on, src, 0.0).sum(-1, keepdims=True) / n
                dst[...] = np.where(on, src - mean, dst)
        groups += (n[:, 0] > 0).astype(float)
    sxx, see, sxe = (xc**2).sum(-1), (ec**2).sum(-1), (xc * ec).sum(-1)
    sxy, sey = (xc * yc).sum(-1), (ec * yc).sum(-1)
    det = sxx * see - sxe**2
    has_ends = det > 1e-9 * np.maximum(sxx * see, 1e-300)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope2 = (see * sxy - sxe * sey) / det
        ends2 = (sxx * sey - sxe * sxy) / det
        slope1 = sxy / sxx
    slope = np.where(has_ends, slope2, slope1)
    ends = np.where(has_ends, ends2, np.nan)
    fitted = slope[:, None] * xc + np.where(has_ends, ends, 0.0)[:, None] * ec
    df = present.sum(-1) - groups - np.where(has_ends, 2, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = (((yc - fitted) ** 2) * present).sum(-1) / df
        var_slope = np.where(has_ends, s2 * see / det, s2 / sxx)
        var_ends = s2 * sxx / det
        t_slope, t_ends = slope / np.sqrt(var_slope), ends / np.sqrt(var_ends)
    pos = np.where(present, np.broadcast_to(np.asarray(position, dtype=float), y.shape), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        span = np.nanmax(pos, axis=-1) - np.nanmin(pos, axis=-1)
        ok = (df >= 1) & (sxx > 0)
        dfs = np.maximum(df, 1)
        p_drift = np.where(ok, 2.0 * tdist.t_sf(np.abs(t_slope), dfs), np.nan)
        p_ends = np.where(ok & has_ends, 2.0 * tdist.t_sf(np.abs(t_ends), dfs), np.nan)
    return DevicePosition(
        drift=np.where(ok, slope * span, np.nan),
        p_drift=np.asarray(p_drift),
        ends=np.where(ok & has_ends, ends, np.nan),
        p_ends=np.asarray(p_ends),
        df=df.astype(np.int64),
    )


def position_failing(found: DevicePosition, alpha: float) -> Bools:
    """Rows whose controls fail: a shape significant at alpha / SHAPES (module docstring)."""
    level = alpha / SHAPES
    with np.errstate(invalid="ignore"):
        return np.asarray((found.p_drift < level) | (found.p_ends < level))


def position_beyond(found: DevicePosition, bound: float) -> Bools:
    """Rows whose fitted drift or ends exceed the bound (stated with the check, not a failure alone)."""
    with np.errstate(invalid="ignore"):
        return np.asarray((np.abs(found.drift) > bound) | (np.abs(found.ends) > bound))


@dataclass(frozen=True, slots=True)
class DriftLine:
    """Per (row, cell): the controls' within-device slope and ends-vs-middle, their covariance and df.

    `ends` is 0 with zero variance where the controls cannot tell ends from middle (every control at
    an end of its device, or none): the line is then a slope alone, as a layout without that contrast
    has nothing to correct by it."""

    slope: Array  # log per position unit; 0 where it cannot be fitted
    ends: Array  # log, a device's first and last boots minus its middle ones; 0 where not fitted
    var: Array  # (..., 2, 2) sampling covariance of (slope, ends); 0 where not fitted
    df: Array  # control boots - devices with a control - terms fitted; NaN where it cannot be fitted


def _centred(values: Array, present: Bools) -> Array:
    """values less their mean over the present boots of each (row, cell, device); 0 where absent."""
    n = present.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(present, values, 0.0).sum(-1, keepdims=True) / n
    return np.where(present, values - mean, 0.0)


def drift_line(control: Array, position: Array, end: Array) -> DriftLine:
    """The controls' common within-device slope and ends-vs-middle per cell: control (B, C, D, m),
    position and end (1.0 for a device's first or last boot) (B, D, m) or (B, C, D, m).

    Each device keeps its own level (the within estimator, as device_position), so device levels
    cannot look like a shape; the controls are one configuration, so no arm effect enters it. The
    two terms are fitted jointly where the controls hold both ends and middle boots of some device,
    else the slope alone (its df then counts one term).
    """
    pos = np.asarray(position, dtype=float)
    pos = np.broadcast_to(pos[:, None] if pos.ndim == control.ndim - 1 else pos, control.shape)
    ends = np.asarray(end, dtype=float)
    ends = np.broadcast_to(ends[:, None] if ends.ndim == control.ndim - 1 else ends, control.shape)
    present = ~np.isnan(control) & ~np.isnan(pos)
    xc, ec, yc = _centred(pos, present), _centred(ends, present), _centred(control, present)
    sxx, see, sxe = (xc**2).sum((-2, -1)), (ec**2).sum((-2, -1)), (xc * ec).sum((-2, -1))
    sxy, sey = (xc * yc).sum((-2, -1)), (ec * yc).sum((-2, -1))
    det = sxx * see - sxe**2
    joint = det > 1e-9 * np.maximum(sxx * see, 1e-300)
    groups = (present.sum(-1) > 0).sum(-1)
    df = present.sum((-2, -1)) - groups - np.where(joint, 2.0, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(joint, (see * sxy - sxe * sey) / det, sxy / sxx)
        bend = np.where(joint, (sxx * sey - sxe * sxy) / det, 0.0)
        fitted = slope[..., None, None] * xc + bend[..., None, None] * ec
        s2 = ((yc - fitted) ** 2 * present).sum((-2, -1)) / df
        v_slope = np.where(joint, s2 * see / det, s2 / sxx)
        v_cross = np.where(joint, -s2 * sxe / det, 0.0)
        v_ends = np.where(joint, s2 * sxx / det, 0.0)
        var = np.stack([np.stack([v_slope, v_cross], -1), np.stack([v_cross, v_ends], -1)], -2)
    ok = (sxx > 0) & (df >= 1) & np.isfinite(s2)
    return DriftLine(
        np.where(ok, slope, 0.0),
        np.where(ok, bend, 0.0),
        np.where(ok[..., None, None], var, 0.0),
        np.where(ok, df, np.nan),
    )
