"""The nuisance matrix, small: every design x nuisance with fixed seeds; no cell may show false
promotions whose Clopper-Pearson lower bound exceeds 5% (bench/nuisance_calibration.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom
from statsmodels.stats.proportion import proportion_confint

from mtpverdict.sim import BootScenario, simulate_boots
from mtpverdict.stats.blocked import blocked_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import nuisance_calibration as nc  # noqa: E402
import procedure_calibration as pc  # noqa: E402

# per cell: enough that a cell whose true false-promotion rate is 10% has its lower bound above 5% in
# 96% of seeds (test below); ~69,000 campaigns in all, ~4 s of CPU (the batch code is vectorised)
CAMPAIGNS = 400
LIMIT = 0.05
CAUGHT = 0.10  # a true rate the criterion must catch
POWER = 0.95  # how often it must catch it


def _flagged(false: int, campaigns: int) -> bool:
    return bool(proportion_confint(false, campaigns, alpha=0.05, method="beta")[0] > LIMIT)


def test_the_criterion_catches_a_cell_at_twice_alpha() -> None:
    """Before: 50 campaigns a cell, where a 10% cell showed a lower bound above 5% in 23% of seeds."""
    flagged = [x for x in range(CAMPAIGNS + 1) if _flagged(x, CAMPAIGNS)]
    assert flagged == list(range(flagged[0], CAMPAIGNS + 1))  # the criterion is monotone in the count
    assert float(binom.sf(flagged[0] - 1, CAMPAIGNS, CAUGHT)) >= POWER
    assert float(binom.sf(flagged[0] - 1, CAMPAIGNS, LIMIT)) < 0.05  # and rarely flags a cell at alpha


def test_no_cell_of_the_matrix_shows_false_promotions_above_alpha() -> None:
    cells = nc.matrix(CAMPAIGNS)
    assert len(cells) == 172
    assert {c.design for c in cells} == set(nc.DESIGNS)
    schedule = {(c.nuisance, c.mode) for c in cells if c.design == "schedule"}
    assert schedule == {(n, m) for n in nc.ALL_NUISANCES if n != "device levels" for m in ("margin", "floor")}
    assert all(c.campaigns == CAMPAIGNS for c in cells)
    bad = [c for c in cells if _flagged(c.false, c.campaigns)]
    assert not bad, [(c.design, c.nuisance, c.mode, c.false) for c in bad]


def test_the_matrix_criterion_catches_the_earlier_layout() -> None:
    """The same criterion on the earlier device layout (off_A first, off_B last) with slow ends,
    decided by the procedure alone: its lower bound is far above 5%, so the matrix would fail."""
    sc = BootScenario(
        "old", pc.sweep(), boots=1, devices=8, device_sd=nc.DEVICE_SD, ends_slow=-0.05, drawn=False
    )
    batch = simulate_boots(sc, np.random.default_rng(nc.SEED), CAMPAIGNS)
    arm, control = batch.blocked()
    _, arrays = blocked_batch(arm, control, alpha=pc.ALPHA, equivalence_margin=pc.MARGIN)
    false = int((arrays.outcome == pc.BETTER).any(axis=1).sum())
    low = proportion_confint(false, CAMPAIGNS, alpha=0.05, method="beta")[0]
    assert low > LIMIT


@pytest.mark.parametrize("nuisance", ["hump 5%", "slow first boot 5%", "AR(1) 0.7"])
def test_the_new_nuisances_shape_the_boots(nuisance: str) -> None:
    settings = nc.NUISANCES[nuisance]
    sc = BootScenario("shape", pc.sweep(), boots=3, boot_sd=0.001, cell_sd=0.001, **settings)  # type: ignore[arg-type]
    batch = simulate_boots(sc, np.random.default_rng(1), 400)
    order = list(np.asarray(batch.control_order, dtype=int))  # off_A at 1, 6, 11; off_B at 5, 10, 15
    at = {p: batch.control[..., order.index(p)] for p in (1, 5, 6)}
    if nuisance == "hump 5%":  # position 6 of 15: 4u(1 - u) = 0.918 of the hump
        assert float((at[6] - at[1]).mean()) == pytest.approx(0.05 * 0.918, abs=0.005)
    elif nuisance == "slow first boot 5%":
        assert float((at[1] - at[6]).mean()) == pytest.approx(-0.05, abs=0.005)
    else:  # neighbouring boots share the AR(1) state
        corr = float(np.corrcoef(at[5][:, 0], at[6][:, 0])[0, 1])
        assert corr > 0.2


def test_campaigns_over_devices_draw_heavy_tailed_boots_when_asked() -> None:
    """Before: the devices simulator drew every boot normal, so the matrix's heavy-tails rows for the
    designs over devices measured normal boots."""
    from scipy.stats import kurtosis

    sc = BootScenario("tails", pc.sweep(), boots=2, devices=4, boot_tail_df=3.0, cell_sd=1e-4)
    batch = simulate_boots(sc, np.random.default_rng(3), 4000)
    excess = float(kurtosis(batch.control[:, 0, :].ravel()))
    assert excess > 2.0  # t with 3 df has infinite kurtosis; a normal's excess is 0


def test_one_device_drawn_lays_out_each_campaign_afresh() -> None:
    sc = BootScenario("drawn", pc.sweep(), boots=3, draw_one_device=True)
    batch = simulate_boots(sc, np.random.default_rng(4), 200)
    order = np.asarray(batch.control_order)
    assert order.shape == (200, 6) and len({tuple(row) for row in order}) > 100
    assert sorted(set(order.ravel().astype(int))) == list(range(1, 16))
