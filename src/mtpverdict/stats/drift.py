"""Control exchangeability: drift and curvature of the control boots in boot order, and its magnitude.

Each control boot is reduced to one residual: its log statistic minus the cell's mean over the control
boots, averaged over the cells it measured (the cells of one boot share its state, so they are one
observation). On the residuals against boot order:
- drift: the OLS slope times the campaign's span (first to last control boot), tested two-sided;
- curvature: the quadratic term of an OLS fit, as the fitted ends minus the fitted middle (negative
  when the first and last boots are both slow), tested two-sided with four or more boots.
The controls fail when a shape is significant at alpha / 2 (Bonferroni over the two shapes), or when
its size is beyond the bound whatever its p-value: the policy's `max_drift`, or the comparisons'
floor when that is smaller (a drift the comparisons could mistake for an effect). Two control boots
(one pair) give only their difference, judged by size; one gives nothing: untestable.
Control boots may sit anywhere in the campaign (between rounds, not only at the ends); the more
positions they cover, the better both shapes are estimated.

Closed-form OLS on arrays with a leading batch axis (the calibration fits thousands at once);
the tests check slope, curvature and their p-values against statsmodels OLS.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from mtpverdict.stats import tdist
from mtpverdict.stats.procedure import BootValue, Cell
from mtpverdict.stats.welch import Array

SHAPES = 2  # slope and curvature: each tested at alpha / SHAPES (Bonferroni)


class DriftStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNTESTABLE = "untestable"


class DriftFinding(StrEnum):
    """What made the controls fail (or why they could not be tested)."""

    SLOPE_SIZE = "slope_size"  # first-to-last drift beyond the bound
    SLOPE_SIGNIFICANT = "slope_significant"
    CURVATURE_SIZE = "curvature_size"  # ends-vs-middle beyond the bound
    CURVATURE_SIGNIFICANT = "curvature_significant"
    PAIR_SIZE = "pair_size"  # the two control boots differ beyond the bound
    ONE_BOOT = "one_boot"
    SAME_POSITION = "same_position"  # every control boot at one position: no order to fit


@dataclass(frozen=True, slots=True)
class ControlBoot:
    """One control boot's residual (log, centred per cell, averaged over its cells)."""

    arm: str
    boot: int
    order: int
    residual: float
    cells: int


@dataclass(frozen=True, slots=True)
class DriftCheck:
    """The exchangeability check of one family's control boots."""

    status: DriftStatus
    findings: tuple[DriftFinding, ...]
    boots: tuple[ControlBoot, ...]  # in boot order
    drift: float  # log, fitted first-to-last (NaN with fewer than 2 positions)
    p_drift: float  # NaN with fewer than 3 boots
    curvature: float  # log, fitted ends minus middle (NaN with fewer than 3 positions)
    p_curvature: float  # NaN with fewer than 4 boots
    bound: float  # log: min(log(1 + max_drift), floor)
    alpha: float


def control_residuals(controls: Mapping[Cell, Sequence[BootValue]]) -> tuple[ControlBoot, ...]:
    """One residual per control boot, in boot order."""
    sums: dict[tuple[str, int], list[float]] = {}
    orders: dict[tuple[str, int], int] = {}
    for values in controls.values():
        if not values:
            continue
        mean = sum(v.log_value for v in values) / len(values)
        for v in values:
            sums.setdefault((v.arm, v.boot), []).append(v.log_value - mean)
            orders[(v.arm, v.boot)] = v.order
    boots = [
        ControlBoot(arm, boot, orders[(arm, boot)], sum(r) / len(r), len(r))
        for (arm, boot), r in sums.items()
    ]
    return tuple(sorted(boots, key=lambda b: (b.order, b.arm, b.boot)))


@dataclass(frozen=True, slots=True)
class ShapeArrays:
    """Batch fit: drift, its p, curvature, its p; one value per row of y."""

    drift: Array
    p_drift: Array
    curvature: Array
    p_curvature: Array


def fit_shapes(order: Array, y: Array) -> ShapeArrays:
    """Fit slope and curvature to every row of y (B, N) against the boot positions (N,); NaN = absent.

    Positions must be distinct (each boot has its own place in the boot order).
    """
    x = np.broadcast_to(np.asarray(order, dtype=float), y.shape)
    w = ~np.isnan(y)
    n = w.sum(axis=1)
    yz = np.where(w, y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        span = np.where(w, x, -np.inf).max(axis=1) - np.where(w, x, np.inf).min(axis=1)
        u = np.where(w, x - (np.where(w, x, 0.0).sum(axis=1) / n)[:, None], 0.0)
        sxx = (u**2).sum(axis=1)
        ybar = yz.sum(axis=1) / n
        slope = (u * yz).sum(axis=1) / sxx
        resid = np.where(w, yz - ybar[:, None] - slope[:, None] * u, 0.0)
        t_slope = slope / np.sqrt((resid**2).sum(axis=1) / (n - 2) / sxx)
    drift = np.where(n >= 2, slope * span, np.nan)
    p_drift = np.where(n >= 3, _two_sided(t_slope, np.maximum(n - 2, 1)), np.nan)
    design = np.stack([w.astype(float), u, u**2], axis=-1)  # (B, N, 3), zero rows where absent
    xtx = np.einsum("bni,bnj->bij", design, design)
    inv = np.linalg.pinv(xtx)
    coef = np.einsum("bij,bj->bi", inv, np.einsum("bni,bn->bi", design, yz))
    resid_q = np.where(w, yz - np.einsum("bni,bi->bn", design, coef), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        t_curv = coef[:, 2] / np.sqrt((resid_q**2).sum(axis=1) / (n - 3) * inv[:, 2, 2])
    curvature = np.where(n >= 3, coef[:, 2] * (span / 2.0) ** 2, np.nan)
    p_curv = np.where(n >= 4, _two_sided(t_curv, np.maximum(n - 3, 1)), np.nan)
    return ShapeArrays(drift, p_drift, curvature, p_curv)


def _two_sided(t: Array, df: npt.NDArray[np.int64]) -> Array:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(2.0 * tdist.t_sf(np.abs(t), df))


def failing(shapes: ShapeArrays, bound: float, alpha: float) -> npt.NDArray[np.bool_]:
    """Rows whose controls fail: a shape beyond the bound, or significant at alpha / SHAPES."""
    level = alpha / SHAPES
    return np.asarray(
        (np.abs(shapes.drift) > bound)
        | (np.abs(shapes.curvature) > bound)
        | (shapes.p_drift < level)
        | (shapes.p_curvature < level)
    )


def drift_bound(max_drift: float, floor: float | None) -> float:
    """The size beyond which a drift fails whatever its p-value (log scale)."""
    if not (math.isfinite(max_drift) and max_drift > 0):
        raise ValueError(f"max_drift must be a positive fraction, not {max_drift}")
    bound = math.log1p(max_drift)
    if floor is not None and math.isfinite(floor) and floor > 0:
        bound = min(bound, floor)
    return bound


def control_drift(
    controls: Mapping[Cell, Sequence[BootValue]],
    *,
    alpha: float,
    max_drift: float,
    floor: float | None = None,
) -> DriftCheck:
    """Check that the control boots are exchangeable across the campaign (module docstring).

    `floor` is, on log scale, the floor of the comparison the decision rests on (e.g. the promoted
    arm's `floor_first`), or None to judge size by `max_drift` alone (as the calibration does). The
    family's smallest floor is a poor choice: one cell with a lucky small variance sets it, and with
    min_effect 0 at 3 boots per arm it failed 43% of clean campaigns.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), not {alpha}")
    bound = drift_bound(max_drift, floor)
    boots = control_residuals(controls)
    nan = math.nan
    if len(boots) < 2:
        return DriftCheck(
            DriftStatus.UNTESTABLE, (DriftFinding.ONE_BOOT,), boots, nan, nan, nan, nan, bound, alpha
        )
    x = np.array([b.order for b in boots], dtype=float)
    if np.ptp(x) == 0:
        return DriftCheck(
            DriftStatus.UNTESTABLE, (DriftFinding.SAME_POSITION,), boots, nan, nan, nan, nan, bound, alpha
        )
    shapes = fit_shapes(x, np.array([[b.residual for b in boots]]))
    drift, p_drift = float(shapes.drift[0]), float(shapes.p_drift[0])
    curv, p_curv = float(shapes.curvature[0]), float(shapes.p_curvature[0])
    findings: list[DriftFinding] = []
    if len(boots) == 2 and abs(drift) > bound:
        findings.append(DriftFinding.PAIR_SIZE)
    elif len(boots) > 2:
        checks = (
            (abs(drift) > bound, DriftFinding.SLOPE_SIZE),
            (p_drift < alpha / SHAPES, DriftFinding.SLOPE_SIGNIFICANT),
            (abs(curv) > bound, DriftFinding.CURVATURE_SIZE),
            (p_curv < alpha / SHAPES, DriftFinding.CURVATURE_SIGNIFICANT),
        )
        findings.extend(f for hit, f in checks if hit)
    status = DriftStatus.FAIL if findings else DriftStatus.PASS
    return DriftCheck(status, tuple(findings), boots, drift, p_drift, curv, p_curv, bound, alpha)
