"""Control exchangeability: drift judged by size whatever its p-value, curvature, controls through the run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as sps

from mtpverdict.stats.drift import (
    DriftFinding,
    DriftStatus,
    control_drift,
    control_residuals,
    fit_shapes,
)
from mtpverdict.stats.procedure import BootValue, Cell

C1, C4 = ("chat", 1), ("chat", 4)
ALPHA = 0.05
MAX_DRIFT = 0.05


def controls(
    orders: list[int], residuals: list[float], cells: tuple[Cell, ...] = (C1, C4)
) -> dict[Cell, list[BootValue]]:
    """Control boots (off_A first half, off_B second half) with the given residuals in every cell."""
    half = len(orders) // 2
    values = []
    for i, (order, r) in enumerate(zip(orders, residuals, strict=True)):
        arm = "off_A" if i < half else "off_B"
        values.append((arm, i + 1, order, r))
    return {c: [BootValue(a, b, o, 4.0 + j + r) for a, b, o, r in values] for j, c in enumerate(cells)}


def old_rule_passes(orders: list[int], residuals: list[float]) -> bool:
    """decide/engine.py _drift_checks at ecda5f1, three or more control boots: fail only when the slope
    is significant at alpha AND the drift is beyond max_drift."""
    fit = sps.linregress(np.array(orders, dtype=float), np.array(residuals))
    drift = float(fit.slope * np.ptp(orders))
    return not (fit.pvalue < ALPHA and abs(drift) > math.log1p(MAX_DRIFT))


def _noisy_large_drift() -> tuple[list[int], list[float]]:
    """Three control boots drifting +37.0% first to last with slope p = 0.383 (issue 13 item 8)."""
    orders = [1, 8, 15]
    slope = math.log(1.37) / 14
    t = math.tan(math.pi * (1 - 0.383) / 2)  # two-sided p of a t with 1 df
    r = slope / (t * math.sqrt(6 / 98))
    u = np.array([-7.0, 0.0, 7.0])
    return orders, list(slope * u + r * np.array([1.0, -2.0, 1.0]))


def test_old_rule_passes_a_37_percent_drift_with_a_large_p_value() -> None:
    orders, residuals = _noisy_large_drift()
    fit = sps.linregress(orders, residuals)
    assert fit.pvalue == pytest.approx(0.383, abs=1e-6)
    assert math.expm1(fit.slope * 14) == pytest.approx(0.37)
    assert old_rule_passes(orders, residuals)


def test_a_drift_beyond_the_bound_fails_whatever_its_p_value() -> None:
    orders, residuals = _noisy_large_drift()
    check = control_drift(controls(orders, residuals), alpha=ALPHA, max_drift=MAX_DRIFT)
    assert check.p_drift == pytest.approx(0.383, abs=1e-6)
    assert math.expm1(check.drift) == pytest.approx(0.37)
    assert check.status == DriftStatus.FAIL
    assert DriftFinding.SLOPE_SIZE in check.findings


def test_a_drift_beyond_the_floor_fails_when_the_floor_is_below_the_policy_bound() -> None:
    orders = [1, 5, 6, 10, 11, 15]
    residuals = [-0.02, 0.005, -0.005, 0.005, -0.005, 0.02]  # ~+4% first to last
    within = control_drift(controls(orders, residuals), alpha=0.001, max_drift=MAX_DRIFT)
    assert within.status == DriftStatus.PASS
    beyond = control_drift(controls(orders, residuals), alpha=0.001, max_drift=MAX_DRIFT, floor=0.02)
    assert beyond.bound == 0.02 and beyond.status == DriftStatus.FAIL


def test_old_rule_misses_first_and_last_boots_both_slow() -> None:
    orders = [1, 5, 6, 10, 11, 15]
    residuals = [-0.04, 0.002, -0.001, 0.001, -0.002, -0.04]
    assert old_rule_passes(orders, residuals)


def test_curvature_catches_first_and_last_boots_both_slow() -> None:
    orders = [1, 5, 6, 10, 11, 15]
    residuals = [-0.04, 0.002, -0.001, 0.001, -0.002, -0.04]
    check = control_drift(controls(orders, residuals), alpha=ALPHA, max_drift=MAX_DRIFT)
    assert abs(check.drift) < 0.001 and check.p_drift > 0.5  # no slope at all
    assert check.curvature < -0.03 and check.p_curvature < ALPHA / 2
    assert check.status == DriftStatus.FAIL and DriftFinding.CURVATURE_SIGNIFICANT in check.findings


def test_control_boots_through_the_campaign_are_fitted_in_their_order() -> None:
    orders = [1, 4, 8, 12, 16, 20]  # a control boot in every round, not only at the ends
    rng = np.random.default_rng(2)
    residuals = list(rng.normal(0, 0.004, 6))
    check = control_drift(controls(orders, residuals), alpha=ALPHA, max_drift=MAX_DRIFT)
    assert [b.order for b in check.boots] == orders
    assert check.status == DriftStatus.PASS


def test_one_pair_is_judged_by_size_and_one_boot_is_untestable() -> None:
    close = control_drift(controls([1, 15], [0.0, 0.01]), alpha=ALPHA, max_drift=MAX_DRIFT)
    assert close.status == DriftStatus.PASS and math.isnan(close.p_drift)
    far = control_drift(controls([1, 15], [0.0, 0.08]), alpha=ALPHA, max_drift=MAX_DRIFT)
    assert far.status == DriftStatus.FAIL and far.findings == (DriftFinding.PAIR_SIZE,)
    one = control_drift({C1: [BootValue("off_A", 1, 1, 4.0)]}, alpha=ALPHA, max_drift=MAX_DRIFT)
    assert one.status == DriftStatus.UNTESTABLE


def test_residuals_are_centred_per_cell_and_averaged_over_a_boots_cells() -> None:
    cells = {
        C1: [BootValue("off_A", 1, 1, 1.0), BootValue("off_B", 1, 9, 1.2)],
        C4: [BootValue("off_A", 1, 1, 3.0), BootValue("off_B", 1, 9, 3.0)],
    }
    boots = control_residuals(cells)
    assert [round(b.residual, 9) for b in boots] == [-0.05, 0.05]
    assert [b.cells for b in boots] == [2, 2]


def test_batch_fit_matches_statsmodels_with_absent_boots() -> None:
    rng = np.random.default_rng(4)
    x = np.array([1, 5, 6, 10, 11, 15, 16, 20.0])
    y = rng.normal(0, 0.02, (4, 8))
    y[1, 3] = np.nan
    y[2, [0, 7]] = np.nan
    shapes = fit_shapes(x, y)
    for i in range(4):
        keep = ~np.isnan(y[i])
        u = x[keep] - x[keep].mean()
        span = np.ptp(x[keep])
        linear = sm.OLS(y[i][keep], sm.add_constant(u)).fit()
        quad = sm.OLS(y[i][keep], np.column_stack([np.ones(keep.sum()), u, u**2])).fit()
        assert shapes.drift[i] == pytest.approx(linear.params[1] * span)
        assert shapes.p_drift[i] == pytest.approx(linear.pvalues[1])
        assert shapes.curvature[i] == pytest.approx(quad.params[2] * (span / 2) ** 2)
        assert shapes.p_curvature[i] == pytest.approx(quad.pvalues[2])


def test_a_bad_bound_is_an_error() -> None:
    with pytest.raises(ValueError, match="max_drift"):
        control_drift(controls([1, 15], [0.0, 0.0]), alpha=ALPHA, max_drift=0.0)
