"""Scenarios from a small TOML file or from command-line options (`mtpverdict simulate`).

The file's shape (keys, types, ranges) is a msgspec model checked by the one validation mechanism of
every format (formats/_check): each problem names the file and key. What the shape cannot say (an
effect's unit, a control arm with an effect, arm names that must exist) is checked after, on the same
file, so one run lists every problem.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from mtpverdict.errors import InputError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.results import NAME_PATTERN
from mtpverdict.sim.campaign import SIMULATED_ENGINE, Scenario, SimArm

DEFAULT_ARMS = ("off_A", "k1:1", "k2:2", "k3:3", "off_B")  # a depth sweep bracketed by two controls
DEFAULT_SEED = 0
VOID_ACCEPTANCE = 0.0  # a void arm's head accepts nothing: it drafts and throws every draft away
_BASE = Scenario(name="simulated", arms=())  # the defaults of every key the file leaves out

Text = Annotated[str, msgspec.Meta(min_length=1)]
Sd = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]  # log scale: 0.02 is about 2%
Signed = Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)]


class ArmTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One [[arms]] table: a control (k 0) or a depth with its effect relative to off."""

    name: Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
    k: _check.Count = 0
    effect: int | float | str = 0.0  # 0.05 or "5%"; parse_effect reads the unit
    effect_slope: Signed = 0.0
    acceptance: _check.Fraction = 0.9
    position_decay: _check.Fraction = 0.9
    void: bool = False


class SimulationFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A simulation's TOML file (or the command line's options as the same keys)."""

    name: Text = "simulated"
    description: str = ""
    seed: _check.Count = DEFAULT_SEED
    boots: _check.PositiveInt = _BASE.boots_per_arm
    reps: _check.PositiveInt = _BASE.reps
    concurrency: Annotated[tuple[_check.PositiveInt, ...], msgspec.Meta(min_length=1)] = _BASE.concurrency
    completion_tokens: Annotated[int, msgspec.Meta(ge=2, le=_check.MAX_INT)] = _BASE.completion_tokens
    prompt_tokens: _check.PositiveInt = _BASE.prompt_tokens
    base_decode_tps: Annotated[float, msgspec.Meta(ge=1e-3)] = _BASE.base_decode_tps
    boot_sd: Sd = _BASE.boot_sd
    run_sd: Sd = _BASE.run_sd
    request_sd: Sd = _BASE.request_sd
    drift: Signed = _BASE.drift_total
    cold_factor: Annotated[float, msgspec.Meta(ge=0.01, le=1.0)] = _BASE.cold_factor
    void_arms: tuple[str, ...] = ()
    failed_boots: tuple[str, ...] = ()
    engine_version: Text = SIMULATED_ENGINE
    image: Text | None = None
    arms: Annotated[tuple[ArmTable, ...], msgspec.Meta(min_length=1)] = ()


@dataclass(frozen=True, slots=True)
class Simulation:
    """A scenario and the seed that generates its campaign."""

    scenario: Scenario
    seed: int


def parse_effect(value: object, where: str) -> float:
    """A relative effect as a fraction: 0.05, "5%" or "+5%" all mean 5% faster than off."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: an effect is a number such as 0.05 or a percentage such as 5%")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(
                f"{where}: {value!r} is not an effect; write 0.05 or 5% (relative to off)"
            ) from None
    else:
        raise ValueError(f"{where}: an effect is a number such as 0.05 or a percentage such as 5%")
    if not math.isfinite(number) or number <= -1.0:
        raise ValueError(f"{where}: {value!r} must be a finite effect above -100%")
    if abs(number) >= 1 and not (isinstance(value, str) and value.strip().endswith("%")):
        # 5 would be +500%, which no one means by it: the unit is written (5% or 0.05; 150% is fine)
        raise ValueError(
            f"{where}: {value!r}: a bare number is a fraction ({value} means {number * 100:+g}%); "
            f"write 5% or 0.05"
        )
    return number


def parse_arm(text: str) -> dict[str, Any]:
    """`NAME` (a control), `NAME:K` or `NAME:K:EFFECT` (a depth with its effect, e.g. k2:2:5%)."""
    parts = text.split(":")
    if not parts[0] or len(parts) > 3:
        raise ValueError(f"--arm {text!r}: write NAME, NAME:K or NAME:K:EFFECT (e.g. k2:2:5%)")
    arm: dict[str, Any] = {"name": parts[0]}
    if len(parts) >= 2:
        try:
            arm["k"] = int(parts[1])
        except ValueError:
            raise ValueError(f"--arm {text!r}: K must be a whole number of speculative tokens") from None
    if len(parts) == 3:
        arm["effect"] = parts[2]
    return arm


def _sim_arm(
    table: ArmTable, where: str, void_names: Sequence[str], bad: list[_check.Located]
) -> SimArm | None:
    """One well-shaped [[arms]] table as a SimArm, or None after recording what it means wrongly."""
    try:
        effect = math.log1p(parse_effect(table.effect, f"{where}.effect"))
    except ValueError as exc:
        bad.append((f"{where}.effect", str(exc).split(": ", 1)[1]))
        return None
    if table.k == 0 and effect != 0.0:
        bad.append((f"{where}.effect", "a control arm (k 0) is the baseline: it has no effect"))
        return None
    void = table.void or table.name in void_names
    if void and table.k == 0:
        bad.append((f"{where}.void", "a control arm drafts nothing, so it cannot be void"))
        return None
    return SimArm(
        name=table.name,
        k=table.k,
        effect=effect,
        effect_slope=table.effect_slope,
        first_position_rate=VOID_ACCEPTANCE if void else table.acceptance,
        position_decay=table.position_decay,
    )


def _listed(obj: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = obj.get(key, ())
    ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    return tuple(value) if ok else ()


def _arm_tables(obj: Mapping[str, Any], bad: list[_check.Located]) -> list[tuple[str, ArmTable]]:
    """The [[arms]] tables of a well-shaped key each (where, table); each ill-shaped one reported."""
    raw_arms = obj.get("arms", [parse_arm(a) for a in DEFAULT_ARMS])
    if not isinstance(raw_arms, list | tuple) or not raw_arms:
        bad.append(("arms", "must list the arms ([[arms]] tables with name, k and effect)"))
        return []
    tables = []
    for i, raw in enumerate(raw_arms):
        found = _check.check(raw, ArmTable, prefix=f"arms[{i}].")
        bad.extend(found)  # every table is checked: one run names every bad one
        if not found:
            tables.append((f"arms[{i}]", msgspec.convert(raw, ArmTable, strict=True)))
    return tables


def _arms(obj: Mapping[str, Any], bad: list[_check.Located]) -> list[SimArm]:
    """The well-shaped [[arms]] tables as SimArms, then the checks across them."""
    void_names, failed = _listed(obj, "void_arms"), _listed(obj, "failed_boots")
    arms = [
        arm
        for where, table in _arm_tables(obj, bad)
        if (arm := _sim_arm(table, where, void_names, bad)) is not None
    ]
    names = [a.name for a in arms]
    bad.extend(
        ("arms", f"arm {dup!r} appears twice") for dup in sorted({n for n in names if names.count(n) > 1})
    )
    if arms and not any(a.k == 0 for a in arms):
        bad.append(("arms", "no control arm: add one with k 0 (e.g. off_A first and off_B last)"))
    if arms and not any(a.k > 0 for a in arms):
        bad.append(("arms", "no candidate arm: add one with k >= 1"))
    for key, listed in (("void_arms", void_names), ("failed_boots", failed)):
        bad.extend((key, f"{arm_name!r} is not an arm") for arm_name in listed if arm_name not in names)
    return arms


def _concurrency(file: SimulationFile) -> list[_check.Located]:
    if len(set(file.concurrency)) == len(file.concurrency):
        return []
    return [("concurrency", f"must list distinct levels, not {list(file.concurrency)!r}")]


def simulation_from_mapping(obj: Mapping[str, Any], source: str) -> Simulation:
    """Build a Simulation from a TOML-like mapping; raise InputError naming each bad key.

    Effects are relative to off (0.05 or "5%" = 5% faster decode); standard deviations and drift are
    on log scale (0.02 is about 2%). Missing keys take the Scenario defaults.
    """
    if not isinstance(obj, Mapping):
        raise InputError([Problem(source, "must be a table of simulation keys")])
    bad = _check.check({key: value for key, value in obj.items() if key != "arms"}, SimulationFile)
    arms = _arms(obj, bad)
    file = None if bad else msgspec.convert(obj, SimulationFile, strict=True)
    if file is not None:
        bad.extend(_concurrency(file))
    if file is None or bad:
        raise InputError([Problem(source, message, key=key) for key, message in bad])
    return Simulation(scenario=_scenario(file, arms), seed=file.seed)


def _scenario(file: SimulationFile, arms: Sequence[SimArm]) -> Scenario:
    return Scenario(
        name=file.name,
        description=file.description,
        arms=tuple(arms),
        boots_per_arm=file.boots,
        reps=file.reps,
        concurrency=file.concurrency,
        completion_tokens=file.completion_tokens,
        prompt_tokens=file.prompt_tokens,
        base_decode_tps=file.base_decode_tps,
        boot_sd=file.boot_sd,
        run_sd=file.run_sd,
        request_sd=file.request_sd,
        drift_total=file.drift,
        cold_factor=file.cold_factor,
        failed_boots=file.failed_boots,
        engine_version=file.engine_version,
        image=file.image,
    )


def simulate(simulation: Simulation) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The campaign and records of a Simulation (its seed drives numpy's default generator)."""
    import numpy as np

    from mtpverdict.sim.campaign import simulate_campaign

    return simulate_campaign(simulation.scenario, np.random.default_rng(simulation.seed))
