"""stats/tdist.py gives scipy.stats' own numbers for the t and noncentral t distributions."""

from __future__ import annotations

import numpy as np
import scipy.special
import scipy.stats as sps

from mtpverdict.stats import tdist


def test_identical_to_scipy_stats_on_a_grid() -> None:
    rng = np.random.default_rng(0)
    x, df = rng.normal(0, 3, 4000), rng.uniform(0.5, 60, 4000)
    nc, q = rng.normal(0, 3, 4000), rng.uniform(1e-6, 1 - 1e-6, 4000)
    assert np.array_equal(tdist.t_cdf(x, df), sps.t.cdf(x, df))
    assert np.array_equal(tdist.t_sf(x, df), sps.t.sf(x, df))
    assert np.array_equal(tdist.t_ppf(q, df), sps.t.ppf(q, df))
    for ours, theirs in (
        (tdist.nct_cdf(x, df, nc), sps.nct.cdf(x, df, nc)),
        (tdist.nct_sf(x, df, nc), sps.nct.sf(x, df, nc)),
    ):
        finite = np.isfinite(theirs)
        assert finite.mean() > 0.99 and np.array_equal(ours[finite], theirs[finite])
        assert np.isfinite(ours).all()  # where scipy.stats gives NaN, the tail's limit
    # points where special.nctdtr underflows to NaN: the cdf far above nc is 1, the sf there 0
    x_hi, df_hi, nc_hi = 6.350817594947628, 49.38110110486516, -5.513580414774272
    assert np.isnan(scipy.special.nctdtr(df_hi, nc_hi, x_hi))
    assert tdist.nct_cdf(x_hi, df_hi, nc_hi) == 1.0
    x_sf, df_sf, nc_sf = 5.853675233230346, 37.828550481020315, -4.883068456187475
    assert tdist.nct_sf(x_sf, df_sf, nc_sf) == 0.0 == sps.nct.sf(x_sf, df_sf, nc_sf)
    assert float(tdist.t_sf(2.0, 4.0)) == float(sps.t.sf(2.0, 4.0))  # scalars too


def test_clopper_pearson_is_statsmodels_beta_interval() -> None:
    from statsmodels.stats.proportion import proportion_confint

    rng = np.random.default_rng(1)
    nobs = rng.uniform(1, 5000, 3000)
    count = nobs * rng.uniform(0, 1, 3000)
    count[:30], count[30:60] = 0.0, nobs[30:60]  # the ends: 0 below, 1 above
    for alpha in (0.1, 0.05):
        low, high = tdist.clopper_pearson(count, nobs, alpha)
        theirs = proportion_confint(count, nobs, alpha=alpha, method="beta")
        assert np.array_equal(low, theirs[0]) and np.array_equal(high, theirs[1])
    assert tdist.clopper_pearson(7, 20, 0.1) == tuple(
        float(v) for v in proportion_confint(7, 20, 0.1, "beta")
    )
