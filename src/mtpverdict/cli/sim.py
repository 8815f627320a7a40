"""Commands over simulated and planned campaigns: `simulate` writes a synthetic campaign, `plan` sizes one.

`simulate OUT` writes results format v1 (campaign.json with synthetic: true, records.jsonl) from a
small TOML file and/or options. `plan --effect 5%` prints how many boots per arm and runs per boot
resolve an effect, from a pilot campaign's variance components or from stated ones. Bad input prints
one `Error: ...` line per problem and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mtpverdict.cli._common import echo
from mtpverdict.cli._common import fail as _fail
from mtpverdict.cli._common import fail_input as _fail_input

if TYPE_CHECKING:
    pass


def register(app: typer.Typer) -> None:
    """Add `simulate` and `plan` to the main application."""
    app.command("simulate")(simulate)
    app.command("plan")(plan)


def simulate(
    out: Annotated[Path, typer.Argument(help="Results directory to create (must not hold a campaign).")],
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Simulation TOML (keys as the options below).")
    ] = None,
    arm: Annotated[
        list[str] | None,
        typer.Option(
            "--arm",
            help="NAME (a control), NAME:K or NAME:K:EFFECT, e.g. k2:2:5% (repeatable; "
            "default off_A k1 k2 k3 off_B, no effect).",
        ),
    ] = None,
    void_arm: Annotated[
        list[str] | None, typer.Option("--void-arm", help="An arm whose head accepts nothing (repeatable).")
    ] = None,
    boots: Annotated[int | None, typer.Option(help="Boots per arm, round-robin (default 1).")] = None,
    reps: Annotated[int | None, typer.Option(help="Runs per cell and boot (default 3).")] = None,
    concurrency: Annotated[
        str | None, typer.Option(help="Concurrency levels, comma-separated (default 1,4,8).")
    ] = None,
    completion_tokens: Annotated[
        int | None, typer.Option(help="Completion tokens per request (default 256).")
    ] = None,
    boot_sd: Annotated[
        float | None, typer.Option(help="Log-scale sd of a boot's shift (default 0.02, about 2%).")
    ] = None,
    run_sd: Annotated[float | None, typer.Option(help="Log-scale sd of a run (default 0.01).")] = None,
    drift: Annotated[
        float | None, typer.Option(help="Log-scale drift from the first boot to the last (default 0).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the generator (default 0).")] = None,
    name: Annotated[str | None, typer.Option(help="Scenario name (campaign id synthetic-NAME).")] = None,
    engine_version: Annotated[
        str | None,
        typer.Option(
            help="Engine version every boot records, e.g. 0.32.0, for a gate comparing it with an "
            "image tag (default: simulated)."
        ),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            help="The image the seat ran, e.g. vllm/vllm-openai:v0.32.0, recorded as the campaign "
            "scope's engine_version, where a gate reads the evidence's image (default: none)."
        ),
    ] = None,
) -> None:
    """Write a SYNTHETIC campaign (results format v1, synthetic: true) with known true effects."""
    from mtpverdict.errors import InputError, Problem
    from mtpverdict.sim import parse_arm, simulate, simulation_from_mapping

    settings: dict[str, Any] = {}
    source = "command line"
    if config is not None:
        settings, source = _read_toml(config), str(config)
    given = {
        "name": name,
        "boots": boots,
        "reps": reps,
        "completion_tokens": completion_tokens,
        "boot_sd": boot_sd,
        "run_sd": run_sd,
        "drift": drift,
        "seed": seed,
        "engine_version": engine_version,
        "image": image,
    }
    # an option given on the command line wins over the same key in the TOML file
    settings.update({k: v for k, v in given.items() if v is not None})
    try:
        if concurrency is not None:
            settings["concurrency"] = _levels(concurrency)
        if arm:
            settings["arms"] = [parse_arm(a) for a in arm]
    except ValueError as exc:
        _fail(str(exc))
    if void_arm:
        listed = settings.get("void_arms", [])
        settings["void_arms"] = [*listed, *void_arm] if isinstance(listed, list) else listed
    try:
        simulation = simulation_from_mapping(settings, source)
    except InputError as exc:
        _fail_input(exc)
    for existing in ("campaign.json", "records.jsonl"):
        if (out / existing).exists():
            _fail(f"{out / existing}: exists; write a simulated campaign to a new directory")
    campaign, records = simulate(simulation)
    from mtpverdict.formats.results_io import results_from_records

    try:  # the generator's output is checked by the loader before anything is written
        results_from_records(campaign, records, label=str(out))
    except InputError as exc:
        _fail_input(exc)
    try:
        _write(out, campaign, records)
    except OSError as exc:
        _fail_input(InputError([Problem(str(out), f"cannot write: {exc.strerror or exc}")]))
    sc = simulation.scenario
    echo(
        f"{out}: SYNTHETIC campaign synthetic-{sc.name}: {len(sc.arms)} arms x {sc.boots_per_arm} boot(s), "
        f"{len(records)} records (seed {simulation.seed})"
    )


def plan(
    effect: Annotated[
        str,
        typer.Option(help="Smallest effect worth finding: 5% or 0.05 (relative to off); not a bare 5."),
    ],
    pilot: Annotated[
        Path | None, typer.Option(help="Results of a pilot campaign: variance components and costs.")
    ] = None,
    alpha: Annotated[float, typer.Option(help="One-sided family-wise false-promotion rate.")] = 0.05,
    power: Annotated[float, typer.Option(help="Probability of calling the effect better.")] = 0.8,
    boot_sd: Annotated[
        str | None, typer.Option(help="Boot-to-boot sd, log scale (2% or 0.02); required without a pilot.")
    ] = None,
    run_sd: Annotated[
        str | None, typer.Option(help="Run-to-run sd inside a boot, log scale (default 0 without a pilot).")
    ] = None,
    depths: Annotated[
        int | None, typer.Option(help="Depths compared with one baseline (Holm; default: pilot's, else 3).")
    ] = None,
    controls: Annotated[
        int | None, typer.Option(help="Control arms per round (default: pilot's, else 2: off_A, off_B).")
    ] = None,
    cells: Annotated[
        int | None, typer.Option(help="Cells a depth must win, every one (default: pilot's, else 1).")
    ] = None,
    metric: Annotated[str, typer.Option(help="decode_tps, aggregate_tps or ttft_ms.")] = "decode_tps",
    devices: Annotated[int, typer.Option(help="Devices running every arm in parallel (blocks).")] = 1,
    include_cold: Annotated[
        bool, typer.Option("--include-cold", help="Count each boot's first (cold) run, as some policies do.")
    ] = False,
    boot_seconds: Annotated[
        float | None, typer.Option(help="Seconds from launch to ready (default: the pilot's mean).")
    ] = None,
    run_seconds: Annotated[
        float | None, typer.Option(help="Seconds per measured run (default: the pilot's mean).")
    ] = None,
) -> None:
    """Print how many boots per arm and runs per boot resolve an effect, and the time that costs."""
    from mtpverdict.errors import InputError
    from mtpverdict.plan import (
        Costs,
        Design,
        check_parameters,
        make_plan,
        pilot_components,
        pilot_costs,
        pilot_design,
        render_plan,
        stated_components,
    )
    from mtpverdict.sim import parse_effect

    try:
        relative = parse_effect(_with_unit(effect, "--effect", "+"), "--effect")
        boot = None if boot_sd is None else _sd(_with_unit(boot_sd, "--boot-sd"), "--boot-sd")
        run = None if run_sd is None else _sd(_with_unit(run_sd, "--run-sd"), "--run-sd")
        check_parameters(relative, alpha, power)
        for option, count in (
            ("--depths", depths),
            ("--controls", controls),
            ("--cells", cells),
            ("--devices", devices),
        ):
            if count is not None and count < 1:
                raise ValueError(f"{option} must be 1 or more")
        for option, seconds in (("--boot-seconds", boot_seconds), ("--run-seconds", run_seconds)):
            if seconds is not None and seconds < 0:
                raise ValueError(f"{option} must not be negative")
        if metric not in ("decode_tps", "aggregate_tps", "ttft_ms"):
            raise ValueError(f"--metric must be decode_tps, aggregate_tps or ttft_ms, not {metric!r}")
    except ValueError as exc:
        _fail(str(exc))
    if pilot is None:
        if boot is None:
            _fail("give --pilot RESULTS, or the noise as --boot-sd (and --run-sd)")
        components = stated_components(boot, run if run is not None else 0.0)
        design = Design()
        costs = Costs(boot_seconds, run_seconds)
    else:
        from mtpverdict.formats.results_io import load_results

        try:
            loaded = load_results(pilot)
            components = pilot_components(
                loaded, metric=metric, include_cold=include_cold, boot_sd=boot, run_sd=run
            )
        except InputError as exc:
            _fail_input(exc)
        design = pilot_design(loaded, metric)
        found = pilot_costs(loaded)
        costs = Costs(
            boot_seconds if boot_seconds is not None else found.boot_seconds,
            run_seconds if run_seconds is not None else found.run_seconds,
            found.source if boot_seconds is None and run_seconds is None else "pilot and options",
        )
    design = Design(
        depths=depths if depths is not None else design.depths,
        control_arms=controls if controls is not None else design.control_arms,
        cells=cells if cells is not None else design.cells,
        devices=devices,
    )
    try:
        result = make_plan(
            relative, components, design, costs, alpha=alpha, power=power, cold_runs=0 if include_cold else 1
        )
    except ValueError as exc:
        _fail(str(exc))
    echo(render_plan(result), nl=False)


def _with_unit(text: str, option: str, sign: str = "") -> str:
    """`text` unless it is a bare number of 1 or more: 5 would be read as a fraction (+500%), which no
    one means, so the unit must be written."""
    stripped = text.strip()
    try:
        number = float(stripped)
    except ValueError:
        return text  # a percentage, or not a number: the parser says which
    if abs(number) >= 1:
        pct = f"{sign}{number * 100:g}%"
        raise ValueError(
            f"{option} {stripped}: a bare number is a fraction ({stripped} means {pct}); "
            f"write 5% or 0.05 (for {stripped}%, write {stripped}%)"
        )
    return text


def _sd(text: str, option: str) -> float:
    """A log-scale standard deviation written as 0.02 or 2%."""
    try:
        value = float(text[:-1]) / 100.0 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"{option} {text!r}: write a standard deviation such as 0.02 or 2%") from None
    if not (value >= 0 and value < float("inf")):
        raise ValueError(f"{option} must be a finite, non-negative standard deviation, not {text!r}")
    return value


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--concurrency {text!r}: write whole numbers separated by commas") from None
    return levels


def _read_toml(path: Path) -> dict[str, Any]:
    """The settings of a simulation file, read with the limits every loader shares."""
    from mtpverdict.errors import InputError, Problem
    from mtpverdict.formats import _check
    from mtpverdict.formats.policy import load_toml

    source = str(path)
    try:
        data = load_toml(_check.text_of(_check.read_document(path, what="a simulation file"), source), source)
    except InputError as exc:
        _fail_input(exc)
    breach = _check.limits_problem(data)
    if breach is not None:
        _fail_input(InputError([Problem(source, breach[1], key=breach[0])]))
    return data


def _write(out: Path, campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """campaign.json atomically, then records.jsonl in one write, fsync'd: a whole campaign or none."""
    from mtpverdict._jsonio import atomic_write, canonical, record_line

    out.mkdir(parents=True, exist_ok=True)
    (out / "raw").mkdir(exist_ok=True)
    atomic_write(out / "records.jsonl", "".join(record_line(r) for r in records))
    atomic_write(out / "campaign.json", canonical(campaign))
