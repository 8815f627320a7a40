"""Simulated campaigns: a Scenario of arms and noise in, a campaign dict and its records out.

Pure: a Scenario and an explicit numpy Generator in, results format v1 out, every value labelled
synthetic, each boot laid out as collect lays it out (stats/layout.py).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mtpverdict.engines.spec import DEPTH_KEY, canonical, config_argv
from mtpverdict.formats.results import RESULTS_FORMAT

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
            + ([] if arm.k == 0 else config_argv(canonical({"method": "mtp", DEPTH_KEY: arm.k}))),
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
            # the generator's recorded name, `mtpverdict.simulate`, is part of every simulated
            # campaign.json (the fixtures' content hashes and the goldens pin it): it stays
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
