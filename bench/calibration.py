"""Calibration of the decision rules: false promotions under the null and power, per shipped policy.

For designs of 1, 3 and 5 boots per arm (off_A, k1, k2, k3, off_B in round-robin boot order; the
workloads the policy's rules name, or one `chat` workload; concurrency 1 and 4; 2 reps, the first run
of each boot cold; off at 60 tok/s, or 1.5x the policy's highest absolute target), simulated campaigns
are decided by the real engine with each shipped policy:
- null: every depth runs exactly as fast as off; any promotion is a false promotion;
- 1x and 2x floor: k2 is faster than off by once and twice the floor the family procedure states for
  the design (k1 and k3 stay null): log(1 + min_effect) + t(1 - alpha / 3, Welch df) x sd x
  sqrt(1/n + 1/(2n)) (plan.welch_floor, min_effect = the default's +3% margin), with the true sd of a
  boot's statistic in its noisiest cell (concurrency 1, one counted run: boot, run and stream noise).
  Power is the rate of promotions of k2 (an arm whose true effect is positive).
Policies of the same shape see the same campaigns (campaign i of a scenario has the same seed for
each policy). Under a reference policy (thor-c21 keeps k3) the null's answer is keep_reference, and a
promotion means switching away from the reference.
Rates carry two-sided 95% Clopper-Pearson intervals.

    python bench/calibration.py [--campaigns 1000] [--workers 2] [--policies default,strict-ci]
        [--boots 1,3,5] [--save FILE.json]
    python bench/calibration.py --table-from LOG   # the table of the scenarios a run's log holds
    python bench/calibration.py --procedure [--campaigns 1000] [--boots 3,5]
        # the family procedure itself on simulated per-boot statistics (bench/procedure_calibration.py)
    python bench/calibration.py --blocked [--campaigns 1000]
        # the blocked procedure on campaigns over 1, 2, 4 and 8 devices (bench/blocked_calibration.py)
    python bench/calibration.py --nuisances [--campaigns 1000]
        # every design crossed with every nuisance, null depths (bench/nuisance_calibration.py)
    python bench/calibration.py --looks [--campaigns 1000]
        # following an inconclusive decision's next step by hand (bench/looks_calibration.py)
    python bench/calibration.py --schedule [--campaigns 1000] [--boots 3]
        # schedules on campaigns with and without a crossover (bench/schedule_calibration.py)
    python bench/calibration.py --settling [--campaigns 2000]
        # null campaigns settled "keep off" at 3 / 5 / 8 / 10 boots per arm (bench/settling.py)
    python bench/calibration.py --settling-decide [--campaigns 1000]
        # the 8-boot null row's parts as decide counts them end to end (bench/settling.py)
    python bench/calibration.py --fixed-layouts [--campaigns 1000]
        # 60 fixed 8 x 1 layouts under drift, with and without the drift line (bench/fixed_layouts.py)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec

import mtpverdict.decide.engine  # noqa: F401  (loaded before the workers fork, not per task)
from mtpverdict.formats.policy import Policy
from mtpverdict.plan import Design, boot_level_sd, welch_df, welch_floor
from mtpverdict.rules import load_policy, shipped_policies
from mtpverdict.sim import Calibration, Scenario, SimArm, calibrate, combine

ALPHA = 0.05  # every shipped policy's family-wise alpha; the floor is computed at it
MIN_EFFECT = 0.03  # the default policy's min_effect (its equivalence margin): part of the floor
CONFIDENCE_ALPHA = 0.05  # two-sided 95% Clopper-Pearson intervals on the rates
DEPTHS = 3  # k1, k2, k3 share the off baseline (Holm family)
CONTROL_ARMS = 2  # off_A first, off_B last in every round
CHUNK = 25  # campaigns per worker task: small enough to balance two workers
SEED = 20260911
KINDS = ("null", "1x", "2x")
FIRST = ("default", "strict-ci")
NOISE = Scenario(name="noise", arms=(SimArm("off"),))  # the simulator's default noise levels


@dataclass(frozen=True, slots=True)
class Cell:
    """One (policy, design, scenario) of the table, with its counts."""

    policy: str
    boots: int
    kind: str
    df: int
    floor: float  # log effect the design resolves
    effect: float  # true log effect of k2
    calibration: Calibration


def worst_cell_sd() -> float:
    """Sd of a boot's log statistic at concurrency 1: one counted run of one stream (the cold run
    is not counted), so boot, run and stream noise add up undiluted."""
    run = math.sqrt(NOISE.run_sd**2 + NOISE.request_sd**2)
    return boot_level_sd(NOISE.boot_sd, run, 1)


def design_floor_for(boots: int) -> tuple[int, float]:
    """The Welch df (rounded down) and the floor decide states for the design, min_effect included."""
    design = Design(depths=DEPTHS, control_arms=CONTROL_ARMS, cells=1)
    sd = worst_cell_sd()
    df = welch_df(sd, boots, sd, CONTROL_ARMS * boots)
    return int(df) if math.isfinite(df) else 0, welch_floor(sd, boots, design, ALPHA, MIN_EFFECT)


def policy_shape(policy: Policy) -> tuple[tuple[str, ...], float]:
    """The workloads a policy's rules name, and a decode rate clearing its absolute targets.

    A simulated campaign holds those workloads (the same effects in each), so a policy written for a
    seed's workloads (thor-c21: `code`; arc-b70: `ctx4k` to `ctx115k`) judges evidence it can read; the
    speculation-off rate is 1.5x the highest beats_target target, so a target does not decide alone.
    """
    named: set[str] = set()
    targets = [0.0]
    for rule in policy.rules:
        params = msgspec.structs.asdict(rule.params)
        named.update(params.get("workloads") or ())
        if params.get("workload"):
            named.add(params["workload"])
        if rule.kind == "beats_target" and params.get("target") is not None:
            targets.append(float(params["target"]))
    if policy.selection.workload:
        named.add(policy.selection.workload)
    return tuple(sorted(named)) or ("chat",), max(60.0, 1.5 * max(targets))


def scenario(boots: int, kind: str, policy: Policy | None = None) -> Scenario:
    _, floor = design_floor_for(boots)
    effect = {"null": 0.0, "1x": floor, "2x": 2.0 * floor}[kind]
    workloads, base_tps = policy_shape(policy) if policy is not None else (("chat",), 60.0)
    return Scenario(
        name=f"{kind}-{boots}-boots",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2, effect), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=boots,
        reps=2,
        concurrency=(1, 4),
        completion_tokens=128,
        workloads=workloads,
        base_decode_tps=base_tps,
    )


def _task(args: tuple[str, int, str, int, int, int]) -> tuple[str, int, str, Calibration]:
    policy_name, boots, kind, seed, start, count = args
    policy = load_policy(policy_name)
    result = calibrate(scenario(boots, kind, policy), policy, count, seed=seed, start=start)
    return policy_name, boots, kind, result


def run(policies: list[str], boots_list: list[int], campaigns: int, workers: int) -> list[Cell]:
    tasks: list[tuple[str, int, str, int, int, int]] = []
    for policy in policies:
        for boots in boots_list:
            for k, kind in enumerate(KINDS):
                seed = SEED + 100 * boots + k  # the same campaigns for every policy
                tasks.extend(
                    (policy, boots, kind, seed, start, min(CHUNK, campaigns - start))
                    for start in range(0, campaigns, CHUNK)
                )
    parts: dict[tuple[str, int, str], list[Calibration]] = {}
    expected = {(p, b, k): math.ceil(campaigns / CHUNK) for p in policies for b in boots_list for k in KINDS}
    cells: list[Cell] = []
    started = time.monotonic()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for policy, boots, kind, result in pool.imap_unordered(_task, tasks):
            key = (policy, boots, kind)
            parts.setdefault(key, []).append(result)
            if len(parts[key]) < expected[key]:
                continue
            total = combine(parts[key])
            df, floor = design_floor_for(boots)
            cell = Cell(policy, boots, kind, df, floor, scenario(boots, kind).arms[2].effect, total)
            cells.append(cell)
            print(
                f"[{time.monotonic() - started:7.0f} s] {policy} {boots} boots {kind}: "
                f"{total.promotions} promote ({total.correct_promotions} correct), "
                f"{total.inconclusive} inconclusive, {total.keep_disabled} keep disabled, "
                f"{total.keep_reference} keep reference of {total.campaigns}",
                flush=True,
            )
    return cells


def _rate(cal: Calibration, count: int) -> str:
    low, high = cal.rate_interval(count, alpha=CONFIDENCE_ALPHA)
    return f"{count / cal.campaigns:.3f} [{low:.3f}, {high:.3f}]"


def table(cells: list[Cell]) -> str:
    """Markdown: one row per policy and design."""
    by = {(c.policy, c.boots, c.kind): c for c in cells}
    rows = [
        "| policy | boots/arm | df | floor | false promotions (null) | power at 1x floor | "
        "power at 2x floor | inconclusive null / 1x / 2x |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for policy, boots in sorted({(c.policy, c.boots) for c in cells}):
        null, one, two = (by.get((policy, boots, k)) for k in KINDS)
        ref = null or one or two
        assert ref is not None
        inconclusive = " / ".join(
            f"{c.calibration.inconclusive / c.calibration.campaigns:.3f}" if c else "-"
            for c in (null, one, two)
        )
        rows.append(
            f"| {policy} | {boots} | {ref.df} | {math.expm1(ref.floor) * 100:.1f}% | "
            f"{_rate(null.calibration, null.calibration.promotions) if null else '-'} | "
            f"{_rate(one.calibration, one.calibration.correct_promotions) if one else '-'} | "
            f"{_rate(two.calibration, two.calibration.correct_promotions) if two else '-'} | "
            f"{inconclusive} |"
        )
    return "\n".join(rows)


LOG_LINE = re.compile(
    r"\] (?P<policy>\S+) (?P<boots>\d+) boots (?P<kind>\S+): (?P<promotions>\d+) promote "
    r"\((?P<correct>\d+) correct\), (?P<inconclusive>\d+) inconclusive, (?P<keep>\d+) keep disabled, "
    r"(?P<reference>\d+) keep reference of (?P<campaigns>\d+)$"
)


def cells_from_log(path: Path) -> list[Cell]:
    """The scenarios a (possibly unfinished) run has completed, read back from its log."""
    cells = []
    for line in path.read_text(encoding="utf-8").splitlines():
        found = LOG_LINE.search(line)
        if found is None:
            continue
        boots, kind = int(found["boots"]), found["kind"]
        df, floor = design_floor_for(boots)
        calibration = Calibration(
            scenario=f"{kind}-{boots}-boots",
            campaigns=int(found["campaigns"]),
            promotions=int(found["promotions"]),
            correct_promotions=int(found["correct"]),
            inconclusive=int(found["inconclusive"]),
            keep_disabled=int(found["keep"]),
            keep_reference=int(found["reference"]),
        )
        effect = scenario(boots, kind).arms[2].effect
        cells.append(Cell(found["policy"], boots, kind, df, floor, effect, calibration))
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--campaigns", type=int, default=1000, help="campaigns per scenario (>= 1000 in full)"
    )
    parser.add_argument("--workers", type=int, default=2)
    # the policies that can judge a simulated campaign first, so a partial log holds them
    order = sorted(shipped_policies(), key=lambda p: (p not in FIRST, p))
    parser.add_argument("--policies", default=",".join(order))
    parser.add_argument("--boots", default="1,3,5")
    parser.add_argument("--save", type=Path, help="write every count as JSON here")
    parser.add_argument("--table-from", type=Path, help="print the table of a run's log and exit")
    parser.add_argument(
        "--procedure", action="store_true", help="calibrate the family procedure on per-boot statistics"
    )
    parser.add_argument(
        "--blocked", action="store_true", help="calibrate the blocked procedure on campaigns over devices"
    )
    parser.add_argument(
        "--devices-end-to-end",
        action="store_true",
        help="8 devices x 1 round with slow ends, full records decided by decide",
    )
    parser.add_argument(
        "--nuisances", action="store_true", help="every design crossed with every nuisance (null depths)"
    )
    parser.add_argument(
        "--looks",
        action="store_true",
        help="follow an inconclusive decision's next step by hand until it settles",
    )
    parser.add_argument(
        "--schedule",
        action="store_true",
        help="calibrate schedules on campaigns with and without a crossover",
    )
    parser.add_argument(
        "--settling",
        action="store_true",
        help="null campaigns settled at 3 / 5 / 8 / 10 boots per arm, fixed and adaptive",
    )
    parser.add_argument(
        "--settling-decide",
        action="store_true",
        help="the 8-boot settling row's parts as decide counts them end to end (the null campaigns)",
    )
    parser.add_argument(
        "--fixed-layouts",
        action="store_true",
        help="fixed 8 x 1 layouts under drift, each arm against the controls' mean or drift line",
    )
    args = parser.parse_args(argv)
    if args.fixed_layouts:
        return _fixed_layouts(args, argv)
    if args.settling:
        return _settling(args, argv)
    if args.settling_decide:
        import settling

        print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
        print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
        print("\n".join(settling.decide_rows(args.campaigns)))
        return 0
    if args.schedule:
        return _schedule(args, argv)
    if args.blocked:
        return _blocked(args, argv)
    if args.looks:
        return _looks(args, argv)
    if args.nuisances:
        return _nuisances(args, argv)
    if args.devices_end_to_end:
        import blocked_calibration

        print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
        print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
        print("\n".join(blocked_calibration.end_to_end_rows(args.campaigns)))
        return 0
    if args.procedure:
        return _procedure(args, argv)
    if args.table_from:
        print(table(cells_from_log(args.table_from)))
        return 0
    policies = [p for p in args.policies.split(",") if p]
    boots_list = [int(b) for b in args.boots.split(",") if b]
    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    for boots in boots_list:
        df, floor = design_floor_for(boots)
        print(
            f"design {boots} boot(s)/arm: df {df}, worst-cell boot sd {worst_cell_sd() * 100:.2f}%, "
            f"floor {math.expm1(floor) * 100:.2f}% (log {floor:.4f})"
        )
    started = time.monotonic()
    cells = run(policies, boots_list, args.campaigns, args.workers)
    print(f"\n{len(cells)} scenarios x {args.campaigns} campaigns in {time.monotonic() - started:.0f} s\n")
    print(table(cells))
    if args.save:
        payload = [
            {**{k: v for k, v in asdict(c).items() if k != "calibration"}, **asdict(c.calibration)}
            for c in sorted(cells, key=lambda c: (c.policy, c.boots, KINDS.index(c.kind)))
        ]
        args.save.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


def _procedure(args: argparse.Namespace, argv: list[str] | None) -> int:
    import procedure_calibration

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    boots = [int(b) for b in args.boots.split(",") if b] if args.boots != "1,3,5" else [3, 5]
    started = time.monotonic()
    print(procedure_calibration.run(boots, args.campaigns))
    print(f"\n{args.campaigns} campaigns per row in {time.monotonic() - started:.0f} s")
    return 0


def _blocked(args: argparse.Namespace, argv: list[str] | None) -> int:
    import blocked_calibration

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    started = time.monotonic()
    print(blocked_calibration.run(args.campaigns))
    print(f"\n{args.campaigns} campaigns per row in {time.monotonic() - started:.0f} s")
    return 0


def _nuisances(args: argparse.Namespace, argv: list[str] | None) -> int:
    import nuisance_calibration

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    started = time.monotonic()
    print(nuisance_calibration.run(args.campaigns))
    print(f"\n{args.campaigns} campaigns per cell in {time.monotonic() - started:.0f} s")
    return 0


def _looks(args: argparse.Namespace, argv: list[str] | None) -> int:
    import looks_calibration

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    started = time.monotonic()
    print(looks_calibration.run(args.campaigns))
    print(f"\n{args.campaigns} campaigns per row in {time.monotonic() - started:.0f} s")
    return 0


def _fixed_layouts(args: argparse.Namespace, argv: list[str] | None) -> int:
    import fixed_layouts

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    started = time.monotonic()
    print(fixed_layouts.run(args.campaigns))
    print(f"\n{args.campaigns} campaigns per layout in {time.monotonic() - started:.0f} s")
    return 0


def _settling(args: argparse.Namespace, argv: list[str] | None) -> int:
    import settling

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    started = time.monotonic()
    print(settling.run(args.campaigns))
    print(f"\n{args.campaigns} campaigns per row in {time.monotonic() - started:.0f} s")
    return 0


def _schedule(args: argparse.Namespace, argv: list[str] | None) -> int:
    import schedule_calibration

    print(f"$ {shlex.join(['python', 'bench/calibration.py', *(argv or sys.argv[1:])])}")
    print(f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    boots = [int(b) for b in args.boots.split(",") if b] if args.boots != "1,3,5" else [3]
    print(schedule_calibration.run(boots, args.campaigns, args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
