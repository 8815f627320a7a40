"""Campaign simulator: synthetic results with boot-to-boot and run-to-run variance, drift and controls.

Pure: a Scenario and an explicit numpy Generator in, a campaign dict and its records out. Used for the
synthetic fixtures, the calibration of the decision rules (false-promotion rate, power) and `plan`.
Everything it produces is labelled synthetic.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mtpverdict.formats.results import NAME_PATTERN, RESULTS_FORMAT

if TYPE_CHECKING:
    import numpy as np

SIMULATED_ENGINE = "simulated"  # the engine version a simulated boot records unless told otherwise


@dataclass(frozen=True, slots=True)
class SimArm:
    """One simulated arm: its true decode effect (log ratio to off) and its acceptance process."""

    name: str
    k: int = 0  # 0 = speculation off (a control)
    effect: float = 0.0  # true log ratio of per-stream decode tok/s to off, at concurrency 1
    effect_slope: float = 0.0  # change of the log effect per doubling of concurrency
    first_position_rate: float = 0.9  # acceptance at position 0
    position_decay: float = 0.9  # each later position accepts this fraction as often
    kv_cost_per_k: float = 0.08  # fraction of the KV pool a drafter costs per speculative token
    # (concurrency, true log effect) pairs overriding effect and effect_slope there: an arm whose effect
    # is not log-linear in concurrency (one that runs a per-batch-size schedule)
    effect_at: tuple[tuple[int, float], ...] = ()

    def effect_for(self, concurrency: int) -> float:
        """The true log effect at a concurrency."""
        listed = dict(self.effect_at)
        if concurrency in listed:
            return listed[concurrency]
        return self.effect + self.effect_slope * math.log2(concurrency)


@dataclass(frozen=True, slots=True)
class Scenario:
    """A campaign design and the truth behind it."""

    name: str
    arms: tuple[SimArm, ...]
    boots_per_arm: int = 1
    reps: int = 3
    concurrency: tuple[int, ...] = (1, 4, 8)
    completion_tokens: int = 256
    prompt_tokens: int = 256
    base_decode_tps: float = 60.0  # per-stream decode at concurrency 1, speculation off
    stream_scaling: float = -0.15  # per-stream decode ~ c ** scaling; aggregate ~ c ** (1 + scaling)
    boot_sd: float = 0.02  # log-scale sd of a boot's shift (shared by every cell of the boot)
    run_sd: float = 0.01  # log-scale sd of a run
    request_sd: float = 0.005  # log-scale sd of one stream inside a run
    drift_total: float = 0.0  # log-scale drift from the first boot to the last
    cold_factor: float = 0.85  # decode multiplier of the first run after a boot
    cold_ttft_factor: float = 3.0
    base_ttft_ms: float = 150.0
    kv_pool_tokens: int = 1_000_000
    window_tokens: int = 4096
    failed_boots: tuple[str, ...] = ()  # arms whose first boot fails
    workloads: tuple[str, ...] = ("chat",)  # workload ids; every arm's effect is the same in each
    description: str = ""
    extra_notes: tuple[str, ...] = field(default=())
    # True: a run's draft rounds accept as a chain (position i only after i-1; its count is a binomial
    # of position i-1's). False keeps the earlier draws (independent binomials, clamped), which the
    # committed synthetic fixtures were generated with.
    chain_acceptance: bool = False
    # what every boot records as its engine version (the scope's too when set): a gate compares it with
    # a compose image's tag, so a simulated seat can stand for one on a named engine release
    engine_version: str = SIMULATED_ENGINE
    # the image the seat ran (vllm/vllm-openai:v0.32.0), recorded as the scope's engine_version, where
    # a gate reads the evidence's image (docs/gate.md); None records the engine version there
    image: str | None = None
    # devices > 1: every device runs every arm boots_per_arm rounds, numbered as collect numbers them
    # (stats/layout.py), its boot records naming the device. order_seed draws each round's order,
    # controls included, as collect does; None keeps the arms' order on every device (off_A first and
    # off_B last: the layout that confounds the controls with the device's ends).
    devices: int = 1
    order_seed: int | None = None
    ends_slow: float = 0.0  # log shift of the first and last boot of each device (warm-up, thermal)


@dataclass(frozen=True, slots=True)
class SimBoot:
    """One boot of the simulated layout: its numbers, its device and its position on the device."""

    arm: str
    boot: int
    order: int
    device: int
    position: int  # from 1, on its device
    last: int  # the device's last position


def boot_schedule(scenario: Scenario) -> list[tuple[str, int]]:
    """(arm, boot number) in boot order: round-robin over the arms, one round per boot."""
    return [(b.arm, b.boot) for b in sim_layout(scenario)]


def sim_layout(scenario: Scenario) -> list[SimBoot]:
    """Every boot of the campaign in boot order, laid out as collect lays it out (stats/layout.py)."""
    from mtpverdict.stats import layout

    names = [a.name for a in scenario.arms]
    laid = layout.layout(
        names, devices=scenario.devices, rounds=scenario.boots_per_arm, seed=scenario.order_seed
    )
    last = len(names) * scenario.boots_per_arm
    devices = scenario.devices
    return [SimBoot(b.arm, b.boot, b.order, b.device, layout.seq_of(b.order, devices), last) for b in laid]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _chain_counts(rng: np.random.Generator, drafts: int, first: float, decay: float, k: int) -> list[int]:
    """Rounds reaching each position when position 0 accepts with `first` and each later one, given
    the one before, with `decay` (so position i accepts first x decay^i of the rounds, as a chain)."""
    counts = [int(rng.binomial(drafts, min(1.0, first)))]
    for _ in range(1, k):
        counts.append(int(rng.binomial(counts[-1], min(1.0, decay))))
    return counts


def simulate_campaign(
    scenario: Scenario, rng: np.random.Generator
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate (campaign.json object, records) for one synthetic campaign."""
    campaign = _campaign_object(scenario)
    argv = {a["name"]: a["serve_argv"] for a in campaign["arms"]}
    by_name = {a.name: a for a in scenario.arms}
    records: list[dict[str, Any]] = []
    for laid in sim_layout(scenario):
        arm, boot = by_name[laid.arm], laid.boot
        failed = boot == 1 and laid.arm in scenario.failed_boots
        record = _boot_record(scenario, arm, boot, laid.order, failed, argv[laid.arm], rng)
        if scenario.devices > 1:
            record["device"] = f"d{laid.device}"
        records.append(record)
        if failed:
            continue
        boot_shift = float(rng.normal(0.0, scenario.boot_sd))
        drift = scenario.drift_total * (laid.position - 1) / max(laid.last - 1, 1)
        ends = scenario.ends_slow if laid.position in (1, laid.last) else 0.0
        records += _boot_runs(scenario, arm, boot, boot_shift + drift + ends, rng)
        records += _quality_records(laid.arm, boot, rng)
    return campaign, records


def _campaign_object(scenario: Scenario) -> dict[str, Any]:
    """campaign.json of a synthetic campaign: its arms in boot order, its workloads, labelled synthetic."""
    arms_json = [
        {
            "name": arm.name,
            "role": "control" if arm.k == 0 else "candidate",
            "spec": {"method": None, "k": None} if arm.k == 0 else {"method": "mtp", "k": arm.k},
            "order": order,
            "serve_argv": ["--model", "synthetic"]
            + (
                []
                if arm.k == 0
                else ["--speculative-config", f'{{"method":"mtp","num_speculative_tokens":{arm.k}}}']
            ),
        }
        for order, arm in enumerate(scenario.arms, start=1)
    ]
    return {
        "format": RESULTS_FORMAT,
        "id": f"synthetic-{scenario.name}",
        "title": f"SYNTHETIC campaign: {scenario.description or scenario.name}",
        "scope": {
            "device": "simulated",
            "engine": "simulated",
            "engine_version": scenario.image
            or (None if scenario.engine_version == SIMULATED_ENGINE else scenario.engine_version),
            "model": "simulated",
            "claim": "Synthetic: generated by mtpverdict.simulate, not "
            "measured. Use only to exercise the decision engine.",
        },
        "arms": arms_json,
        "workloads": [
            {
                "id": workload,
                "prompt_tokens": scenario.prompt_tokens,
                "max_tokens": scenario.completion_tokens,
                "expect_identical": True,
                "description": f"synthetic {workload} prompt",
            }
            for workload in scenario.workloads
        ],
        "window_tokens": scenario.window_tokens,
        "notes": " ".join(("Synthetic.", *scenario.extra_notes)),
        "synthetic": True,
        "source": f"mtpverdict.simulate scenario {scenario.name}",
    }


def _boot_record(
    scenario: Scenario,
    arm: SimArm,
    boot: int,
    order: int,
    failed: bool,
    argv: list[str],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """One boot: ready with its KV pool (smaller with depth), or the scenario's failed first boot."""
    kv = int(scenario.kv_pool_tokens * max(0.05, 1.0 - arm.kv_cost_per_k * arm.k))
    return {
        "kind": "boot",
        "arm": arm.name,
        "boot": boot,
        "order": order,
        "status": "failed" if failed else "ready",
        "ready_seconds": round(60.0 + float(rng.normal(0, 3)), 3),
        "kv_cache_tokens": None if failed else kv,
        "block_size": 16,
        "num_blocks": None if failed else kv // 16,
        "max_model_len": scenario.window_tokens,
        "engine_version": scenario.engine_version,
        "argv": argv,
        "error": "simulated startup failure" if failed else None,
        "observed_k": None if failed else arm.k,
    }


def _boot_runs(
    scenario: Scenario, arm: SimArm, boot: int, shift: float, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Every run of one boot in order (the first one cold), each with its streams and acceptance.

    `shift` is the boot's log shift plus the campaign's drift at its position."""
    records: list[dict[str, Any]] = []
    clock = 100.0
    first_run = True
    for workload in scenario.workloads:
        for conc in scenario.concurrency:
            per_stream = scenario.base_decode_tps * conc**scenario.stream_scaling
            for rep in range(1, scenario.reps + 1):
                run_shift = float(rng.normal(0.0, scenario.run_sd))
                log_rate = math.log(per_stream) + arm.effect_for(conc) + shift + run_shift
                key = {"arm": arm.name, "boot": boot, "workload": workload, "concurrency": conc, "rep": rep}
                streams, clock = _run_streams(scenario, key, log_rate, first_run, clock, rng)
                first_run = False
                records += streams
                if arm.k:
                    records.append(_acceptance_record(scenario, arm, key, rng))
    return records


def _run_streams(
    scenario: Scenario,
    key: dict[str, Any],
    log_rate: float,
    cold: bool,
    clock: float,
    rng: np.random.Generator,
) -> tuple[list[dict[str, Any]], float]:
    """The request records of one run started at `clock`, and the clock a second after its last end."""
    rate_mult = scenario.cold_factor if cold else 1.0
    ttft_mult = scenario.cold_ttft_factor if cold else 1.0
    ct = scenario.completion_tokens
    out, ends = [], []
    for stream in range(key["concurrency"]):
        rate = math.exp(log_rate + float(rng.normal(0.0, scenario.request_sd))) * rate_mult
        ttft = scenario.base_ttft_ms * ttft_mult * math.exp(float(rng.normal(0.0, 0.03)))
        start = clock + 0.0005 * stream
        t_first = start + ttft / 1000.0
        t_end = t_first + (ct - 1) / rate
        ends.append(t_end)
        out.append(
            {
                "kind": "request",
                **key,
                "stream": stream,
                "warmup": False,
                "t_start": round(start, 6),
                "t_first": round(t_first, 6),
                "t_end": round(t_end, 6),
                "prompt_tokens": scenario.prompt_tokens,
                "completion_tokens": ct,
                "status": "ok",
                "error": None,
                "output_sha256": _sha("synthetic greedy output"),
            }
        )
    return out, max(ends) + 1.0


def _acceptance_record(
    scenario: Scenario, arm: SimArm, key: dict[str, Any], rng: np.random.Generator
) -> dict[str, Any]:
    """One run's /metrics acceptance window: drafts for its tokens, accepted counts per position."""
    rates = [arm.first_position_rate * arm.position_decay**i for i in range(arm.k)]
    drafts = max(1, round(key["concurrency"] * scenario.completion_tokens / (1.0 + sum(rates))))
    if scenario.chain_acceptance:
        per_pos = _chain_counts(rng, drafts, arm.first_position_rate, arm.position_decay, arm.k)
    else:
        per_pos = [int(rng.binomial(drafts, min(1.0, r))) for r in rates]
        for i in range(1, len(per_pos)):  # position i is reached only after i-1 accepts
            per_pos[i] = min(per_pos[i], per_pos[i - 1])
    return {
        "kind": "acceptance",
        **key,
        "source": "metrics",
        "scoped": "run",
        "drafts": drafts,
        "draft_tokens": drafts * arm.k,
        "accepted_tokens": sum(per_pos),
        "accepted_per_position": per_pos,
    }


def _quality_records(name: str, boot: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """A boot's coherence probes (both pass) and its likelihood probe."""
    out: list[dict[str, Any]] = [
        {
            "kind": "coherence",
            "arm": name,
            "boot": boot,
            "case": case,
            "passed": True,
            "expected": answer,
            "output_sha256": _sha(answer),
            "output": answer,
        }
        for case, answer in (("capital-of-france", "Paris"), ("two-plus-two", "4"))
    ]
    out.append(
        {
            "kind": "likelihood",
            "arm": name,
            "boot": boot,
            "rep": 1,
            "tokens": 200,
            "mean_nll": round(2.5 + float(rng.normal(0.0, 0.002)), 6),
        }
    )
    return out


# The synthetic fixture scenarios: each names the truth it encodes.
SCENARIOS: dict[str, Scenario] = {
    "clean-win": Scenario(
        name="clean-win",
        description="every depth is faster than off at every concurrency; k2 is best",
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, 0.10),
            SimArm("k2", 2, 0.18),
            SimArm("k3", 3, 0.14),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
    ),
    "crossover": Scenario(
        name="crossover",
        description=(
            "the best depth depends on concurrency: k2 is +30% at c=1 and -15% at c=8, k1 +12% and -3%, "
            "k3 +25% and -30% (log-linear in concurrency doublings)"
        ),
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, math.log(1.12), (math.log(0.97) - math.log(1.12)) / 3),
            SimArm("k2", 2, math.log(1.30), (math.log(0.85) - math.log(1.30)) / 3),
            SimArm("k3", 3, math.log(1.25), (math.log(0.70) - math.log(1.25)) / 3),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
        concurrency=(1, 2, 4, 8),
    ),
    "null": Scenario(
        name="null",
        description="no effect anywhere: every depth runs exactly as fast as off",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=3,
    ),
    "void-arm": Scenario(
        name="void-arm",
        description="k2's head is broken: it drafts but accepts nothing; k1 and k3 win",
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, 0.10),
            SimArm("k2", 2, -0.05, first_position_rate=0.0),
            SimArm("k3", 3, 0.14),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
    ),
    "drift": Scenario(
        name="drift",
        description="the seat drifts 12% faster from the first boot to the last; no true effect",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=1,
        drift_total=0.12,
    ),
    "blind": Scenario(
        name="blind",
        description="the harness serialises requests: aggregate throughput is flat in concurrency",
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, 0.10),
            SimArm("k2", 2, 0.18),
            SimArm("k3", 3, 0.14),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
        stream_scaling=-1.0,
    ),
}


# --------------------------------------------------------------------------------------------------
# scenarios from a small TOML file or from command-line options (`mtpverdict simulate`)

DEFAULT_ARMS = ("off_A", "k1:1", "k2:2", "k3:3", "off_B")  # a depth sweep bracketed by two controls
DEFAULT_SEED = 0
VOID_ACCEPTANCE = 0.0  # a void arm's head accepts nothing: it drafts and throws every draft away
SIM_KEYS = (
    "name",
    "description",
    "seed",
    "boots",
    "reps",
    "concurrency",
    "completion_tokens",
    "prompt_tokens",
    "base_decode_tps",
    "boot_sd",
    "run_sd",
    "request_sd",
    "drift",
    "cold_factor",
    "void_arms",
    "failed_boots",
    "engine_version",
    "image",
    "arms",
)
ARM_KEYS = ("name", "k", "effect", "effect_slope", "acceptance", "position_decay", "void")
ARM_NAME = NAME_PATTERN  # results format v1


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
    """`NAME` (a control), `NAME:K` or `NAME:K:EFFECT` (a depth with its effect, e.g. k2:2:+5%)."""
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


@dataclass(slots=True)
class _Checked:
    """A mapping read key by key: each bad value becomes a Problem naming its key, and its default."""

    obj: Mapping[str, Any]
    source: str
    problems: list[Any] = field(default_factory=list)

    def bad(self, key: str, message: str) -> None:
        from mtpverdict.errors import Problem

        self.problems.append(Problem(self.source, message, key=key))

    def unknown(self, table: Mapping[str, Any], allowed: Sequence[str], prefix: str = "") -> None:
        for key in table:
            if key not in allowed:
                self.bad(f"{prefix}{key}", f"unknown key; use one of {', '.join(allowed)}")

    def number(self, key: str, default: float, low: float, high: float = math.inf) -> float:
        value = self.obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            self.bad(key, f"must be a number, not {value!r}")
            return default
        if not low <= value <= high:
            self.bad(key, f"{value} is out of range [{low}, {high}]")
            return default
        return float(value)

    def integer(self, key: str, default: int, low: int) -> int:
        value = self.obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.bad(key, f"must be a whole number >= {low}, not {value!r}")
            return default
        return value

    def text(self, key: str, default: str, empty_ok: bool) -> str:
        value = self.obj.get(key, default)
        if not isinstance(value, str) or (not empty_ok and not value):
            self.bad(key, "must be a string" if empty_ok else "must be a non-empty string")
            return default
        return value

    def concurrency(self, default: tuple[int, ...]) -> tuple[int, ...]:
        value = self.obj.get("concurrency", list(default))
        if (
            not isinstance(value, list | tuple)
            or not value
            or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in value)
            or len(set(value)) != len(value)
        ):
            self.bad("concurrency", f"must be a list of distinct whole numbers >= 1, not {value!r}")
            return default
        return tuple(value)

    def names(self, key: str) -> list[str]:
        value = self.obj.get(key, [])
        if not isinstance(value, list | tuple) or any(not isinstance(v, str) for v in value):
            self.bad(key, "must be a list of arm names")
            return []
        return list(value)


def _sim_arm(check: _Checked, raw: Any, where: str, void_names: Sequence[str]) -> SimArm | None:
    """One [[arms]] table as a SimArm, or None after recording what is wrong with it."""
    if not isinstance(raw, Mapping):
        check.bad(where, "must be a table with name, k and effect")
        return None
    check.unknown(raw, ARM_KEYS, f"{where}.")
    arm_name = raw.get("name")
    if not isinstance(arm_name, str) or not re.match(ARM_NAME, arm_name):
        check.bad(f"{where}.name", f"{arm_name!r} is not an arm name (letters, digits, _.+- ; up to 64)")
        return None
    k = raw.get("k", 0)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        check.bad(f"{where}.k", f"must be 0 (speculation off) or a whole number of tokens, not {k!r}")
        return None
    try:
        effect = math.log1p(parse_effect(raw.get("effect", 0.0), f"{where}.effect"))
    except ValueError as exc:
        check.bad(f"{where}.effect", str(exc).split(": ", 1)[1])
        return None
    if k == 0 and effect != 0.0:
        check.bad(f"{where}.effect", "a control arm (k 0) is the baseline: it has no effect")
        return None
    ranged = (
        ("effect_slope", raw.get("effect_slope", 0.0), -1.0, 1.0),
        ("acceptance", raw.get("acceptance", 0.9), 0.0, 1.0),
        ("position_decay", raw.get("position_decay", 0.9), 0.0, 1.0),
    )
    wrong = [
        (key, v, lo, hi)
        for key, v, lo, hi in ranged
        if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi
    ]
    for key, v, lo, hi in wrong:
        check.bad(f"{where}.{key}", f"must be a number in [{lo}, {hi}], not {v!r}")
    void = raw.get("void", False) or arm_name in void_names
    if wrong:
        return None
    if not isinstance(void, bool):
        check.bad(f"{where}.void", "must be true or false")
        return None
    if void and k == 0:
        check.bad(f"{where}.void", "a control arm drafts nothing, so it cannot be void")
        return None
    slope, rate, decay = (float(v) for _, v, _, _ in ranged)
    return SimArm(
        name=arm_name,
        k=k,
        effect=effect,
        effect_slope=slope,
        first_position_rate=VOID_ACCEPTANCE if void else rate,
        position_decay=decay,
    )


def _sim_arms(check: _Checked, void_names: Sequence[str], failed: Sequence[str]) -> list[SimArm]:
    """The [[arms]] tables, then the checks across them (names unique, a control and a candidate)."""
    raw_arms = check.obj.get("arms", [parse_arm(a) for a in DEFAULT_ARMS])
    if not isinstance(raw_arms, list | tuple) or not raw_arms:
        check.bad("arms", "must list the arms ([[arms]] tables with name, k and effect)")
        raw_arms = []
    arms = [
        arm
        for i, raw in enumerate(raw_arms)
        if (arm := _sim_arm(check, raw, f"arms[{i}]", void_names)) is not None
    ]
    names = [a.name for a in arms]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        check.bad("arms", f"arm {dup!r} appears twice")
    if arms and not any(a.k == 0 for a in arms):
        check.bad("arms", "no control arm: add one with k 0 (e.g. off_A first and off_B last)")
    if arms and not any(a.k > 0 for a in arms):
        check.bad("arms", "no candidate arm: add one with k >= 1")
    for key, listed in (("void_arms", void_names), ("failed_boots", failed)):
        for arm_name in listed:
            if arm_name not in names:
                check.bad(key, f"{arm_name!r} is not an arm")
    return arms


def simulation_from_mapping(obj: Mapping[str, Any], source: str) -> Simulation:
    """Build a Simulation from a TOML-like mapping; raise InputError naming each bad key.

    Effects are relative to off (0.05 or "5%" = 5% faster decode); standard deviations and drift are
    on log scale (0.02 is about 2%). Missing keys take the Scenario defaults.
    """
    from mtpverdict.errors import InputError

    check = _Checked(obj, source)
    check.unknown(obj, SIM_KEYS)
    base = Scenario(name="simulated", arms=())
    name = check.text("name", "simulated", empty_ok=False)
    description = check.text("description", "", empty_ok=True)
    seed = check.integer("seed", DEFAULT_SEED, 0)
    concurrency = check.concurrency(base.concurrency)
    void_names, failed = check.names("void_arms"), check.names("failed_boots")
    arms = _sim_arms(check, void_names, failed)
    scenario = Scenario(
        name=name,
        description=description,
        arms=tuple(arms),
        boots_per_arm=check.integer("boots", base.boots_per_arm, 1),
        reps=check.integer("reps", base.reps, 1),
        concurrency=concurrency,
        completion_tokens=check.integer("completion_tokens", base.completion_tokens, 2),
        prompt_tokens=check.integer("prompt_tokens", base.prompt_tokens, 1),
        base_decode_tps=check.number("base_decode_tps", base.base_decode_tps, 1e-3),
        boot_sd=check.number("boot_sd", base.boot_sd, 0.0, 1.0),
        run_sd=check.number("run_sd", base.run_sd, 0.0, 1.0),
        request_sd=check.number("request_sd", base.request_sd, 0.0, 1.0),
        drift_total=check.number("drift", base.drift_total, -1.0, 1.0),
        cold_factor=check.number("cold_factor", base.cold_factor, 0.01, 1.0),
        failed_boots=tuple(failed),
        engine_version=check.text("engine_version", SIMULATED_ENGINE, empty_ok=False),
        image=check.text("image", "", empty_ok=False) if "image" in check.obj else None,
    )
    if check.problems:
        raise InputError(check.problems)
    return Simulation(scenario=scenario, seed=seed)


def simulate(simulation: Simulation) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The campaign and records of a Simulation (its seed drives numpy's default generator)."""
    import numpy as np

    return simulate_campaign(simulation.scenario, np.random.default_rng(simulation.seed))


@dataclass(frozen=True, slots=True)
class Calibration:
    """Outcomes of the real decision engine over many simulated campaigns of one scenario."""

    scenario: str
    campaigns: int
    promotions: int  # decisions "promote" (any arm)
    correct_promotions: int  # promotions of an arm whose true effect is positive
    inconclusive: int
    keep_disabled: int
    keep_reference: int = 0

    @property
    def false_promotions(self) -> int:
        """Promotions of an arm whose true effect is zero or negative."""
        return self.promotions - self.correct_promotions

    def rate_interval(self, count: int, alpha: float = 0.05) -> tuple[float, float]:
        """Two-sided (1 - alpha) Clopper-Pearson interval of count / campaigns."""
        from statsmodels.stats.proportion import proportion_confint

        low, high = proportion_confint(count, self.campaigns, alpha=alpha, method="beta")
        return float(low), float(high)


def combine(parts: Sequence[Calibration]) -> Calibration:
    """Add up calibrations of one scenario run in pieces (disjoint campaign numbers)."""
    if not parts or len({p.scenario for p in parts}) != 1:
        raise ValueError("combine needs one or more calibrations of the same scenario")
    return Calibration(
        scenario=parts[0].scenario,
        campaigns=sum(p.campaigns for p in parts),
        promotions=sum(p.promotions for p in parts),
        correct_promotions=sum(p.correct_promotions for p in parts),
        inconclusive=sum(p.inconclusive for p in parts),
        keep_disabled=sum(p.keep_disabled for p in parts),
        keep_reference=sum(p.keep_reference for p in parts),
    )


def calibrate(scenario: Scenario, policy: Any, campaigns: int, seed: int, start: int = 0) -> Calibration:
    """Run `decide` with `policy` on `campaigns` simulated campaigns; count what it concluded.

    Campaign i is generated from numpy.random.default_rng([seed, i]) for i from `start`, so a long
    calibration split into pieces over disjoint ranges adds up to the same counts as one run.
    """
    import numpy as np

    from mtpverdict.decide import decide
    from mtpverdict.formats.results_io import results_from_records

    truth = {a.name: a.effect for a in scenario.arms}
    promotions = correct = inconclusive = keep = reference = 0
    for i in range(start, start + campaigns):
        campaign, records = simulate_campaign(scenario, np.random.default_rng([seed, i]))
        decision = decide(results_from_records(campaign, records, label=f"sim-{i}"), policy)
        if decision.decision == "promote" and decision.selected is not None:
            promotions += 1
            correct += truth[decision.selected.arm] > 0
        elif decision.decision == "inconclusive":
            inconclusive += 1
        elif decision.decision == "keep_mtp_disabled":
            keep += 1
        elif decision.decision == "keep_reference":
            reference += 1
    return Calibration(
        scenario=scenario.name,
        campaigns=campaigns,
        promotions=promotions,
        correct_promotions=correct,
        inconclusive=inconclusive,
        keep_disabled=keep,
        keep_reference=reference,
    )


# --------------------------------------------------------------------------------------------------
# boot-level campaigns for the procedure-level calibration: per-boot log statistics, vectorised


@dataclass(frozen=True, slots=True)
class BootArm:
    """One arm of a boot-level scenario: its true log effect per design cell and its boot noise."""

    name: str
    control: bool = False
    effects: tuple[float, ...] = ()  # true log effect at each design cell; empty = 0 everywhere
    sd_scale: float = 1.0  # multiplies the boot-to-boot sd (variance x12 is sqrt(12))
    boots: int | None = None  # None: the scenario's boots per arm
    missing_cells: tuple[int, ...] = ()  # design cells this arm never measures (indices)


@dataclass(frozen=True, slots=True)
class BootScenario:
    """A design (arms in round order, cells, boots) and the truth behind its per-boot statistics.

    A boot's log statistic in a cell = the arm's effect there + the boot's shift (sd boot_sd x the
    arm's sd_scale, shared by the boot's cells; Student t with boot_tail_df when set) + cell noise
    (sd cell_sd: the runs of that boot and cell) + drift and slow-ends terms by boot position.
    """

    name: str
    arms: tuple[BootArm, ...]
    cells: tuple[tuple[str, int], ...] = (("chat", 1), ("chat", 4))
    boots: int = 3
    boot_sd: float = 0.02  # the simulator's default (Scenario.boot_sd)
    cell_sd: float = math.sqrt(0.01**2 + 0.005**2)  # one counted run of one stream (Scenario run/request sd)
    boot_tail_df: float | None = None
    drift_total: float = 0.0  # log drift from the first boot to the last
    ends_slow: float = 0.0  # log shift of the campaign's first and last boots
    first_slow: float = 0.0  # log shift of the first boot only (warm-up)
    hump_total: float = 0.0  # log shift of the middle boots against the ends: hump x 4u(1 - u), u in [0, 1]
    ar1: float = 0.0  # AR(1) coefficient of a state drifting through boot order (marginal sd boot_sd)
    outlier_arm: str | None = None  # one boot of this arm (drawn at random) is shifted
    outlier_shift: float = 0.0
    keep_slow: float = 1.0  # probability a candidate's measurement slower than its truth is kept
    keep: float = 1.0  # probability any other measurement is kept
    spread_controls: bool = False  # rotate each round, so control boots sit through the campaign
    description: str = ""
    devices: int = 1  # > 1: every device runs every arm `boots` rounds (a blocked campaign)
    device_sd: float = 0.0  # sd of a device's level, shared by every arm, boot and cell on it
    # devices > 1: True draws every round's order on every device, controls included (collect's
    # layout, stats/layout.py), afresh for each campaign; False keeps the arms' order (off_A first,
    # off_B last: the layout that confounds the controls with the ends of a device)
    drawn: bool = True

    def arm_boots(self, arm: BootArm) -> int:
        return self.boots if arm.boots is None else arm.boots


@dataclass(frozen=True, slots=True)
class BootBatch:
    """Per-boot log statistics of many campaigns, shaped for stats.procedure.batch_procedure."""

    arm: Any  # (B, A, C, Na) float array, NaN = not measured
    control: Any  # (B, C, Nc)
    control_order: Any  # (Nc,) boot positions of the control slots; (B, Nc) when drawn per campaign
    candidates: tuple[str, ...]
    truth: Any  # (A, C) true log effects of the candidates
    devices: int = 1
    arm_blocked: Any = None  # (B, A, C, D, Na / D): the same boots by device (None: one device)
    control_blocked: Any = None  # (B, C, D, Nc / D)
    control_device: Any = None  # (Nc,) device index of each control slot; control_order is per device
    control_end: Any = None  # (Nc,) or (B, Nc): the slot is the first or last boot of its device

    def blocked(self) -> tuple[Any, Any]:
        """arm (B, A, C, D, n) and control (B, C, D, m) for stats.blocked.blocked_batch."""
        if self.arm_blocked is None:
            return self.arm[:, :, :, None, :], self.control[:, :, None, :]
        return self.arm_blocked, self.control_blocked


def _position_terms(scenario: BootScenario, pos: Any, last: float, state: Any) -> Any:
    """Drift, slow ends, slow first boot, hump and the AR(1) state at boot positions (from 1)."""
    import numpy as np

    u = (pos - 1) / max(last - 1, 1)
    terms = scenario.drift_total * u + np.where((pos == 1) | (pos == last), scenario.ends_slow, 0.0)
    terms = terms + np.where(pos == 1, scenario.first_slow, 0.0) + scenario.hump_total * 4 * u * (1 - u)
    if state is not None:
        terms = terms + np.take_along_axis(state, np.asarray(pos - 1).astype(int), axis=-1)
    return terms


def _ar1_state(scenario: BootScenario, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    """An AR(1) series over boot positions, (..., last), marginal sd boot_sd; None without ar1."""
    import numpy as np

    if not scenario.ar1:
        return None
    rho = scenario.ar1
    e = rng.normal(0.0, scenario.boot_sd * math.sqrt(1 - rho**2), shape)
    out = np.empty(shape)
    out[..., 0] = rng.normal(0.0, scenario.boot_sd, shape[:-1])
    for t in range(1, shape[-1]):
        out[..., t] = rho * out[..., t - 1] + e[..., t]
    return out


def boot_orders(scenario: BootScenario) -> dict[tuple[str, int], int]:
    """(arm, boot) -> position in boot order: round-robin, rotated each round when spread_controls."""
    rounds = max(scenario.arm_boots(a) for a in scenario.arms)
    order: dict[tuple[str, int], int] = {}
    arms = list(scenario.arms)
    for r in range(rounds):
        shift = r % len(arms) if scenario.spread_controls else 0
        for arm in arms[shift:] + arms[:shift]:
            if r < scenario.arm_boots(arm):
                order[(arm.name, r + 1)] = len(order) + 1
    return order


def simulate_boots(scenario: BootScenario, rng: np.random.Generator, campaigns: int) -> BootBatch:
    """Draw `campaigns` campaigns of per-boot log statistics at once."""
    import numpy as np

    if scenario.devices > 1:
        return _simulate_devices(scenario, rng, campaigns)
    orders = boot_orders(scenario)
    last = max(orders.values())
    cells = len(scenario.cells)
    slots = {a.name: scenario.arm_boots(a) for a in scenario.arms}
    state = _ar1_state(scenario, rng, (campaigns, last))
    values: dict[str, Any] = {}
    for arm in scenario.arms:
        n = slots[arm.name]
        if scenario.boot_tail_df is None:
            shift = rng.normal(0.0, 1.0, (campaigns, n))
        else:
            shift = rng.standard_t(scenario.boot_tail_df, (campaigns, n))
        shift = shift * scenario.boot_sd * arm.sd_scale
        pos = np.array([orders[(arm.name, b + 1)] for b in range(n)], dtype=float)
        trend = _position_terms(scenario, np.broadcast_to(pos, (campaigns, n)), last, state)
        effects = np.asarray(arm.effects if arm.effects else (0.0,) * cells, dtype=float)
        noise = rng.normal(0.0, scenario.cell_sd, (campaigns, n, cells))
        deviation = shift[:, :, None] + noise
        if scenario.outlier_arm == arm.name:
            hit = rng.integers(0, n, campaigns)
            deviation[np.arange(campaigns), hit, :] += scenario.outlier_shift
        value = effects[None, None, :] + deviation + trend[:, :, None]
        keep = np.where((deviation < 0) & (not arm.control), scenario.keep_slow, scenario.keep)
        value = np.where(rng.random(value.shape) < keep, value, np.nan)
        value[:, :, list(arm.missing_cells)] = np.nan
        values[arm.name] = np.transpose(value, (0, 2, 1))  # (B, C, n)
    controls = [a for a in scenario.arms if a.control]
    candidates = [a for a in scenario.arms if not a.control]
    width = max(slots[a.name] for a in candidates)
    stacked = np.full((campaigns, len(candidates), cells, width), np.nan)
    for i, a in enumerate(candidates):
        stacked[:, i, :, : slots[a.name]] = values[a.name]
    control = np.concatenate([values[a.name] for a in controls], axis=2)
    control_order = np.array(
        [orders[(a.name, b + 1)] for a in controls for b in range(slots[a.name])], dtype=float
    )
    truth = np.array([a.effects if a.effects else (0.0,) * cells for a in candidates], dtype=float)
    ends = (control_order == 1) | (control_order == last)
    return BootBatch(
        stacked, control, control_order, tuple(a.name for a in candidates), truth, control_end=ends
    )


def device_positions(scenario: BootScenario, rng: np.random.Generator, campaigns: int) -> dict[str, Any]:
    """arm -> (B, D, n) position of each of its boots on its device, from 1.

    Drawn per campaign, device and round (every arm, controls included, in a uniform permutation) when
    scenario.drawn, else the arms' order on every device.
    """
    import numpy as np

    arms, devices = scenario.arms, scenario.devices
    rounds = max(scenario.arm_boots(a) for a in arms)
    if scenario.drawn:
        rank = np.argsort(np.argsort(rng.random((campaigns, devices, rounds, len(arms))), axis=-1), axis=-1)
    else:
        rank = np.broadcast_to(np.arange(len(arms)), (campaigns, devices, rounds, len(arms)))
    start = (np.arange(rounds) * len(arms))[None, None, :, None]
    pos = (rank + start + 1).astype(float)
    return {a.name: pos[:, :, : scenario.arm_boots(a), i] for i, a in enumerate(arms)}


def _simulate_devices(scenario: BootScenario, rng: np.random.Generator, campaigns: int) -> BootBatch:
    """A blocked campaign: each device runs every arm each round; its level is added to all its boots.

    Positions (drift, slow ends, control_order) are positions on the boot's own device, laid out as
    collect lays them out (device_positions). The flat arrays (arm, control) hold the same boots
    device-major, for the analysis that ignores devices.
    """
    import numpy as np

    devices, cells = scenario.devices, len(scenario.cells)
    where = device_positions(scenario, rng, campaigns)
    last = float(len(scenario.arms) * max(scenario.arm_boots(a) for a in scenario.arms))
    level = rng.normal(0.0, scenario.device_sd, (campaigns, devices))
    state = _ar1_state(scenario, rng, (campaigns, devices, int(last)))
    values: dict[str, Any] = {}
    for arm in scenario.arms:
        n = scenario.arm_boots(arm)
        shift = rng.normal(0.0, 1.0, (campaigns, devices, n)) * scenario.boot_sd * arm.sd_scale
        pos = where[arm.name]  # (B, D, n)
        trend = _position_terms(scenario, pos, last, state)
        effects = np.asarray(arm.effects if arm.effects else (0.0,) * cells, dtype=float)
        deviation = shift[..., None] + rng.normal(0.0, scenario.cell_sd, (campaigns, devices, n, cells))
        if scenario.outlier_arm == arm.name:
            hit = rng.integers(0, devices * n, campaigns)
            deviation.reshape(campaigns, devices * n, cells)[np.arange(campaigns), hit, :] += (
                scenario.outlier_shift
            )
        value = effects + deviation + trend[..., None] + level[:, :, None, None]
        keep = np.where((deviation < 0) & (not arm.control), scenario.keep_slow, scenario.keep)
        value = np.where(rng.random(value.shape) < keep, value, np.nan)
        value[..., list(arm.missing_cells)] = np.nan
        values[arm.name] = np.transpose(value, (0, 3, 1, 2))  # (B, C, D, n)
    controls = [a for a in scenario.arms if a.control]
    candidates = [a for a in scenario.arms if not a.control]
    width = max(scenario.arm_boots(a) for a in candidates)
    blocked = np.full((campaigns, len(candidates), cells, devices, width), np.nan)
    for i, a in enumerate(candidates):
        blocked[:, i, :, :, : scenario.arm_boots(a)] = values[a.name]
    control = np.concatenate([values[a.name] for a in controls], axis=3)  # (B, C, D, m)
    positions = np.concatenate([where[a.name] for a in controls], axis=2)  # (B, D, m)
    truth = np.array([a.effects if a.effects else (0.0,) * cells for a in candidates], dtype=float)
    return BootBatch(
        arm=blocked.reshape(campaigns, len(candidates), cells, devices * width),
        control=control.reshape(campaigns, cells, -1),
        control_order=positions.reshape(campaigns, -1),
        candidates=tuple(a.name for a in candidates),
        truth=truth,
        devices=devices,
        arm_blocked=blocked,
        control_blocked=control,
        control_device=np.repeat(np.arange(devices), positions.shape[2]),
        control_end=((positions == 1) | (positions == last)).reshape(campaigns, -1),
    )


# --------------------------------------------------------------------------------------------------
# chained acceptance: position i is accepted only if position i-1 was


@dataclass(frozen=True, slots=True)
class ChainModel:
    """Draft rounds of k tokens accepted as a chain, with a per-request acceptance rate.

    Each request draws its per-position rate q from Beta(rate * concentration, (1 - rate) *
    concentration) (None: every request has q = rate); each of its rounds accepts position i with
    probability q given position i-1 was accepted. Requests run `rounds` rounds each, grouped
    `requests_per_window` to a window (a run's /metrics delta).
    """

    k: int = 3
    rate: float = 0.9
    concentration: float | None = None
    requests: int = 16
    rounds: int = 40
    requests_per_window: int = 4

    def truth(self) -> tuple[float, tuple[float, ...]]:
        """True acceptance rate and per-position rates: E[q^i] from the Beta moments."""
        moments = []
        for i in range(1, self.k + 1):
            if self.concentration is None:
                moments.append(self.rate**i)
                continue
            a, b = self.rate * self.concentration, (1 - self.rate) * self.concentration
            moments.append(math.prod((a + j) / (a + b + j) for j in range(i)))
        return sum(moments) / self.k, tuple(moments)


def simulate_chain(model: ChainModel, rng: np.random.Generator, campaigns: int) -> Any:
    """Per-request accepted counts by position, (campaigns, requests, k) integers, drawn as chains."""
    import numpy as np

    shape = (campaigns, model.requests)
    if model.concentration is None:
        q = np.full(shape, model.rate)
    else:
        q = rng.beta(model.rate * model.concentration, (1 - model.rate) * model.concentration, shape)
    draws = rng.random((*shape, model.rounds, model.k)) < q[..., None, None]
    chain = np.cumprod(draws, axis=-1)  # a position counts only when every earlier one was accepted
    return chain.sum(axis=2)
