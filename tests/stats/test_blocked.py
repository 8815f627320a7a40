"""The blocked family procedure: within-device comparisons, the floor from within-device controls."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from mtpverdict.stats.blocked import (
    BlockedMethod,
    DeviceBootValue,
    blocked_batch,
    blocked_family_procedure,
    device_spread,
)
from mtpverdict.stats.procedure import (
    BootValue,
    Outcome,
    VarianceMethod,
    Why,
    batch_procedure,
    family_procedure,
)
from mtpverdict.stats.welch import Method

ALPHA, MARGIN = 0.05, 0.03
CELL = ("chat", 1)


def _values(
    arm: str, device: str, logs: list[float], first_boot: int, first_order: int
) -> list[DeviceBootValue]:
    return [
        DeviceBootValue(arm, first_boot + 2 * k, first_order + 10 * k, device, v) for k, v in enumerate(logs)
    ]


def test_one_device_is_the_unblocked_procedure_number_for_number() -> None:
    rng = np.random.default_rng(1)
    arm = rng.normal(0.05, 0.02, (200, 3, 2, 1, 3))
    arm[:, 2, 1, 0, 2] = np.nan  # an arm with a boot missing at one cell
    control = rng.normal(0.0, 0.02, (200, 2, 1, 6))
    blocked, arrays = blocked_batch(arm, control, alpha=ALPHA, equivalence_margin=MARGIN)
    plain, plain_arrays = batch_procedure(
        arm[:, :, :, 0], control[:, :, 0], alpha=ALPHA, equivalence_margin=MARGIN
    )
    np.testing.assert_array_equal(blocked.method == BlockedMethod.BLOCKED, plain.method == Method.WELCH)
    assert (blocked.method == BlockedMethod.BLOCKED).mean() > 0.9
    for name in ("estimate", "se", "df", "p_better", "p_equivalent", "p_worse", "floor_first", "loo_p"):
        np.testing.assert_allclose(
            getattr(blocked.tests, name), getattr(plain, name), rtol=1e-10, err_msg=name
        )
    np.testing.assert_array_equal(arrays.outcome, plain_arrays.outcome)


def test_the_typed_call_on_one_device_runs_family_procedure_unchanged() -> None:
    controls = {
        CELL: _values("off_A", "gpu0", [0.0, 0.01, -0.02], 1, 1) + _values("off_B", "gpu0", [0.02], 1, 9)
    }
    candidates = {"k1": {CELL: _values("k1", "gpu0", [0.2, 0.19, 0.22], 1, 2)}}
    found = blocked_family_procedure(controls, candidates, [CELL], alpha=ALPHA, equivalence_margin=MARGIN)
    plain = family_procedure(
        {CELL: [BootValue(v.arm, v.boot, v.order, v.log_value) for v in controls[CELL]]},
        {"k1": {CELL: [BootValue(v.arm, v.boot, v.order, v.log_value) for v in candidates["k1"][CELL]]}},
        [CELL],
        alpha=ALPHA,
        equivalence_margin=MARGIN,
    )
    assert not found.blocked and found.spread is None
    assert found.family == plain


def test_device_levels_cancel_and_unblocked_analysis_drowns_in_them() -> None:
    rng = np.random.default_rng(2)
    arm = rng.normal(0.08, 0.02, (300, 1, 1, 4, 2))
    control = rng.normal(0.0, 0.02, (300, 1, 4, 4))
    level = rng.normal(0.0, 0.1, (300, 1, 4))  # device effects 5x the boot noise
    shifted_arm, shifted_control = arm + level[:, None, :, :, None], control + level[..., None]
    base, _ = blocked_batch(arm, control, alpha=ALPHA, equivalence_margin=MARGIN)
    moved, moved_arrays = blocked_batch(shifted_arm, shifted_control, alpha=ALPHA, equivalence_margin=MARGIN)
    for name in ("estimate", "se", "df", "p_better", "loo_p"):
        np.testing.assert_allclose(
            getattr(moved.tests, name), getattr(base.tests, name), rtol=1e-9, atol=1e-12
        )
    flat, flat_arrays = batch_procedure(
        shifted_arm.reshape(300, 1, 1, -1),
        shifted_control.reshape(300, 1, -1),
        alpha=ALPHA,
        equivalence_margin=MARGIN,
    )
    better = Outcome.BETTER.value
    blocked_power = (np.asarray(moved_arrays.outcome) == 0).mean()
    flat_power = (np.asarray(flat_arrays.outcome) == 0).mean()
    assert better == "better" and blocked_power > 0.9 and flat_power < 0.3
    assert np.median(flat.se) > 3 * np.median(moved.tests.se)


def test_one_arm_boot_per_device_uses_the_spread_of_the_per_device_differences() -> None:
    rng = np.random.default_rng(3)
    devices = 6
    arm = rng.normal(0.04, 0.03, (50, 1, 1, devices, 1))
    control = rng.normal(0.0, 0.03, (50, 1, devices, 2)) + rng.normal(0, 0.2, (50, 1, devices, 1))
    arm = arm + (control.mean(-1, keepdims=True)[:, None] - arm * 0)  # the same device level
    found, _ = blocked_batch(arm, control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=0.0)
    assert (found.method == BlockedMethod.DEVICES).all()
    delta = arm[:, 0, 0, :, 0] - control[:, 0].mean(-1)  # balanced: equal weights, a one-sample t
    expected = sps.ttest_1samp(delta, 0.0, axis=-1, alternative="greater")
    np.testing.assert_allclose(found.tests.p_better[:, 0, 0], expected.pvalue, rtol=1e-9)
    np.testing.assert_allclose(found.tests.df[:, 0, 0], devices - 1)


def test_blocked_variance_is_pooled_within_device_by_hand() -> None:
    arm_a = {"d0": [0.10, 0.14], "d1": [0.51, 0.55, 0.50]}
    ctrl = {"d0": [0.00, 0.03, 0.01], "d1": [0.40, 0.45]}
    ss_a = sum(sum((v - np.mean(vs)) ** 2 for v in vs) for vs in arm_a.values())
    ss_c = sum(sum((v - np.mean(vs)) ** 2 for v in vs) for vs in ctrl.values())
    s2_a, s2_c = ss_a / 3, ss_c / 3
    w = {d: len(arm_a[d]) * len(ctrl[d]) / (len(arm_a[d]) + len(ctrl[d])) for d in arm_a}
    big_w = sum(w.values())
    estimate = sum(w[d] * (np.mean(arm_a[d]) - np.mean(ctrl[d])) for d in w) / big_w
    v_a = s2_a * sum(w[d] ** 2 / len(arm_a[d]) for d in w) / big_w**2
    v_c = s2_c * sum(w[d] ** 2 / len(ctrl[d]) for d in w) / big_w**2
    df = (v_a + v_c) ** 2 / (v_a**2 / 3 + v_c**2 / 3)
    arm = np.full((1, 1, 1, 2, 3), np.nan)
    control = np.full((1, 1, 2, 3), np.nan)
    for d, name in enumerate(("d0", "d1")):
        arm[0, 0, 0, d, : len(arm_a[name])] = arm_a[name]
        control[0, 0, d, : len(ctrl[name])] = ctrl[name]
    found, _ = blocked_batch(arm, control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=0.0)
    assert found.method[0, 0, 0] == BlockedMethod.BLOCKED
    assert found.tests.estimate[0, 0, 0] == pytest.approx(estimate)
    assert found.tests.se[0, 0, 0] == pytest.approx(math.sqrt(v_a + v_c))
    assert found.tests.df[0, 0, 0] == pytest.approx(df)
    assert found.tests.p_better[0, 0, 0] == pytest.approx(sps.t.sf(estimate / math.sqrt(v_a + v_c), df))


def _campaign(
    rng: np.random.Generator, devices: int, effect: float, *, outlier: float = 0.0
) -> tuple[
    dict[tuple[str, int], list[DeviceBootValue]], dict[str, dict[tuple[str, int], list[DeviceBootValue]]]
]:
    controls: list[DeviceBootValue] = []
    k1: list[DeviceBootValue] = []
    for d in range(devices):
        level = float(rng.normal(0, 0.1))
        name = f"gpu{d}"
        for r in range(2):
            boot = r * devices + d + 1
            controls.append(
                DeviceBootValue("off_A", boot, 10 * d + 4 * r + 1, name, level + rng.normal(0, 0.01))
            )
            k1.append(
                DeviceBootValue(
                    "k1",
                    boot,
                    10 * d + 4 * r + 2,
                    name,
                    level + effect + rng.normal(0, 0.01) + (outlier if d == r == 0 else 0),
                )
            )
            controls.append(
                DeviceBootValue("off_B", boot, 10 * d + 4 * r + 3, name, level + rng.normal(0, 0.01))
            )
    return {CELL: controls}, {"k1": {CELL: k1}}


def test_typed_call_reports_devices_their_effects_and_spread() -> None:
    controls, candidates = _campaign(np.random.default_rng(4), 4, math.log(1.2))
    found = blocked_family_procedure(controls, candidates, [CELL], alpha=ALPHA, equivalence_margin=MARGIN)
    assert found.blocked and found.devices == ("gpu0", "gpu1", "gpu2", "gpu3")
    arm = found.family.arm("k1")
    assert arm.outcome == Outcome.BETTER and arm.cells[0].variance == VarianceMethod.BLOCKED
    assert "within each of 4 devices" in arm.cells[0].variance_reason
    assert arm.loo_boot is not None and "(gpu" in arm.loo_boot
    assert len(found.effects) == 4 and all(abs(e.estimate - math.log(1.2)) < 0.05 for e in found.effects)
    assert found.spread is not None and 0.03 < found.spread.device_sd < 0.3 and found.spread.boot_sd < 0.03


def _loo_by_hand(
    arm: list[list[float]], ctrl: list[list[float]], s2_a: float, s2_c: float, spread: float, df: float
) -> float:
    """The worst p_better over every single boot left out, recomputed from the definition."""
    worst = 0.0
    drops = [("a", d, k) for d, vs in enumerate(arm) for k in range(len(vs))]
    drops += [("c", d, k) for d, vs in enumerate(ctrl) for k in range(len(vs))]
    for group, d0, k0 in drops:
        if sum(map(len, arm if group == "a" else ctrl)) < 2:
            continue
        a = [
            [v for k, v in enumerate(vs) if not (group == "a" and d == d0 and k == k0)]
            for d, vs in enumerate(arm)
        ]
        c = [
            [v for k, v in enumerate(vs) if not (group == "c" and d == d0 and k == k0)]
            for d, vs in enumerate(ctrl)
        ]
        used = [d for d in range(len(a)) if a[d] and c[d]]
        w = {d: len(a[d]) * len(c[d]) / (len(a[d]) + len(c[d])) for d in used}
        big_w = sum(w.values())
        est = sum(w[d] * (np.mean(a[d]) - np.mean(c[d])) for d in used) / big_w
        if math.isnan(spread):
            var = (
                s2_a * sum(w[d] ** 2 / len(a[d]) for d in used)
                + s2_c * sum(w[d] ** 2 / len(c[d]) for d in used)
            ) / big_w**2
        else:
            var = spread / big_w
        worst = max(worst, float(sps.t.sf(est / math.sqrt(var), df)))
    return worst


@pytest.mark.parametrize("per_device", [1, 3])
def test_leave_one_boot_out_matches_the_definition(per_device: int) -> None:
    rng = np.random.default_rng(per_device)
    devices = 4
    arm = np.full((1, 1, 1, devices, per_device), np.nan)
    control = np.full((1, 1, devices, 2 * per_device), np.nan)
    arm[0, 0, 0] = rng.normal(0.05, 0.02, (devices, per_device))
    control[0, 0] = rng.normal(0.0, 0.02, (devices, 2 * per_device))
    arm[0, 0, 0, 1, per_device - 1] = np.nan  # unbalanced: one device has a boot fewer
    found, _ = blocked_batch(arm, control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=0.0)
    tests = found.tests
    by_devices = found.method[0, 0, 0] == BlockedMethod.DEVICES
    assert by_devices == (per_device == 1)
    arm_lists = [[v for v in row if not np.isnan(v)] for row in arm[0, 0, 0]]
    ctrl_lists = [list(row) for row in control[0, 0]]
    expected = _loo_by_hand(
        arm_lists,
        ctrl_lists,
        float(tests.sd_arm[0, 0, 0]) ** 2,
        float(tests.sd_control[0, 0, 0]) ** 2,
        float(tests.sd_arm[0, 0, 0]) ** 2 if by_devices else math.nan,
        float(tests.df[0, 0, 0]),
    )
    assert tests.loo_p[0, 0, 0] == pytest.approx(expected, rel=1e-9)


def test_without_a_second_shared_device_or_a_replicate_the_variance_is_unknown() -> None:
    controls = {CELL: _values("off_A", "gpu0", [0.0], 1, 1) + _values("off_B", "gpu0", [0.01], 1, 3)}
    candidates = {"k1": {CELL: _values("k1", "gpu0", [0.2], 1, 2) + _values("k1", "gpu1", [0.5], 2, 5)}}
    found = blocked_family_procedure(controls, candidates, [CELL], alpha=ALPHA, equivalence_margin=MARGIN)
    arm = found.family.arm("k1")
    assert arm.outcome == Outcome.INCONCLUSIVE and arm.why == Why.UNKNOWN_VARIANCE
    assert arm.cells[0].variance_reason.startswith("unknown:")


def test_device_spread_recovers_the_components() -> None:
    rng = np.random.default_rng(6)
    groups, devices, boots, logs = [], [], [], []
    for d in range(10):
        level = rng.normal(0, 0.1)
        for b in range(4):
            shift = rng.normal(0, 0.02)
            for cell in ("c1", "c4"):
                groups.append(f"off|{cell}")
                devices.append(f"d{d}")
                boots.append(f"d{d}#{b}")
                logs.append(level + shift + rng.normal(0, 0.01))
    spread = device_spread(groups, devices, boots, logs)
    assert spread.devices == 10
    assert 0.05 < spread.device_sd < 0.2 and 0.01 < spread.boot_sd < 0.04 and 0.005 < spread.cell_sd < 0.02
    with pytest.raises(ValueError, match="two devices"):
        device_spread(groups[:8], ["d0"] * 8, boots[:8], logs[:8])


# ---- a fixed layout under drift: each arm against the controls' drift line at its own positions -----

LATE_SEED = 15  # order_seed whose 8 x 1 layout puts k1 at mean position 4.25, the controls at 2.62
Grid = dict[tuple[str, int], list[DeviceBootValue]]


def _drift_campaign(slope: float, noise: float, rng: np.random.Generator) -> tuple[Grid, dict[str, Grid]]:
    """8 devices x 1 round laid out from LATE_SEED as collect lays it out; every arm null; each boot
    `slope` per position on its device slower or faster, plus noise."""
    from mtpverdict.stats.layout import layout

    arms = ["off_A", "k1", "k2", "k3", "off_B"]
    values: dict[str, list[DeviceBootValue]] = {a: [] for a in arms}
    for b in layout(arms, devices=8, rounds=1, seed=LATE_SEED):
        on_device = (b.order - 1) // 8 + 1
        log = slope * on_device + float(rng.normal(0.0, noise)) + 0.1 * b.device
        values[b.arm].append(DeviceBootValue(b.arm, b.boot, b.order, f"gpu{b.device}", log))
    controls = {CELL: values["off_A"] + values["off_B"]}
    return controls, {a: {CELL: values[a]} for a in ("k1", "k2", "k3")}


def test_a_late_null_arm_is_compared_with_the_controls_drift_line_not_their_mean() -> None:
    """Before: the per-device differences carried the drift times the arm's position gap, so with a
    1.25% drift per position the late k1 (4.25 against 2.62) read +2.0% and was promoted at
    min_effect 0."""
    controls, arms = _drift_campaign(0.0125, 0.004, np.random.default_rng(3))
    found = blocked_family_procedure(
        controls, arms, (CELL,), alpha=ALPHA, equivalence_margin=MARGIN, min_effect=0.0
    )
    k1 = found.family.arm("k1")
    assert abs(k1.cells[0].estimate) < 0.006
    assert k1.outcome is not Outcome.BETTER
    assert all(found.family.arm(a).outcome is not Outcome.BETTER for a in ("k1", "k2", "k3"))


def test_a_fixed_late_layout_under_drift_keeps_false_promotions_at_alpha() -> None:
    """The seed-15 layout, 5% drift over each device, min_effect 0, 2000 campaigns: compared with the
    controls' mean the late arm is promoted 8.5% of the time; with their drift line, under 5%."""
    import sys
    from pathlib import Path

    from statsmodels.stats.proportion import proportion_confint

    from mtpverdict.sim import BootScenario, simulate_boots

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import procedure_calibration as pc

    sc = BootScenario("late", pc.sweep(), boots=1, devices=8, drift_total=0.05, layout_seed=LATE_SEED)
    batch = simulate_boots(sc, np.random.default_rng([99, LATE_SEED]), 2000)
    arm, control = batch.blocked()
    rates = {}
    for adjusted in (False, True):
        _, arrays = blocked_batch(
            arm,
            control,
            alpha=ALPHA,
            equivalence_margin=MARGIN,
            min_effect=0.0,
            positions=batch.positions() if adjusted else None,
        )
        rates[adjusted] = int((arrays.outcome == pc.BETTER).any(axis=1).sum())
    assert proportion_confint(rates[False], 2000, alpha=0.05, method="beta")[0] > 0.05
    assert proportion_confint(rates[True], 2000, alpha=0.05, method="beta")[1] < 0.05


def test_a_fixed_order_layout_with_slow_device_ends_keeps_false_promotions_at_alpha() -> None:
    """off_A first and off_B last on every round (records written before collect drew the order),
    4 devices x 2 rounds, each device's first and last boot 3% slow, min_effect 0, 2000 campaigns.
    Before: the drift line fitted only a slope, so the slow controls at the ends read as a null arm
    being faster and 11% of campaigns promoted one; the line now fits ends against middle too."""
    import sys
    from pathlib import Path

    from statsmodels.stats.proportion import proportion_confint

    from mtpverdict.sim import BootScenario, simulate_boots

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import procedure_calibration as pc

    sc = BootScenario("fixed ends", pc.sweep(), boots=2, devices=4, drawn=False, ends_slow=-0.03)
    batch = simulate_boots(sc, np.random.default_rng([99, 26]), 2000)
    arm, control = batch.blocked()
    _, arrays = blocked_batch(
        arm, control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=0.0, positions=batch.positions()
    )
    promoted = int((arrays.outcome == pc.BETTER).any(axis=1).sum())
    assert proportion_confint(promoted, 2000, alpha=0.05, method="beta")[1] < 0.05
