"""Pilots: variance components, the design and the costs a pilot campaign's results show."""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

from mtpverdict.errors import InputError, Problem
from mtpverdict.plan.model import (
    MIN_BOOT_DF,
    Costs,
    Design,
    VarianceComponents,
)

if TYPE_CHECKING:
    from mtpverdict.formats.results_io import Results


def stated_components(boot_sd: float, run_sd: float) -> VarianceComponents:
    """Variance components given by the user (log-scale sds, e.g. 0.02 for 2%)."""
    for name, value in (("--boot-sd", boot_sd), ("--run-sd", run_sd)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a non-negative standard deviation, not {value}")
    return VarianceComponents(boot_sd=boot_sd, run_sd=run_sd, boot_df=0, source="stated")


def _counted_runs(
    results: Results, metric: str, include_cold: bool
) -> tuple[list[str], list[str], list[float]]:
    """(configuration|cell label, boot label, log value) of every counted run of `metric`."""
    from mtpverdict.stats.runs import run_table, values_table

    values = values_table(run_table(results.requests), results.summaries)
    values = values[(values["metric"] == metric) & values["runs_known"].astype(bool)]
    if not include_cold:
        values = values[~values["cold"].astype(bool)]
    config = {a.name: (f"control:{a.family}" if a.is_control else a.name) for a in results.campaign.arms}
    cells: list[str] = []
    boots: list[str] = []
    logs: list[float] = []
    for arm, boot, workload, conc, value in zip(
        values["arm"], values["boot"], values["workload"], values["concurrency"], values["value"], strict=True
    ):
        cells.append(f"{config[str(arm)]}|{workload}|{int(conc)}")
        boots.append(f"{arm}#{int(boot)}")
        logs.append(math.log(float(value)))
    return cells, boots, logs


def pilot_design(results: Results, metric: str = "decode_tps") -> Design:
    """Depths, control arms and cells of a pilot campaign (the largest family)."""
    campaign = results.campaign
    depths = max((len(campaign.candidates(f)) for f in campaign.families), default=0)
    controls = max((len(campaign.controls(f)) for f in campaign.families), default=0)
    req = results.requests
    cells = len(set(zip(req["workload"], req["concurrency"], strict=True))) if len(req) else 1
    if not len(req) and len(results.summaries):
        s = results.summaries[results.summaries["metric"] == metric]
        cells = max(1, len(set(zip(s["workload"], s["concurrency"], strict=True))))
    return Design(depths=max(depths, 1), control_arms=max(controls, 1), cells=max(cells, 1))


def pilot_components(
    results: Results,
    *,
    metric: str = "decode_tps",
    include_cold: bool = False,
    boot_sd: float | None = None,
    run_sd: float | None = None,
) -> VarianceComponents:
    """Boot-to-boot and run-to-run sd of log `metric` from a pilot campaign.

    statsmodels mixedlm (REML): fixed effects per configuration and cell, the boot as a random
    intercept shared by every cell it measured, runs as the residual. A pilot whose arms were each
    booted once cannot separate the two (each boot shift is confounded with its arm): then the boot
    sd must be stated, and the run sd comes from the spread of runs inside each boot and cell.
    """
    source = results.path
    cells, boots, logs = _counted_runs(results, metric, include_cold)
    if len(logs) < 2:
        raise InputError([Problem(source, f"the pilot has fewer than two counted {metric} runs")])
    per_arm_boots: dict[str, set[str]] = {}
    for boot in boots:
        per_arm_boots.setdefault(boot.split("#", 1)[0], set()).add(boot)
    if max(len(b) for b in per_arm_boots.values()) < 2 and boot_sd is None:
        raise InputError(
            [
                Problem(
                    source,
                    "every arm was booted once: boot-to-boot variance cannot be separated from "
                    "run-to-run variance (each boot is confounded with its arm); give --boot-sd, or "
                    "pilot with two or more boots of at least one arm",
                )
            ]
        )
    within_sd, within_df = _within_boot_sd(cells, boots, logs)
    notes: list[str] = []
    if max(len(b) for b in per_arm_boots.values()) < 2:
        if within_df < 1:
            raise InputError(
                [
                    Problem(
                        source, "no boot measured a cell twice: the run sd cannot be estimated; give --run-sd"
                    )
                ]
            )
        assert boot_sd is not None
        return VarianceComponents(
            boot_sd=boot_sd,
            run_sd=run_sd if run_sd is not None else within_sd,
            boot_df=0,
            source="boot sd stated; run sd from runs inside each boot and cell"
            if run_sd is None
            else "stated",
            notes=("one boot per arm: the boot-to-boot sd is the stated one, not measured",),
        )
    fitted_boot, fitted_run, boot_df, fit_notes = _mixedlm(cells, boots, logs, source)
    notes.extend(fit_notes)
    parts = []
    if boot_sd is not None:
        parts.append("boot sd stated")
    if run_sd is not None:
        parts.append("run sd stated")
    origin = "pilot, mixedlm REML (boot random intercept)"
    return VarianceComponents(
        boot_sd=boot_sd if boot_sd is not None else fitted_boot,
        run_sd=run_sd if run_sd is not None else fitted_run,
        boot_df=boot_df,
        source=origin + (f"; {', '.join(parts)}" if parts else ""),
        notes=tuple(notes),
    )


def _within_boot_sd(cells: list[str], boots: list[str], logs: list[float]) -> tuple[float, int]:
    groups: dict[tuple[str, str], list[float]] = {}
    for cell, boot, value in zip(cells, boots, logs, strict=True):
        groups.setdefault((cell, boot), []).append(value)
    ss = 0.0
    df = 0
    for values in groups.values():
        if len(values) >= 2:
            mean = sum(values) / len(values)
            ss += sum((v - mean) ** 2 for v in values)
            df += len(values) - 1
    return (math.sqrt(ss / df) if df else math.nan), df


def _mixedlm(
    cells: list[str], boots: list[str], logs: list[float], source: str
) -> tuple[float, float, int, list[str]]:
    import numpy as np
    import pandas as pd
    import statsmodels.formula.api as smf

    frame = pd.DataFrame({"y": logs, "cell": cells, "boot": boots})
    configs = {c.split("|", 1)[0] for c in cells}
    boot_df = len(set(boots)) - len(configs)
    if boot_df < MIN_BOOT_DF:
        raise InputError(
            [Problem(source, "no configuration was booted twice: give --boot-sd or pilot with more boots")]
        )
    # statsmodels judges the boundary on an absolute scale (a variance below 0.01), so fit on y divided
    # by its spread around the cell means and scale the variances back
    spread = float((frame["y"] - frame.groupby("cell")["y"].transform("mean")).std())
    if not (math.isfinite(spread) and spread > 0):
        raise InputError([Problem(source, "every run of a cell has the same value: no noise to estimate")])
    frame["y"] = frame["y"] / spread
    formula = "y ~ C(cell)" if frame["cell"].nunique() > 1 else "y ~ 1"
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = smf.mixedlm(formula, frame, groups=frame["boot"]).fit(reml=True)
        except (np.linalg.LinAlgError, ValueError) as exc:
            raise InputError([Problem(source, f"the mixed model could not be fitted: {exc}")]) from None
    boot_var = float(np.asarray(fit.cov_re)[0, 0]) * spread**2
    run_var = float(fit.scale) * spread**2
    if not (math.isfinite(boot_var) and math.isfinite(run_var)):
        raise InputError([Problem(source, "the mixed model gave no finite variance; the pilot is too small")])
    for w in caught:
        text = str(w.message).splitlines()[0]
        if "boundary" in text.lower():
            notes.append(
                "the boot-to-boot variance is at or near zero next to the run-to-run variance (the "
                "mixed model's boundary): the pilot saw little spread between boots"
            )
        else:
            notes.append(f"mixed model: {text}")
    return math.sqrt(max(boot_var, 0.0)), math.sqrt(max(run_var, 0.0)), boot_df, sorted(set(notes))


def pilot_costs(results: Results) -> Costs:
    """Mean seconds to ready of the pilot's boots and mean wall seconds of its measured runs."""
    boots = results.boots
    ready = [
        float(s)
        for s, status in zip(boots["ready_seconds"], boots["status"], strict=True)
        if status == "ready" and s is not None and math.isfinite(float(s))
    ]
    req = results.requests
    run_seconds: float | None = None
    runs = 0
    if len(req):
        measured = req[~req["warmup"].astype(bool)]
        spans = (
            measured.groupby(["arm", "boot", "workload", "concurrency", "rep"])
            .agg(start=("t_start", "min"), end=("t_end", "max"))
            .dropna()
        )
        runs = len(spans)
        if runs:
            run_seconds = float((spans["end"] - spans["start"]).mean())
    return Costs(
        boot_seconds=sum(ready) / len(ready) if ready else None,
        run_seconds=run_seconds,
        source=f"pilot: {len(ready)} boot(s), {runs} run(s)",
    )
