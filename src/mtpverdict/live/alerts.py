"""Prometheus alerting and recording rules for a promoted arm, from its decision.

Recording rules turn the engine's own spec-decode counters into the acceptance rate, the mean
acceptance length, the drafted-token rate and the generated-token rate over a `rate()` window the user
chooses, summed over vLLM's data-parallel `engine` label and filtered by the label matchers given
(e.g. `model_name="qwen"`). Every recorded series carries `mtpverdict_decision` (the decision's short
sha256), so rules of several decisions can be loaded side by side. Three alerts read them:

- MtpverdictBelowBreakEven: the mean acceptance length below the decision's conservative break-even
  bound (speculation now costs throughput at the arm's most demanding measured cell);
- MtpverdictAcceptanceBelowEvidence: the acceptance rate below the low end of the campaign's measured
  interval (traffic or drafter differ from the evidence);
- MtpverdictDraftingStopped: tokens generated while nothing is drafted (or the counters vanished).

A window without traffic has no rate (0 / 0): no alert fires on an idle seat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from mtpverdict.errors import InputError, Problem, printable
from mtpverdict.live.reference import Reference

DECISION_LABEL = "mtpverdict_decision"
ARM_LABEL = "mtpverdict_arm"
AGGREGATED_AWAY = "engine"  # vLLM's data-parallel engine index; llama.cpp exports no label
DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w|y))+")  # Prometheus duration syntax
MATCHER = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\n]|\\.)*"')
DEFAULT_WINDOW = "5m"
DEFAULT_FOR = "10m"
SHOWN_DIGITS = 6  # significant digits of a threshold, as the decision file writes them


class AlertEngine(StrEnum):
    """Engines whose /metrics export spec-decode counters."""

    VLLM = "vllm"
    LLAMACPP = "llamacpp"


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """The counters of one engine (docs/engine-formats.md)."""

    drafts: str
    draft_tokens: str
    accepted: str
    generated: str


COUNTERS = {
    AlertEngine.VLLM: EngineCounters(
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:generation_tokens_total",
    ),
    AlertEngine.LLAMACPP: EngineCounters(
        "llamacpp:spec_decode_num_drafts_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
}


@dataclass(frozen=True, slots=True)
class AlertOptions:
    """What the user chooses: the engine, the rate() window, the alerts' `for`, the label matchers."""

    engine: AlertEngine
    window: str = DEFAULT_WINDOW
    hold: str = DEFAULT_FOR
    matchers: tuple[str, ...] = ()


def engine_of(ref: Reference, given: str | None) -> AlertEngine:
    """The engine named, else the decision campaign's; InputError when neither is one with counters."""
    name = given if given is not None else ref.engine
    try:
        return AlertEngine(str(name))
    except ValueError:
        choices = ", ".join(e.value for e in AlertEngine)
        where = "--engine" if given is not None else "campaign.engine"
        raise InputError(
            [
                Problem(
                    ref.source,
                    f"engine {name!r} exports no spec-decode counters; pass --engine ({choices})",
                    key=where,
                )
            ]
        ) from None


UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")


def duration_seconds(text: str, source: str, key: str) -> float:
    """Seconds of a Prometheus duration (5m, 90s, 1h30m); InputError naming the option otherwise."""
    if not DURATION.fullmatch(text):
        raise InputError([Problem(source, f"{text!r} is not a duration (e.g. 60s, 5m, 1h30m)", key=key)])
    seconds = sum(int(n) * UNIT_SECONDS[unit] for n, unit in _PART.findall(text))
    if seconds <= 0:
        raise InputError([Problem(source, f"{text!r} is not a positive duration", key=key)])
    return seconds


def check_options(source: str, window: str, hold: str, matchers: Sequence[str]) -> None:
    """Refuse a window or `for` that is not a Prometheus duration and a malformed label matcher."""
    problems = [
        Problem(source, f"{value!r} is not a Prometheus duration (e.g. 5m, 90s, 1h30m)", key=key)
        for key, value in (("--window", window), ("--for", hold))
        if not DURATION.fullmatch(value)
    ]
    problems += [
        Problem(
            source,
            f'{m!r} is not a label matcher (write name="value", name!="value" or name=~"re")',
            key="--match",
        )
        for m in matchers
        if not MATCHER.fullmatch(m.strip())
    ]
    if problems:
        raise InputError(problems)


def _number(value: float) -> str:
    return f"{value:.{SHOWN_DIGITS}g}"


def rule_groups(ref: Reference, options: AlertOptions) -> dict[str, Any]:
    """The rule file as data: one group of recording rules and one of alerts."""
    check_options(ref.source, options.window, options.hold, options.matchers)
    names = COUNTERS[options.engine]
    selector = "{" + ",".join(m.strip() for m in options.matchers) + "}" if options.matchers else ""
    win = options.window

    def summed(counter: str) -> str:
        return f"sum without ({AGGREGATED_AWAY}) (rate({counter}{selector}[{win}]))"

    labels = {DECISION_LABEL: ref.short_hash, ARM_LABEL: ref.arm}
    record = {
        "rate": f"mtpverdict:spec_decode_acceptance_rate:rate{win}",
        "length": f"mtpverdict:spec_decode_mean_acceptance_length:rate{win}",
        "drafted": f"mtpverdict:spec_decode_draft_tokens:rate{win}",
        "generated": f"mtpverdict:generation_tokens:rate{win}",
    }
    expressions = (
        (record["rate"], f"{summed(names.accepted)} / {summed(names.draft_tokens)}"),
        (record["length"], f"1 + {summed(names.accepted)} / {summed(names.drafts)}"),
        (record["drafted"], summed(names.draft_tokens)),
        (record["generated"], summed(names.generated)),
    )
    recording = [{"record": name, "expr": expr, "labels": dict(labels)} for name, expr in expressions]
    mine = f'{{{DECISION_LABEL}="{ref.short_hash}"}}'
    alerts = [a for a in _alerts(ref, options, record, mine, labels) if a is not None]
    group = f"mtpverdict-{ref.short_hash}"
    return {
        "groups": [
            {"name": f"{group}-recording", "rules": recording},
            {"name": f"{group}-alerts", "rules": alerts},
        ]
    }


def _alerts(
    ref: Reference, options: AlertOptions, record: dict[str, str], mine: str, labels: dict[str, str]
) -> list[dict[str, Any] | None]:
    about = f"decision {ref.short_hash}, arm {ref.arm} ({ref.label})"
    below_break_even = None
    if ref.bound_length is not None:
        rate = "" if ref.bound_rate is None else f" (an acceptance rate of {_number(ref.bound_rate)})"
        below_break_even = _alert(
            "MtpverdictBelowBreakEven",
            f"{record['length']}{mine} < {_number(ref.bound_length)}",
            options.hold,
            {**labels, "severity": "critical"},
            "speculation now costs throughput: mean acceptance length below break-even",
            f'Mean acceptance length {{{{ $value | printf "%.3f" }}}} over {options.window} is below '
            f"{_number(ref.bound_length)} tokens per step{rate}, the conservative break-even at "
            f"{ref.bound_cell} in {about}: each speculative step now returns fewer tokens than the "
            "plain steps it costs.",
        )
    below_evidence = None
    if ref.rate_low is not None:
        below_evidence = _alert(
            "MtpverdictAcceptanceBelowEvidence",
            f"{record['rate']}{mine} < {_number(ref.rate_low)}",
            options.hold,
            {**labels, "severity": "warning"},
            "acceptance below the campaign's measured interval",
            f'Acceptance rate {{{{ $value | printf "%.3f" }}}} over {options.window} is below '
            f"{_number(ref.rate_low)}, the low end of the interval measured in {about}: the traffic or "
            "the drafter differ from the evidence the promotion rests on.",
        )
    stopped = _alert(
        "MtpverdictDraftingStopped",
        f"({record['generated']}{mine} > 0) unless ({record['drafted']}{mine} > 0)",
        options.hold,
        {**labels, "severity": "critical"},
        "tokens are generated but nothing is drafted",
        f"The seat generates tokens while no draft token was proposed over {options.window} (or the "
        f"spec-decode counters are gone): speculation is off or broken, against {about}.",
    )
    return [below_break_even, below_evidence, stopped]


def _alert(
    name: str, expr: str, hold: str, labels: dict[str, str], summary: str, description: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": hold,
        "labels": labels,
        "annotations": {"summary": summary, "description": description},
    }


def rules_yaml(ref: Reference, options: AlertOptions) -> str:
    """The rule file's text: a header naming the decision, then the groups as YAML."""
    header = (
        f"# Prometheus rules written by `mtpverdict alerts` from {printable(ref.source)}\n"
        f"# decision sha256 {ref.sha256}, arm {ref.arm} ({ref.label}), engine {options.engine}\n"
    )
    body = yaml.safe_dump(rule_groups(ref, options), sort_keys=False, width=100, allow_unicode=False)
    return header + body
