"""Vectorised boot-level comparisons: per-arm variance (Welch), archived A/A history, leave-one-boot-out.

Arrays carry a leading batch axis so one code path serves a single campaign (batch of one) and the
procedure-level calibration (thousands of simulated campaigns at once). Shapes: B campaigns, A
candidate arms, C design cells, N boots (padded with NaN; a missing boot or cell is NaN).

Each group's boot variance is its own: the arm's from its boots, the controls' from theirs (off_A and
off_B are one configuration). Pooling across arms is never done, because a candidate's boot variance
can differ from off's (a drafter adds its own noise); archived A/A history of the seat is pooled into
the controls' variance (same configuration, same seat) and lends an arm booted once a variance, which
is then labelled `history`. A group whose boot sd is below MIN_CREDIBLE_SD is unknown variance, not
certainty. The degrees of freedom follow Welch-Satterthwaite with each term's own df.

Everything here is closed-form arithmetic on arrays; scipy supplies the t and noncentral-t
distributions. The tests check the Welch statistics against scipy.stats.ttest_ind(equal_var=False)
and Holm against statsmodels multipletests.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from mtpverdict.stats import tdist

Array = npt.NDArray[np.float64]

# A boot-level sd of a log statistic below 0.2% is below what this harness can measure: the
# collector's own decode error is 0.1-0.8% per stream (docs/performance.md, Collector accuracy) and the
# smallest boot-to-boot sd any pilot or seed here showed is 1.25% (docs/performance.md, Planning).
# Two boots that agree closer than that show luck, not certainty (issue 13 item 3: off_B identical to
# off_A, or 0.05% apart, promoted a null arm with p ~ 1e-13).
MIN_CREDIBLE_SD = 0.002


class Method(IntEnum):
    """How a comparison's variance was obtained (codes in the arrays; names in the typed results)."""

    WELCH = 0  # arm and controls each from their own boots
    POOLED = 1  # arm from its boots; controls pooled with archived A/A history of the seat
    HISTORY = 2  # the arm was booted once: its variance is the archived A/A history's
    UNKNOWN = 3  # no credible variance for one side
    MISSING = 4  # the arm has no boot in this cell


@dataclass(frozen=True, slots=True)
class CellTests:
    """Per (campaign, arm, cell) statistics; log scale; p-values one-sided, NaN where untestable."""

    n_arm: npt.NDArray[np.int64]
    n_control: npt.NDArray[np.int64]
    estimate: Array  # mean log arm - mean log control (natural sign)
    se: Array
    sd_arm: Array  # the arm's boot sd used (own boots, or history); NaN unknown
    sd_control: Array  # the controls' boot sd used (own boots, pooled with history where given)
    df: Array  # Welch-Satterthwaite
    ci_low: Array  # two-sided 1 - 2 alpha
    ci_high: Array
    p_better: Array  # H0: effect <= log(1 + min_effect) in the good direction
    p_short: Array  # H0: effect >= log(1 + min_effect): small p = shown below the threshold
    p_worse: Array  # H0: effect >= 0 in the good direction: small p = shown worse than off
    p_equivalent: Array  # TOST against +-log(1 + equivalence_margin)
    floor_first: Array  # shift + t(1 - alpha / m, df) se: Holm's first (most stringent) step
    floor_last: Array  # shift + t(1 - alpha, df) se: Holm's last step (every other arm rejected)
    method: npt.NDArray[np.int64]  # Method codes
    loo_p: Array  # largest p_better with any one boot left out (arm or control); NaN: no boot to drop
    loo_estimate: Array  # the good-direction estimate at that worst drop
    loo_drop: npt.NDArray[np.int64]  # index of that boot: j >= 0 an arm boot, -1 - j a control boot


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The levels and margins of one family, on log scale, and the family size."""

    alpha: float
    shift: float  # log(1 + min_effect)
    margin: float  # log(1 + equivalence_margin)
    family_size: int
    sign: float  # +1 when higher is better, -1 otherwise
    min_sd: float = MIN_CREDIBLE_SD


def _moments(x: Array) -> tuple[npt.NDArray[np.int64], Array, Array, Array]:
    """Count, sum, mean and sum of squared deviations along the last axis, ignoring NaN."""
    present = ~np.isnan(x)
    n = present.sum(axis=-1)
    total = np.where(present, x, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
    dev = np.where(present, x - mean[..., None], 0.0)
    return n, total, mean, (dev**2).sum(axis=-1)


def _satterthwaite(v_a: Array, df_a: Array, v_c: Array, df_c: Array) -> Array:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((v_a + v_c) ** 2 / (v_a**2 / df_a + v_c**2 / df_c))


def _control_variance(
    n_c: npt.NDArray[np.int64], ss_c: Array, hist_s2: Array, hist_df: Array, min_sd: float
) -> tuple[Array, Array, npt.NDArray[np.bool_]]:
    """Controls' s2 and df: own boots, pooled with history where given; and whether history was pooled."""
    own_df = np.maximum(n_c - 1, 0).astype(float)
    has_hist = hist_df > 0
    df = own_df + np.where(has_hist, hist_df, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = (ss_c + np.where(has_hist, hist_s2 * hist_df, 0.0)) / df
    credible = (df > 0) & (s2 >= min_sd**2)
    return np.where(credible, s2, np.nan), np.where(credible, df, np.nan), has_hist & (own_df >= 0)


def cell_tests(
    arm: Array, control: Array, hist_s2: Array, hist_df: Array, th: Thresholds, *, lend_history: bool = False
) -> CellTests:
    """Compare every arm with the controls at every cell.

    arm: (B, A, C, Na); control: (B, C, Nc); hist_s2, hist_df: broadcastable to (B, C), df 0 where no
    archived A/A variance exists for the cell. The history is the controls' (A/A): it is lent to an
    arm without a credible variance of its own only with lend_history (a policy's explicit choice; a
    drafter can add its own noise, so by default such an arm's variance is unknown).
    """
    n_a, sum_a, mean_a, ss_a = _moments(arm)
    n_c, sum_c, mean_c, ss_c = _moments(control)
    h_s2 = np.broadcast_to(hist_s2, n_c.shape).astype(float)
    h_df = np.broadcast_to(hist_df, n_c.shape).astype(float)
    s2_c, df_c, pooled = _control_variance(n_c, ss_c, h_s2, h_df, th.min_sd)
    s2_c, df_c, pooled = s2_c[:, None, :], df_c[:, None, :], pooled[:, None, :]
    n_cb, mean_cb = n_c[:, None, :], mean_c[:, None, :]
    lent = h_df if lend_history else np.zeros_like(h_df)
    s2_a, df_a, method = _arm_variance(n_a, ss_a, h_s2[:, None, :], lent[:, None, :], th.min_sd)
    method = np.where(
        (method <= Method.HISTORY) & (np.isnan(s2_c) | (n_cb == 0)),
        Method.UNKNOWN,
        np.where((method == Method.WELCH) & pooled, Method.POOLED, method),
    ).astype(np.int64)
    known = method <= Method.HISTORY
    with np.errstate(invalid="ignore", divide="ignore"):
        v_a, v_c = s2_a / n_a, s2_c / n_cb
        se = np.where(known, np.sqrt(v_a + v_c), np.nan)
        df = np.where(known, _satterthwaite(v_a, df_a, v_c, df_c), np.nan)
    estimate = np.where(n_a > 0, mean_a - mean_cb, np.nan)
    p_better, p_short, p_worse, p_equiv, t_ci, t_first = _t_tests(estimate, se, df, th)
    loo_p, loo_est, loo_drop = _leave_one_out(
        arm, control[:, None, :, :], (n_a, sum_a, s2_a), (n_cb, sum_c[:, None, :], s2_c), df, th
    )
    return CellTests(
        n_arm=n_a,
        n_control=np.broadcast_to(n_cb, n_a.shape).copy(),
        estimate=estimate,
        se=se,
        sd_arm=np.sqrt(s2_a),
        sd_control=np.broadcast_to(np.sqrt(s2_c), n_a.shape).copy(),
        df=df,
        ci_low=estimate - t_ci * se,
        ci_high=estimate + t_ci * se,
        p_better=p_better,
        p_short=p_short,
        p_worse=p_worse,
        p_equivalent=p_equiv,
        floor_first=th.shift + t_first * se,
        floor_last=th.shift + t_ci * se,
        method=method,
        loo_p=np.where(known, loo_p, np.nan),
        loo_estimate=np.where(known, loo_est, np.nan),
        loo_drop=loo_drop,
    )


def _arm_variance(
    n_a: npt.NDArray[np.int64], ss_a: Array, h_s2: Array, h_df: Array, min_sd: float
) -> tuple[Array, Array, npt.NDArray[np.int64]]:
    """The arm's s2 and df: its own boots when credible, else archived history; and the Method."""
    with np.errstate(invalid="ignore", divide="ignore"):
        own_s2 = ss_a / (n_a - 1)
    own_ok = (n_a >= 2) & (own_s2 >= min_sd**2)
    borrow = ~own_ok & (h_df > 0) & (h_s2 >= min_sd**2) & (n_a >= 1)
    s2_a = np.where(own_ok, own_s2, np.where(borrow, h_s2, np.nan))
    df_a = np.where(own_ok, n_a - 1.0, np.where(borrow, h_df, np.nan))
    method = np.where(
        n_a == 0,
        Method.MISSING,
        np.where(np.isnan(s2_a), Method.UNKNOWN, np.where(borrow, Method.HISTORY, Method.WELCH)),
    )
    return s2_a, df_a, method.astype(np.int64)


def _t_tests(estimate: Array, se: Array, df: Array, th: Thresholds) -> tuple[Array, ...]:
    """One-sided p-values (better, short, worse), TOST, and the t quantiles of the interval and floor."""
    good = th.sign * estimate
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN cells stay NaN
        z_shift = (good - th.shift) / se
        p_equiv = np.maximum(
            tdist.t_sf((estimate + th.margin) / se, df), tdist.t_cdf((estimate - th.margin) / se, df)
        )
        return (
            np.asarray(tdist.t_sf(z_shift, df)),
            np.asarray(tdist.t_cdf(z_shift, df)),
            np.asarray(tdist.t_cdf(good / se, df)),
            np.asarray(p_equiv),
            np.asarray(tdist.t_ppf(1.0 - th.alpha, df)),
            np.asarray(tdist.t_ppf(1.0 - th.alpha / max(th.family_size, 1), df)),
        )


def _leave_one_out(
    arm: Array,
    control: Array,
    arm_stats: tuple[npt.NDArray[np.int64], Array, Array],
    control_stats: tuple[npt.NDArray[np.int64], Array, Array],
    df: Array,
    th: Thresholds,
) -> tuple[Array, Array, npt.NDArray[np.int64]]:
    """The worst one-sided p_better over every single boot left out, arm or control.

    The boot left out leaves the mean; each group's variance stays the one estimated from all its
    boots (the removed boot's spread is still evidence of noise), and the standard error is that of
    the smaller sample. A group of one boot cannot lose it: no drop is tried there.
    """
    n_a, sum_a, s2_a = arm_stats
    n_c, sum_c, s2_c = control_stats
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_c = sum_c / n_c
        mean_a = sum_a / n_a
        # arm boot j left out: (B, A, C, Na)
        mean_a_loo = (sum_a[..., None] - arm) / (n_a[..., None] - 1)
        se_a_loo = np.sqrt(s2_a[..., None] / (n_a[..., None] - 1) + (s2_c / n_c)[..., None])
        z_a = (th.sign * (mean_a_loo - mean_c[..., None]) - th.shift) / se_a_loo
        # control boot j left out: (B, A, C, Nc)
        mean_c_loo = (sum_c[..., None] - control) / (n_c[..., None] - 1)
        se_c_loo = np.sqrt((s2_a / n_a)[..., None] + s2_c[..., None] / (n_c[..., None] - 1))
        z_c = (th.sign * (mean_a[..., None] - mean_c_loo) - th.shift) / se_c_loo
    z_a = np.where((n_a[..., None] >= 2) & ~np.isnan(arm), z_a, np.inf)
    z_c = np.where((n_c[..., None] >= 2) & ~np.isnan(control), z_c, np.inf)
    z = np.concatenate([z_a, np.broadcast_to(z_c, (*z_a.shape[:-1], z_c.shape[-1]))], axis=-1)
    worst = np.argmin(np.where(np.isnan(z), np.inf, z), axis=-1)
    z_worst = np.take_along_axis(z, worst[..., None], axis=-1)[..., 0]
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        p = np.asarray(tdist.t_sf(z_worst, df))
    n_arm_slots = arm.shape[-1]
    drop = np.where(worst < n_arm_slots, worst, -1 - (worst - n_arm_slots)).astype(np.int64)
    finite = np.isfinite(z_worst)
    estimate = _loo_estimate(worst, th, mean_a_loo, mean_c, mean_a, mean_c_loo, n_arm_slots)
    return np.where(finite, p, np.nan), np.where(finite, estimate, np.nan), np.where(finite, drop, 0)


def _loo_estimate(
    worst: npt.NDArray[np.intp],
    th: Thresholds,
    mean_a_loo: Array,
    mean_c: Array,
    mean_a: Array,
    mean_c_loo: Array,
    n_arm_slots: int,
) -> Array:
    """The good-direction estimate at the worst drop."""
    idx_a = np.clip(worst, 0, n_arm_slots - 1)[..., None]
    idx_c = np.clip(worst - n_arm_slots, 0, mean_c_loo.shape[-1] - 1)[..., None]
    from_arm = th.sign * (np.take_along_axis(mean_a_loo, idx_a, axis=-1)[..., 0] - mean_c)
    mean_c_loo_b = np.broadcast_to(mean_c_loo, (*mean_a.shape, mean_c_loo.shape[-1]))
    from_control = th.sign * (mean_a - np.take_along_axis(mean_c_loo_b, idx_c, axis=-1)[..., 0])
    return np.where(worst < n_arm_slots, from_arm, from_control)


def holm_along(p: Array) -> Array:
    """Holm step-down adjusted p-values along the last axis (each row one family); NaN counts as 1."""
    q = np.where(np.isnan(p), 1.0, p)
    m = q.shape[-1]
    if m == 0:
        return q
    order = np.argsort(q, axis=-1, kind="mergesort")
    ranked = np.take_along_axis(q, order, axis=-1) * np.arange(m, 0, -1)
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, axis=-1))
    out = np.empty_like(q)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out
