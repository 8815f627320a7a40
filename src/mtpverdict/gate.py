"""The promotion gate: does the evidence support the speculative config a deployment will run, freshly?

What is proposed comes from `--proposed` (off, k=N, METHOD:k=N or vLLM's config JSON), from the serve
config itself (serveconfig.extract_spec), or both, which must then agree. Three questions, all must pass.
(1) Evidence: some arm measured this configuration (method, depth and, when the serve config and the
boot argv both show them, every speculative setting); otherwise "no evidence for this configuration".
(2) Support: "off" is supported only by keep_mtp_disabled (keeping speculation off is a claim that needs
evidence too); a depth only by promote or keep_reference selecting that arm. A refusal cites the arm's
own failing rules. (3) Freshness: the serve arguments equal those the arm was collected with, except
the speculative flags (compared in (1)) and the listen address; the image names the engine version the
evidence recorded.

The logic runs over GateEvidence, a small typed view built in one place (evidence_from) from a
decision and its results directory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mtpverdict._text import markdown_safe, terminal_safe
from mtpverdict.errors import InputError, Problem
from mtpverdict.formats.decision import ContextEnvelope, Decision, Schedule
from mtpverdict.formats.policy import Outside, Severity
from mtpverdict.serveconfig import (
    DepthRange,
    ServeConfig,
    ServeSpec,
    SpecRefusal,
    extract_spec,
    is_speculative_flag,
    normalise_flag,
    read_serve_config,
    settings_differences,
    spec_of,
)

if TYPE_CHECKING:
    from mtpverdict.formats.results_io import Results

__all__ = [
    "ArmEvidence",
    "FailingRule",
    "GateEvidence",
    "GateResult",
    "Proposal",
    "ProposedSpec",
    "argv_differences",
    "check_fresh",
    "evaluate",
    "evidence_from",
    "gate",
    "image_version",
    "normalise_argv",
    "parse_spec",
    "read_serve_config",  # re-exported: the reader lives in mtpverdict.serveconfig
    "resolve_proposal",
    "step_summary",
    "support",
    "write_ci_error",
    "write_ci_files",
]

# Flags allowed to differ between the evidence and the proposal besides the speculative ones: where
# the server listens, which cannot change what it computes.
LISTEN_FLAGS = ("--host", "--port")
VERSION = re.compile(r"v?(\d+\.\d+(?:\.\d+)?(?:[.\-+]?[A-Za-z0-9]+)*)")
SUPPORTING = ("promote", "keep_reference")  # decisions that select a speculative arm
SHOWN_ARMS = 3  # matching arms whose own rules a refusal lists
SHOWN_MEASURED = 12  # measured configurations listed when there is no evidence
SHOWN_DECISION_REASONS = 3


# --------------------------------------------------------------------------------------------------
# what is proposed


@dataclass(frozen=True, slots=True)
class ProposedSpec:
    """What --proposed says: speculation off, or a depth with or without a method."""

    method: str | None
    k: int | None
    text: str

    @property
    def off(self) -> bool:
        return self.method is None and not self.k


def parse_spec(text: str) -> ProposedSpec:
    """`off`, `k=3`, `mtp:k=3` / `ngram:k=2`, or the JSON given to --speculative-config."""
    raw = text.strip()
    if raw.lower() in ("off", "none", "disabled", "k=0"):
        return ProposedSpec(None, None, raw)
    if raw.startswith("{"):
        spec = extract_spec(["--speculative-config", raw])
        if isinstance(spec, SpecRefusal):
            raise InputError([Problem("--proposed", spec.reasons[0])])
        return ProposedSpec(spec.method, spec.k, raw)
    found = re.fullmatch(r"(?:([a-z_0-9]+):)?k=(\d+)", raw)
    if not found:
        raise InputError(
            [Problem("--proposed", f"{raw!r}: write off, k=N, METHOD:k=N or the speculative config JSON")]
        )
    if found.group(1) and int(found.group(2)) == 0:
        raise InputError(
            [Problem("--proposed", f"{raw!r}: a method needs k >= 1; write off for no speculation")]
        )
    return ProposedSpec(found.group(1), int(found.group(2)), raw)


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the gate checks: method and depth (method None with a depth: any method), and the full
    speculative settings when a serve config (or vLLM's config JSON) gives them."""

    method: str | None
    k: int | None
    label: str
    serve: ServeSpec | None = None

    @property
    def off(self) -> bool:
        return self.method is None and self.k is None


def resolve_proposal(
    proposed: ProposedSpec | None, serve: ServeSpec | SpecRefusal | None, source: str
) -> Proposal | list[str]:
    """The proposal from --proposed and the serve config, or the reasons it is refused."""
    if isinstance(serve, SpecRefusal):
        return [f"the speculative config of {source} cannot be read: {r}" for r in serve.reasons]
    given = None
    if proposed is not None and proposed.text.startswith("{"):
        found = extract_spec(["--speculative-config", proposed.text])
        given = found if isinstance(found, ServeSpec) else None
    if serve is None:
        assert proposed is not None  # gate() refuses a call with neither
        return Proposal(proposed.method, proposed.k, proposed.text, given)
    if proposed is None:
        return Proposal(serve.method, serve.k, serve.label(), serve)
    disagree = (
        proposed.off != serve.off
        or (not serve.off and proposed.k != serve.k)
        or (proposed.method is not None and proposed.method != serve.method)
    )
    differences = settings_differences(given, serve) if given and serve.engine == given.engine else []
    if disagree or differences:
        return [
            f"--proposed {proposed.text} but {source} asks for {serve.label()}"
            + (f" ({'; '.join(differences)})" if differences else "")
            + ": the gate checks what will be deployed"
        ]
    return Proposal(serve.method, serve.k, proposed.text, serve)


# --------------------------------------------------------------------------------------------------
# the evidence, as the gate reads it


@dataclass(frozen=True, slots=True)
class FailingRule:
    """A rule an arm did not pass: its outcome and the rule's own words."""

    rule: str
    severity: str  # veto | warn
    status: str  # fail | inconclusive | missing
    detail: str


@dataclass(frozen=True, slots=True)
class ArmEvidence:
    """One arm: its spec and verdict, the rules it failed, and what it was served with."""

    name: str
    control: bool
    method: str | None
    k: int | None
    verdict: str
    failing: tuple[FailingRule, ...]
    serve_argv: tuple[str, ...] | None  # the campaign's serve_argv
    boot_argv: tuple[str, ...] | None  # the argv of the arm's first boot that recorded one
    engine_versions: tuple[str, ...]  # as the arm's boots recorded them

    @property
    def label(self) -> str:
        if self.method is None and not self.k:
            return "off"
        return f"{self.method} k={'?' if self.k is None else self.k}"

    @property
    def argv(self) -> tuple[str, ...] | None:
        return self.boot_argv or self.serve_argv


@dataclass(frozen=True, slots=True)
class GateEvidence:
    """What the gate needs of a decision and its results: kind, selection, reasons, arms."""

    decision: str
    selected: str | None
    reasons: tuple[str, ...]
    arms: tuple[ArmEvidence, ...]
    engine_version: str | None  # the campaign scope's, used when no boot recorded one
    schedule: Schedule | None = None  # the decision's depth per batch-size range
    envelopes: tuple[ContextEnvelope, ...] = ()  # prompt-token envelopes of the promoted arms
    provisional: bool = False  # the decision rests on too few degrees of freedom to be firm
    accept_provisional: bool = False  # the policy's [gate] provisional = "accept"

    def arm(self, name: str | None) -> ArmEvidence | None:
        return next((a for a in self.arms if a.name == name), None)


def evidence_from(decision: Decision, results: Results, accept_provisional: bool = False) -> GateEvidence:
    """The adapter: GateEvidence from a decision and the results it was made on."""
    argvs: dict[str, list[tuple[str, ...]]] = {}
    versions: dict[str, set[str]] = {}
    boots = results.boots.sort_values(["arm", "boot"]) if len(results.boots) else results.boots
    for name, argv, version in zip(boots["arm"], boots["argv"], boots["engine_version"], strict=True):
        if isinstance(argv, list | tuple):
            argvs.setdefault(str(name), []).append(tuple(argv))
        if isinstance(version, str):
            versions.setdefault(str(name), set()).add(version)
    arms = []
    for arm in decision.arms:
        failing = tuple(
            FailingRule(r.rule, str(r.severity), str(r.status), r.detail)
            for r in sorted(arm.rules, key=lambda r: r.severity is not Severity.VETO)
            if not r.passed
        )
        measured = argvs.get(arm.name, [])
        arms.append(
            ArmEvidence(
                name=arm.name,
                control=arm.is_control,
                method=None if arm.spec.method is None else str(arm.spec.method),
                k=arm.spec.k,
                verdict=str(arm.verdict),
                failing=failing,
                serve_argv=results.campaign.arm(arm.name).serve_argv,
                boot_argv=measured[0] if measured else None,
                engine_versions=tuple(sorted(versions.get(arm.name, ()))),
            )
        )
    return GateEvidence(
        decision=str(decision.decision),
        selected=decision.selected_arm,
        reasons=decision.reasons,
        arms=tuple(arms),
        engine_version=results.campaign.scope.engine_version,
        schedule=decision.schedule,
        envelopes=decision.envelopes,
        provisional=decision.provisional,
        accept_provisional=accept_provisional,
    )


# --------------------------------------------------------------------------------------------------
# (1) evidence and (2) support


def _mismatch(arm: ArmEvidence, proposal: Proposal) -> str | None:
    """Why an arm did not measure the proposed configuration; None when it did."""
    if proposal.off:
        return None if arm.control else "speculates"
    if arm.control or arm.k != proposal.k or proposal.method not in (None, arm.method):
        return "another method or depth"
    measured = None if arm.argv is None else extract_spec(arm.argv)
    if isinstance(measured, ServeSpec) and measured.schedule:
        return "it ran a per-batch-size schedule, not one depth at every batch size"
    if proposal.serve is None or measured is None:
        return None  # method and depth are all either side shows (freshness then needs the argv)
    if isinstance(measured, SpecRefusal):
        return f"its speculative flags cannot be read ({measured.reasons[0]})"
    differences = settings_differences(measured, proposal.serve)
    return f"other speculative settings ({'; '.join(differences)})" if differences else None


def support(evidence: GateEvidence, proposal: Proposal) -> tuple[bool, list[str], ArmEvidence | None]:
    """Whether the decision supports the proposal, the reasons, and the arm that measured it."""
    kind = evidence.decision
    selected = evidence.arm(evidence.selected)
    if proposal.off:
        control = next((a for a in evidence.arms if a.control), None)
        if kind == "keep_mtp_disabled":
            return True, ["the decision keeps speculation disabled"], control
        chosen = f" (selected {selected.name}: {selected.label})" if selected else ""
        return (
            False,
            [
                f"proposing speculation off, but the decision is {kind}{chosen}; "
                "keeping speculation off needs evidence too"
            ],
            control,
        )
    matched = [a for a in evidence.arms if _mismatch(a, proposal) is None]
    if not matched:
        return False, _no_evidence(evidence, proposal), None
    if selected in matched and kind in SUPPORTING:
        assert selected is not None
        return True, [f"the decision ({kind}) selects {selected.name}: {selected.label}"], selected
    return False, _refusal(evidence, proposal, matched), matched[0]


def _no_evidence(evidence: GateEvidence, proposal: Proposal) -> list[str]:
    candidates = [a for a in evidence.arms if not a.control]
    measured = ", ".join(f"{a.name} ({a.label})" for a in candidates[:SHOWN_MEASURED])
    more = len(candidates) - SHOWN_MEASURED
    reasons = [
        f"no evidence for this configuration: {proposal.label} was never measured; the campaign measured "
        + (measured or "no speculative arm")
        + (f" and {more} more" if more > 0 else "")
    ]
    for arm in candidates:
        why = _mismatch(arm, proposal)
        if why and why != "another method or depth":
            reasons.append(f"{arm.name} ({arm.label}) ran {why}")
    return reasons


def _refusal(evidence: GateEvidence, proposal: Proposal, matched: Sequence[ArmEvidence]) -> list[str]:
    kind = evidence.decision
    selected = evidence.arm(evidence.selected)
    if kind in SUPPORTING and selected is not None:
        head = (
            f"proposing {proposal.label}, but the decision ({kind}) selects {selected.name} "
            f"with k={selected.k}"
        )
    else:
        head = f"proposing {proposal.label}, but the decision is {kind}: no depth is supported"
    reasons = [head]
    for arm in matched[:SHOWN_ARMS]:
        if not arm.failing:
            reasons.append(f"{arm.name} ({arm.label}): {arm.verdict}; it fails none of its rules")
            continue
        reasons.append(f"{arm.name} ({arm.label}): {arm.verdict}, by its own rules:")
        reasons += [f"  {r.rule} ({r.severity}, {r.status}): {r.detail}" for r in arm.failing]
    return reasons


# --------------------------------------------------------------------------------------------------
# schedules: a depth per batch-size range, checked range by range

DEPTH_KEYS = ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")  # what a schedule varies
Ranges = list[tuple[int, int, int]]  # (first batch, last batch, k); the last range carries on past its end


def proposed_ranges(proposal: Proposal) -> Ranges:
    """The proposal as vLLM runs it: its schedule (a gap carries the previous depth, as vLLM fills it),
    else one depth at every batch size."""
    schedule: tuple[DepthRange, ...] = () if proposal.serve is None else proposal.serve.schedule
    if not schedule:
        return [(1, 1, 0 if proposal.off or proposal.k is None else proposal.k)]
    ends = [r.first_batch - 1 for r in schedule[1:]] + [schedule[-1].last_batch]
    return [(r.first_batch, end, r.k) for r, end in zip(schedule, ends, strict=True)]


def evidence_ranges(evidence: GateEvidence) -> Ranges | None:
    """The depth the decision runs per batch size; None when it supports no configuration."""
    kind = evidence.decision
    if evidence.schedule is not None and kind in SUPPORTING:
        return [(r.start, r.end, r.k) for r in evidence.schedule.ranges]
    selected = evidence.arm(evidence.selected)
    if kind in SUPPORTING and selected is not None and selected.k is not None:
        return [(1, 1, selected.k)]
    if kind == "keep_mtp_disabled":
        return [(1, 1, 0)]
    return None


def _depth(ranges: Ranges, batch: int) -> int:
    return next((k for a, b, k in ranges if a <= batch <= b), ranges[-1][2])


def differences(evidence: Ranges, proposed: Ranges) -> list[tuple[int, int, int, int]]:
    """(first, last, proposed k, evidence k) wherever the two differ; the last piece is open-ended."""
    cuts = sorted({a for a, _, _ in evidence} | {a for a, _, _ in proposed} | {evidence[-1][1] + 1})
    cuts = sorted({*cuts, proposed[-1][1] + 1})
    out: list[tuple[int, int, int, int]] = []
    for i, start in enumerate(cuts):
        end = cuts[i + 1] - 1 if i + 1 < len(cuts) else 0  # 0: and beyond
        mine, theirs = _depth(proposed, start), _depth(evidence, start)
        if mine != theirs:
            if out and out[-1][2:] == (mine, theirs) and out[-1][1] == start - 1:
                out[-1] = (out[-1][0], end, mine, theirs)
            else:
                out.append((start, end, mine, theirs))
    return out


def _span(first: int, last: int) -> str:
    if last == 0:
        return f"batch sizes {first} and above"
    return f"batch size {first}" if first == last else f"batch sizes {first}-{last}"


def _depth_proposal(proposal: Proposal, k: int) -> Proposal:
    """One depth of a scheduled proposal, with the settings an arm of that depth would record."""
    if proposal.serve is None:
        return Proposal(proposal.method, k, f"k={k}")
    settings = {key: v for key, v in proposal.serve.settings_dict().items() if key not in DEPTH_KEYS}
    settings["num_speculative_tokens"] = k
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    serve = ServeSpec(proposal.serve.engine, proposal.serve.method, k, text)
    return Proposal(proposal.method, k, f"{proposal.method} k={k}", serve)


def support_schedule(
    evidence: GateEvidence, proposal: Proposal
) -> tuple[bool, list[str], ArmEvidence | None]:
    """A proposal or a decision with a per-batch-size schedule: each range against the evidence."""
    mine = proposed_ranges(proposal)
    sized = _drafter_size(proposal, mine)
    if sized is not None:
        return False, [sized], None
    theirs = evidence_ranges(evidence)
    if theirs is None:
        return (
            False,
            [f"proposing {proposal.label}, but the decision is {evidence.decision}: no depth is supported"],
            None,
        )
    reasons: list[str] = []
    arms: dict[int, ArmEvidence | None] = {}
    for k in sorted({k for _, _, k in mine if k}):
        depth = _depth_proposal(proposal, k)
        matched = [a for a in evidence.arms if _mismatch(a, depth) is None]
        supporting = _runs_at(evidence, k)
        arms[k] = next((a for a in matched if a.name in supporting), None)
        if not matched:
            reasons += [f"k={k}: " + r for r in _no_evidence(evidence, depth)]
        elif arms[k] is None:
            reasons.append(
                f"k={k}: {', '.join(a.name for a in matched)} measured these settings, but "
                f"{'it is' if len(matched) == 1 else 'they are'} not the arm the decision runs at this "
                f"depth ({', '.join(sorted(supporting)) or 'none'})"
            )
    wrong = differences(theirs, mine)
    for first, last, k, runs in wrong:
        reasons.append(f"{_span(first, last)}: proposing k={k}, but the evidence runs k={runs} there")
    ok = not wrong and all(arms.values())
    if ok:
        reasons.append(
            "every batch-size range runs the depth the decision supports there: "
            + ", ".join(f"{_span(a, b)} k={k}" for a, b, k in _closed(mine))
        )
    elif evidence.schedule is not None:
        reasons += [
            f"decision schedule {_span(r.start, r.end)}: k={r.k}: {r.reasons[0]}"
            for r in evidence.schedule.ranges
        ]
    top = max(k for _, _, k in mine)
    arm = arms.get(top) if top else next((a for a in evidence.arms if a.control), None)
    return ok, reasons, arm


DATA_PARALLEL_FLAGS = ("--data-parallel-size", "-dp")


def data_parallel_refusal(proposal: Proposal, config: ServeConfig | None) -> str | None:
    """Why a scheduled proposal would not run as proposed: vLLM turns the schedule off under data
    parallelism and runs num_speculative_tokens at every batch size. None when it runs."""
    if config is None or proposal.serve is None or not proposal.serve.schedule:
        return None
    given = last_value(config.argv, DATA_PARALLEL_FLAGS)
    size = None if given is None else given[1]
    if size is None or not size.isdigit() or int(size) <= 1:
        return None
    return (
        f"{config.source}: vLLM turns the per-batch-size schedule off under data parallelism "
        f"(data parallel size {size}) and would run k={proposal.serve.k} at every batch size; serve "
        "without data parallelism or propose one depth"
    )


def last_value(argv: Sequence[str], flags: Sequence[str]) -> tuple[str, str] | None:
    """(flag, value) of the last of `flags` given (`--flag V` or `--flag=V`; long flags normalised):
    the spellings of one setting, of which an engine runs the last."""
    found = None
    tokens = list(argv)
    for i, token in enumerate(tokens):
        name, eq, value = token.partition("=")
        flag = normalise_flag(name) if name.startswith("--") else name
        if flag in flags and (eq or i + 1 < len(tokens)):
            found = (flag, value if eq else tokens[i + 1])
    return found


def _drafter_size(proposal: Proposal, ranges: Ranges) -> str | None:
    """Why a scheduled proposal's num_speculative_tokens is not what was measured: vLLM sizes the
    drafter by it (every arm ran it equal to its depth, a schedule arm to its largest), so it must be
    the schedule's largest depth; a schedule that never drafts still loads the drafter."""
    if proposal.serve is None or not proposal.serve.schedule:
        return None
    top = max(k for _, _, k in ranges)
    if proposal.serve.k == top:
        return None
    fix = "serve without --speculative-config" if top == 0 else f"set num_speculative_tokens to {top}"
    return (
        f"num_speculative_tokens {proposal.serve.k} is not the schedule's largest depth {top}: vLLM sizes "
        f"the drafter by it and no arm ran it so; {fix}"
    )


def _runs_at(evidence: GateEvidence, k: int) -> set[str]:
    """The arms whose evidence the decision runs at depth k: its schedule's, or its selected arm."""
    if evidence.schedule is not None:
        return {r.arm for r in evidence.schedule.ranges if r.k == k and r.arm is not None}
    selected = evidence.arm(evidence.selected)
    return {selected.name} if selected is not None and selected.k == k else set()


def _closed(ranges: Ranges) -> Ranges:
    """The last range open-ended (vLLM carries it on), for the reasons."""
    return [*ranges[:-1], (ranges[-1][0], 0, ranges[-1][2])]


# --------------------------------------------------------------------------------------------------
# the context envelope: prompts the serve config allows, against where the promotion holds

CONTEXT_FLAGS = ("--max-model-len", "--context-length", "--ctx-size", "-c")  # vLLM, SGLang, llama.cpp x2
UNBOUNDED = ("-1", "auto", "0")  # vLLM's auto and llama.cpp's 0: the model's own (unknown) context
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)")
_MULTIPLIER = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
}


def context_limit(argv: Sequence[str]) -> tuple[str, int | None] | None:
    """(flag, tokens) of the context a serve command allows (tokens None: the model's own, not bounded
    here); None when no flag sets it. Values as vLLM reads them: 32768, 32k (decimal) or 32K (binary)."""
    given = last_value(argv, CONTEXT_FLAGS)
    if given is None:
        return None
    flag, value = given[0], given[1].strip()
    found = _HUMAN.fullmatch(value)
    if value in UNBOUNDED or found is None:
        return flag, None
    return flag, int(float(found.group(1)) * _MULTIPLIER[found.group(2)])


def check_envelope(
    evidence: GateEvidence, depths: Sequence[int | None], config: ServeConfig | None
) -> tuple[bool, list[str]]:
    """Whether the serve config keeps prompts inside the envelope of every proposed depth's arm."""
    ok, reasons = True, []
    for e in evidence.envelopes:
        arm = evidence.arm(e.arm)
        if e.fails_from is None or arm is None or arm.k not in depths:
            continue
        head = f"context envelope ({e.rule}): {e.detail}"
        if e.accepted:
            reasons.append(f"{head}; the policy accepts contexts beyond it")
            continue
        if config is None:
            reasons.append(f"{head}; no serve config, so the context a deployment allows is not checked")
            continue
        found = context_limit(config.argv)
        fix = (
            f"set it below {e.fails_from:,} tokens, or accept contexts beyond the envelope on purpose "
            '([gate] outside_envelope = "accept")'
        )
        if found is None or found[1] is None:
            what = (
                "sets no context limit" if found is None else f"leaves the context to the model ({found[0]})"
            )
            reasons.append(f"{head}; {config.source} {what}: {fix}")
            ok = False
        elif found[1] >= e.fails_from:
            reasons.append(f"{head}; {config.source} allows {found[1]:,} tokens ({found[0]}): {fix}")
            ok = False
        else:
            reasons.append(
                f"context within the envelope ({e.rule}): {found[0]} {found[1]:,} < {e.fails_from:,}"
            )
    return ok, reasons


# --------------------------------------------------------------------------------------------------
# (3) freshness


SERVERS = re.compile(r"vllm|sglang|llama-server[\w.-]*|server|text-generation-launcher")
PYTHON = re.compile(r"python[\d.]*t?")


def _program_name(token: str) -> str:
    """A token's file name, without a Windows path or .exe: /b/llama-server, C:\\x\\llama-server.exe."""
    return token.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".exe")


def program_end(argv: Sequence[str]) -> int:
    """Where the settings of a serve command line start: after the serving program (a server by its
    file name, or a Python interpreter's options up to `-m MODULE` or its script), with whatever
    wraps it (nice, taskset, env, ...), and after a `serve` subcommand. 0 when no serving program
    comes before the first long flag: the line opens with a setting (a flag, or the model an image's
    `vllm serve` entrypoint takes)."""
    at = None
    for j, token in enumerate(argv):
        if token.startswith("--"):
            break
        name = _program_name(token)
        if PYTHON.fullmatch(name) or SERVERS.fullmatch(name):
            at = j
            break
    if at is None:
        return 0
    i = at + 1
    if PYTHON.fullmatch(_program_name(argv[at])):
        while i < len(argv) and argv[i] != "-m" and argv[i].startswith("-"):
            i += 1  # interpreter options (-u, -O, ...)
        i = min(i + 2, len(argv)) if i < len(argv) and argv[i] == "-m" else min(i + 1, len(argv))
    return i + 1 if i < len(argv) and argv[i] == "serve" else i


# vLLM 0.32's short spellings of its settings (vllm/engine/arg_utils.py, add_argument with two names)
VLLM_SHORT = {
    "-q": "--quantization",
    "-pp": "--pipeline-parallel-size",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-tp": "--tensor-parallel-size",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpn": "--data-parallel-rank",
    "-dpr": "--data-parallel-start-rank",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpp": "--data-parallel-rpc-port",
    "-dpb": "--data-parallel-backend",
    "-dph": "--data-parallel-hybrid-lb",
    "-dpe": "--data-parallel-external-lb",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
    "-dc": "--diffusion-config",
    "-cc": "--compilation-config",
    "-ac": "--attention-config",
}


def short_flags(argv: Sequence[str], image: str | None = None) -> Mapping[str, str]:
    """The short flags of the engine a command line runs: vLLM's when its serving program is vLLM (a
    `vllm` executable or a `vllm.` module), or when it names no program and its image is vLLM's; none
    otherwise (llama.cpp's -n is not --nnodes)."""
    end = program_end(argv)
    if end:
        runs_vllm = any(_program_name(t) == "vllm" or t.startswith("vllm.") for t in argv[:end])
    else:
        runs_vllm = bool(image) and "vllm" in _program_name(str(image).split(":")[0]).lower()
    return VLLM_SHORT if runs_vllm else {}


def normalise_argv(
    argv: Sequence[str], short: Mapping[str, str] | None = None
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Flags (names with _ as -, values in order) and the positionals of a serve command line.

    The program part (program_end) is skipped; a positional where the settings start is the model
    (`vllm serve MODEL`, or a command for an image whose entrypoint is `vllm serve`) and is compared
    as --model. A short flag is named by its long name when `short` (the engine's, short_flags) has it,
    and is a setting of its own otherwise.
    """
    short = short_flags(argv) if short is None else short
    argv = list(argv)
    flags: dict[str, list[str]] = {}
    positionals: list[str] = []
    i = program_end(argv)
    if i < len(argv) and not argv[i].startswith("-"):
        flags.setdefault("--model", []).append(argv[i])
        i += 1
    while i < len(argv):
        token = argv[i]
        if token.startswith("-"):
            name, eq, value = token.partition("=")
            name = normalise_flag(short.get(name, name))
            if eq:
                flags.setdefault(name, []).append(value)
                i += 1
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                flags.setdefault(name, []).append(argv[i + 1])
                i += 2
            else:
                flags.setdefault(name, []).append("")
                i += 1
        else:
            positionals.append(token)
            i += 1
    return {k: tuple(v) for k, v in flags.items()}, positionals


def argv_differences(
    evidence: Sequence[str], proposed: Sequence[str], ignore: tuple[str, ...] = (), image: str | None = None
) -> list[str]:
    """Arguments that differ, excluding the speculative flags, the listen address and `ignore`
    (`image`: the proposed config's, naming its engine when its command names no program)."""
    skip = {normalise_flag(f) for f in (*LISTEN_FLAGS, *ignore)}
    short = short_flags(proposed, image) or short_flags(evidence)  # one engine: one reading of both
    ev, ev_pos = normalise_argv(evidence, short)
    pr, pr_pos = normalise_argv(proposed, short)
    out = []
    for name in sorted((set(ev) | set(pr)) - skip):
        if is_speculative_flag(name) or ev.get(name) == pr.get(name):
            continue
        before = " ".join(ev[name]) if name in ev else "(absent)"
        after = " ".join(pr[name]) if name in pr else "(absent)"
        out.append(f"{name}: evidence {before or '(set)'} vs proposed {after or '(set)'}")
    if ev_pos != pr_pos:
        out.append(f"positional arguments: evidence {ev_pos} vs proposed {pr_pos}")
    return out


def image_version(image: str | None) -> str | None:
    """The version in an image tag (vllm/vllm-openai:v0.32.0 -> 0.32.0), if it has one."""
    if not image or "@" in image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    found = VERSION.fullmatch(tag)
    return found.group(1) if found else None


def _same_version(image: str, recorded: str) -> bool:
    """Equal versions, or one is the other with a local build suffix (0.32.0 and 0.32.0+cpu)."""
    recorded = recorded.removeprefix("v")
    return image == recorded or recorded.startswith(image + "+") or image.startswith(recorded + "+")


def check_fresh(
    arm: ArmEvidence | None, evidence: GateEvidence, config: ServeConfig, ignore: tuple[str, ...] = ()
) -> list[str]:
    """Reasons the evidence is stale for this serve config (empty when it is fresh)."""
    if arm is None:
        return []
    if arm.argv is None:
        return [f"the evidence records no serve argv for {arm.name}: freshness cannot be checked"]
    found = argv_differences(arm.argv, config.argv, ignore, config.image)
    reasons = [f"stale evidence, {d}" for d in found]
    if config.unpinned is not None:
        reasons.append(
            f"{config.unpinned}: the engine version it runs is unknown; serve a pinned image tag so the "
            "gate can compare it with the evidence"
        )
    if config.image is None:
        return reasons
    recorded = set(arm.engine_versions) or ({evidence.engine_version} if evidence.engine_version else set())
    version = image_version(config.image)
    if not recorded:
        reasons.append(f"the evidence records no engine version: image {config.image} cannot be checked")
    elif version is None:
        reasons.append(
            f"image {config.image} names no engine version (a floating tag or a digest): "
            "pin a version tag so the gate can compare it with the evidence"
        )
    elif not any(_same_version(version, r) for r in recorded):
        reasons.append(
            f"stale evidence, engine version: evidence {', '.join(sorted(recorded))} vs proposed "
            f"image {config.image}"
        )
    return reasons


# --------------------------------------------------------------------------------------------------
# the gate


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
    """The gate over typed evidence: proposal, evidence and support, then freshness."""
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
        ok, reasons = ok and fresh_ok, reasons + fresh
    if not ok:
        reasons += [f"decision reason: {r}" for r in evidence.reasons[:SHOWN_DECISION_REASONS]]
    spec = serve.label() if isinstance(serve, ServeSpec) else (arm.label if arm else proposal.label)
    return GateResult(ok, _lines(reasons), evidence.decision, evidence.selected, terminal_safe(label), spec)


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
        supporting = _runs_at(evidence, k)
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


def gate(
    results_dir: str | Path,
    rules: str | None,
    proposed_text: str | None,
    *,
    serve_config: str | None = None,
    service: str | None = None,
    ignore: tuple[str, ...] = (),
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
    proposed = parse_spec(proposed_text) if proposed_text is not None else None
    config = read_serve_config(serve_config, service) if serve_config else None
    run = decide_directory(results_dir, rules)
    accept = run.policy.gate.provisional is Outside.ACCEPT
    return evaluate(evidence_from(run.decision, run.results, accept), proposed, config, ignore)


# --------------------------------------------------------------------------------------------------
# what CI sees

_OUTPUT_VALUE = re.compile(r"[^A-Za-z0-9_.:=+ ()-]")


def step_summary(result: GateResult) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY."""
    head = "supported" if result.supported else "refused"
    lines = [
        f"### mtpverdict gate: {markdown_safe(result.label)} {head}",
        "",
        f"decision: {markdown_safe(result.decision)}"
        + (f", selected {markdown_safe(result.selected)}" if result.selected else ""),
        "",
    ]
    lines += [f"- {markdown_safe(r.strip(), starts_line=True)}" for r in result.reasons]
    return "\n".join(lines) + "\n"


def bad_input_summary(exc: InputError) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY when the gate could not run (exit 2)."""
    return "### mtpverdict gate: bad input\n\n" + "".join(
        f"- {markdown_safe(str(p), starts_line=True)}\n" for p in exc.problems
    )


def _append(path: str | None, text: str) -> None:
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError([Problem(path, f"cannot be written: {exc.strerror or exc}")]) from None


def write_ci_files(result: GateResult, environ: Mapping[str, str]) -> None:
    """The step summary, and `supported`, `decision`, `selected`, `spec` as step outputs."""
    _append(environ.get("GITHUB_STEP_SUMMARY"), step_summary(result))
    outputs = {
        "supported": "true" if result.supported else "false",
        "decision": result.decision,
        "selected": result.selected or "",
        "spec": result.spec,
    }
    # values from closed vocabularies; anything else is dropped so no value can forge another line
    _append(
        environ.get("GITHUB_OUTPUT"), "".join(f"{k}={_OUTPUT_VALUE.sub('', v)}\n" for k, v in outputs.items())
    )


def write_ci_error(exc: InputError, environ: Mapping[str, str]) -> None:
    """The one-line errors of bad input, in the step summary."""
    _append(environ.get("GITHUB_STEP_SUMMARY"), bad_input_summary(exc))
