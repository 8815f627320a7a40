"""The gate: the proposal, (1) evidence and (2) support, the envelope, then (3) freshness; and gate(),
which reads the inputs and decides on the results first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mtpverdict._text import terminal_safe
from mtpverdict.engines.names import DEFAULT_ENGINE, ENGINES, Engine
from mtpverdict.errors import InputError, Problem
from mtpverdict.formats.policy import Outside
from mtpverdict.gate.deployment import deployment_reasons, recorded_environment
from mtpverdict.gate.envelope import check_envelope
from mtpverdict.gate.evidence import ArmEvidence, GateEvidence, evidence_from
from mtpverdict.gate.fresh import check_fresh
from mtpverdict.gate.proposal import Proposal, ProposedSpec, parse_spec, resolve_proposal
from mtpverdict.gate.schedule import data_parallel_refusal, proposed_ranges, runs_at, support_schedule
from mtpverdict.gate.support import support
from mtpverdict.servecommand import PROGRAM_VARIABLES, Unproven, split_command
from mtpverdict.serveconfig import ServeConfig, ServeSpec, read_serve_config, spec_of

if TYPE_CHECKING:
    from mtpverdict.compose import ComposeOptions

__all__ = [
    "GateResult",
    "cannot_tell",
    "deployed_control",
    "evaluate",
    "freshness",
    "gate",
    "provisional_reason",
]

SHOWN_DECISION_REASONS = 3


@dataclass(frozen=True, slots=True)
class GateResult:
    """The gate's answer and its reasons (one per line)."""

    supported: bool
    reasons: tuple[str, ...]
    decision: str
    selected: str | None
    label: str  # what was proposed, as --proposed says it or the serve config's spec
    spec: str  # the proposed spec as method and depth (or off), when known


def evaluate(
    evidence: GateEvidence,
    proposed: ProposedSpec | None,
    config: ServeConfig | None,
    ignore: tuple[str, ...] = (),
) -> GateResult:
    """The gate over typed evidence: what runs, the proposal, evidence and support, then freshness."""
    unproven = cannot_tell(config) if config is not None else []
    if config is not None and unproven:
        reasons = [*unproven, *_compose_line(config)]
        return GateResult(
            False, _lines(reasons), evidence.decision, evidence.selected, terminal_safe(config.source), ""
        )
    if config is not None:  # variables the evidence's compose service recorded alike (gate/deployment.py)
        ignore = (*ignore, *recorded_environment(evidence.deployment, config))
    serve = spec_of(config) if config is not None else None
    proposal = resolve_proposal(proposed, serve, config.source if config else "")
    source = config.source if config else ""
    label = proposed.text if proposed else (serve.label() if isinstance(serve, ServeSpec) else source)
    if isinstance(proposal, list):
        return GateResult(
            False, _lines(proposal), evidence.decision, evidence.selected, terminal_safe(label), label
        )
    scheduled = evidence.schedule is not None or (
        proposal.serve is not None and bool(proposal.serve.schedule)
    )
    ok, reasons, arm = support_schedule(evidence, proposal) if scheduled else support(evidence, proposal)
    if proposal.off and config is not None:
        arm = deployed_control(evidence, config, ignore)
    depths = sorted({k for _, _, k in proposed_ranges(proposal) if k}) if not proposal.off else []
    inside, envelope = check_envelope(evidence, depths, config)
    ok, reasons = ok and inside, reasons + envelope
    parallel = data_parallel_refusal(proposal, config)
    if parallel is not None:
        ok, reasons = False, [*reasons, parallel]
    firm = provisional_reason(evidence, proposal.off)
    if firm is not None:
        ok = ok and (evidence.accept_provisional or proposal.off)
        reasons = [*reasons, firm]
    if config is not None:
        fresh_ok, fresh = freshness(evidence, proposal, arm, config, ignore, scheduled)
        by_hash_ok, by_hash = deployment_reasons(evidence.deployment, config)  # gate/deployment.py
        ok, reasons = ok and fresh_ok and by_hash_ok, reasons + fresh + by_hash
    if not ok:
        reasons += [f"decision reason: {r}" for r in evidence.reasons[:SHOWN_DECISION_REASONS]]
    if config is not None:
        reasons += _compose_line(config)
    spec = serve.label() if isinstance(serve, ServeSpec) else (arm.label if arm else proposal.label)
    return GateResult(ok, _lines(reasons), evidence.decision, evidence.selected, terminal_safe(label), spec)


def cannot_tell(config: ServeConfig) -> list[str]:
    """Why the gate cannot tell what a serve config runs (empty when it can): what reading it found
    (interpolation, a shell line, a project only Compose resolves) and a program it does not model."""
    found = list(config.refusals)
    found += [
        f"environment variable {name} changes which code the server runs"
        for name, _ in config.env_values
        if name in PROGRAM_VARIABLES
    ]
    command = split_command(config.argv, names_program=config.names_program)
    if isinstance(command, Unproven):
        found.append(command.reason)
    return [f"cannot tell what runs: {r}" for r in found]


def _compose_line(config: ServeConfig) -> list[str]:
    describe = getattr(config.compose, "describe", None)
    return [describe()] if callable(describe) else []


def provisional_reason(evidence: GateEvidence, off: bool) -> str | None:
    """What the gate says of a provisional decision (None for a firm one). Speculation is refused on
    one unless the policy accepts it; keeping it off, the configuration every campaign starts from,
    is not."""
    if not evidence.provisional:
        return None
    if off:
        what = "keeping speculation off is not refused for it"
    elif evidence.accept_provisional:
        what = 'accepted by the policy ([gate] provisional = "accept")'
    else:
        what = 'refused unless the policy accepts it ([gate] provisional = "accept")'
    return (
        "the decision is provisional (fewer than 3 degrees of freedom for the boot-to-boot variance: "
        f"too few boots to know the noise): {what}"
    )


def freshness(
    evidence: GateEvidence,
    proposal: Proposal,
    arm: ArmEvidence | None,
    config: ServeConfig,
    ignore: tuple[str, ...],
    scheduled: bool,
) -> tuple[bool, list[str]]:
    """Whether the serve config runs as the evidence was collected, with the reasons: against the arm
    of the proposal, or for a schedule against every arm its ranges run (a control for off ranges)."""
    arms = [arm] if not scheduled or proposal.off else _schedule_arms(evidence, proposal, config, ignore)
    checked = list(dict.fromkeys(a for a in arms if a is not None))
    stale = []
    for one in checked:
        found = check_fresh(one, evidence, config, ignore)
        stale += found if len(checked) == 1 else [f"{one.name}: {r}" for r in found]
    if stale:
        return False, stale
    if not checked:
        return True, []
    names = ", ".join(a.name for a in checked)
    said = [
        f"evidence is fresh: {config.source} matches the serve arguments {names} "
        f"{'was' if ',' not in names else 'were'} collected with, except the speculative flags (checked "
        "above) and the listen address"
    ]
    if config.image is None:
        said.append(
            f"the engine version is not checked: {config.source} names no image (the program's path "
            "says nothing the gate can compare with the evidence)"
        )
    return True, said


def _schedule_arms(
    evidence: GateEvidence, proposal: Proposal, config: ServeConfig, ignore: tuple[str, ...]
) -> list[ArmEvidence | None]:
    """The arm behind each depth a scheduled proposal runs, and where a range runs off the control
    this deployment is."""
    depths = {k for _, _, k in proposed_ranges(proposal)}
    out: list[ArmEvidence | None] = []
    for k in sorted(d for d in depths if d):
        supporting = runs_at(evidence, k)
        out.append(next((a for a in evidence.arms if a.name in supporting), None))
    if 0 in depths:
        out.append(deployed_control(evidence, config, ignore))
    return out


def deployed_control(
    evidence: GateEvidence, config: ServeConfig, ignore: tuple[str, ...]
) -> ArmEvidence | None:
    """The control this deployment is: the one its serve config matches best (families can have
    controls on other models or devices)."""
    controls = [a for a in evidence.arms if a.control]
    return min(controls, key=lambda a: len(check_fresh(a, evidence, config, ignore)), default=None)


def _lines(reasons: Sequence[str]) -> tuple[str, ...]:
    return tuple(terminal_safe(r) for r in reasons)


def proposal_engine(config: ServeConfig | None, scope_engine: str | None) -> Engine:
    """The engine whose speculative config a JSON --proposed is: the serve config's, else the one
    the evidence's campaign names, else the default (vLLM's, as its config JSON is documented)."""
    serve = spec_of(config) if config is not None else None
    if isinstance(serve, ServeSpec) and serve.engine is not None:
        return serve.engine
    if scope_engine in {e.value for e in ENGINES}:
        return Engine(scope_engine)
    return DEFAULT_ENGINE


def gate(
    results_dir: str | Path,
    rules: str | None,
    proposed_text: str | None,
    *,
    serve_config: str | None = None,
    service: str | None = None,
    ignore: tuple[str, ...] = (),
    compose: ComposeOptions | None = None,
) -> GateResult:
    """Read the inputs, decide on the results with the policy, then evaluate the gate."""
    from mtpverdict.decide import decide_directory

    if proposed_text is None and serve_config is None:
        raise InputError(
            [
                Problem(
                    "--proposed",
                    "missing: give --proposed SPEC, or --serve-config FILE to read the spec from",
                )
            ]
        )
    json_given = proposed_text is not None and proposed_text.strip().startswith("{")
    proposed = parse_spec(proposed_text) if proposed_text is not None and not json_given else None
    config = read_serve_config(serve_config, service, compose) if serve_config else None
    run = decide_directory(results_dir, rules)
    if proposed_text is not None and json_given:  # the JSON of the engine the proposal runs on
        proposed = parse_spec(proposed_text, proposal_engine(config, run.results.campaign.scope.engine))
    accept = run.policy.gate.provisional is Outside.ACCEPT
    return evaluate(evidence_from(run.decision, run.results, accept), proposed, config, ignore)
