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
- MtpverdictDraftingStopped: tokens generated while nothing is drafted (or the counters vanished), on
  series that drafted within the last DRAFTED_LOOKBACK: a server of the same model that never
  speculated is not this decision's seat, so it never fires there (with or without --match).

A window without traffic has no rate (0 / 0): no alert fires on an idle seat.

What promtool would reject is refused before anything is written: a duration outside Prometheus's
grammar (units y w d h m s ms, each at most once and in that order, more than zero, within its int64
nanoseconds), a matcher whose label name is not a Prometheus name or is `__name__`, whose quoted value
has an escape PromQL does not know, or whose =~ / !~ value is not a regular expression (Python's `re`
as an approximation of RE2, plus RE2's refusal of lookaround and backreferences).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from mtpverdict.engines import registry
from mtpverdict.engines.interface import SpecCounters
from mtpverdict.engines.names import Engine
from mtpverdict.errors import InputError, Problem, printable
from mtpverdict.live.reference import Reference

DECISION_LABEL = "mtpverdict_decision"
ARM_LABEL = "mtpverdict_arm"
AGGREGATED_AWAY = "engine"  # vLLM's data-parallel engine index; llama.cpp exports no label
# Prometheus duration syntax (model.ParseDuration): each unit once, in order. The digits are possessive
# and bounded (`{1,20}+`: 2**63 ns has 19 digits), so each try reads at most 20: linear
DURATION = re.compile(
    r"(?:([0-9]{1,20}+)y)?(?:([0-9]{1,20}+)w)?(?:([0-9]{1,20}+)d)?(?:([0-9]{1,20}+)h)?"
    r"(?:([0-9]{1,20}+)m)?(?:([0-9]{1,20}+)s)?(?:([0-9]{1,20}+)ms)?"
)
MAX_DURATION_CHARS = 64  # longer than any duration within Prometheus's range
DURATION_UNITS_NS = (
    365 * 86400 * 10**9,
    7 * 86400 * 10**9,
    86400 * 10**9,
    3600 * 10**9,
    60 * 10**9,
    10**9,
    10**6,
)
MAX_DURATION_NS = 2**63 - 1  # Prometheus keeps durations as int64 nanoseconds
# a label matcher; every repetition bounded and possessive, so each try reads a bounded span: linear
MATCHER = re.compile(
    r'([a-zA-Z_][a-zA-Z0-9_]{0,127}+)\s{0,16}+(=~|!~|!=|=)\s{0,16}+"((?:[^"\\\n]|\\.){0,4096}+)"'
)
_ESCAPE = re.compile(  # PromQL string escapes (promql/parser/lex.go), the last group any other
    r"\\(?:([abfnrtv\\\"])|x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.?))"
)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_NOT_RE2 = re.compile(r"\(\?<?[=!]|(?<!\\)(?:\\\\)*\\[1-9]")  # lookaround, backreference
DEFAULT_WINDOW = "5m"
DRAFTED_LOOKBACK = "1d"  # DraftingStopped watches series whose drafted-token rate existed this recently
DEFAULT_FOR = "10m"
SHOWN_DIGITS = 6  # significant digits of a threshold, as the decision file writes them


AlertEngine = Engine  # an engine whose /metrics export spec-decode counters (a key of COUNTERS)
EngineCounters = SpecCounters  # the counters of one engine (engines/*.py `metric_counters`)
COUNTERS: dict[Engine, SpecCounters] = {
    engine: counters
    for engine, parts in registry.ENGINES.items()
    if (counters := registry.present(parts.metric_counters)) is not None
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
    engine = next((e for e in COUNTERS if e.value == str(name)), None)
    if engine is None:
        choices = ", ".join(e.value for e in COUNTERS)
        where = "--engine" if given is not None else "campaign.engine"
        raise InputError(
            [
                Problem(
                    ref.source,
                    f"engine {name!r} exports no spec-decode counters; pass --engine ({choices})",
                    key=where,
                )
            ]
        )
    return engine


def _duration_problem(text: str) -> tuple[str | None, int]:
    """Why `text` is not a positive Prometheus duration (None when it is), and its nanoseconds."""
    found = DURATION.fullmatch(text) if len(text) <= MAX_DURATION_CHARS else None
    if found is None or not text:
        return "is not a duration (units y w d h m s ms, each once and in that order: 60s, 5m, 1h30m)", 0
    ns = sum(int(n) * unit for n, unit in zip(found.groups(), DURATION_UNITS_NS, strict=True) if n)
    if ns <= 0:
        return "is not a positive duration", 0
    if ns > MAX_DURATION_NS:
        return "is out of range (Prometheus durations stop at about 292 years)", 0
    return None, ns


def duration_seconds(text: str, source: str, key: str) -> float:
    """Seconds of a Prometheus duration (5m, 90s, 1h30m); InputError naming the option otherwise."""
    problem, ns = _duration_problem(text)
    if problem is not None:
        raise InputError([Problem(source, f"{text!r} {problem}", key=key)])
    return ns / 1e9


def _unescaped(quoted: str) -> str | None:
    """The value of a PromQL double-quoted string's body, or None when it holds an unknown escape."""
    out: list[str] = []
    at = 0
    for escape in _ESCAPE.finditer(quoted):
        out.append(quoted[at : escape.start()])
        simple, hex2, octal, hex4, hex8, _unknown = escape.groups()
        if simple is not None:
            out.append(_SIMPLE_ESCAPES.get(simple, simple))
        elif octal is not None and int(octal, 8) <= 0xFF:
            out.append(chr(int(octal, 8)))
        elif hex2 is not None or hex4 is not None or hex8 is not None:
            code = int(hex2 or hex4 or hex8 or "0", 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                return None
            out.append(chr(code))
        else:
            return None
        at = escape.end()
    out.append(quoted[at:])
    return "".join(out)


def _matcher_problem(matcher: str) -> str | None:
    """Why a matcher would not parse in PromQL (None when it would)."""
    found = MATCHER.fullmatch(matcher.strip())
    if found is None:
        return 'is not a label matcher (write name="value", name!="value" or name=~"re")'
    name, op, quoted = found.groups()
    if name == "__name__":
        return "matches __name__: the rules choose the metric names themselves"
    value = _unescaped(quoted)
    if value is None:
        return 'has an escape PromQL does not know in its quoted value (known: \\n \\t \\" \\\\ \\xHH ...)'
    if op in ("=~", "!~"):
        if _NOT_RE2.search(value):
            return "uses lookaround or a backreference, which Prometheus regular expressions (RE2) lack"
        try:
            re.compile(value)  # unanchored, so a leading (?i) compiles as in RE2
        except re.error as exc:
            return f"is not a regular expression ({exc})"
    return None


def check_options(source: str, window: str, hold: str, matchers: Sequence[str]) -> None:
    """Refuse a window or `for` that is not a Prometheus duration and a matcher promtool would reject."""
    problems = []
    for key, value in (("--window", window), ("--for", hold)):
        problem, _ = _duration_problem(value)
        if problem is not None:
            problems.append(Problem(source, f"{value!r} {problem}", key=key))
    for m in matchers:
        problem = _matcher_problem(m)
        if problem is not None:
            problems.append(Problem(source, f"{m!r} {problem}", key="--match"))
    if problems:
        raise InputError(problems)


def _number(value: float) -> str:
    return f"{value:.{SHOWN_DIGITS}g}"


def rule_groups(ref: Reference, options: AlertOptions) -> dict[str, Any]:
    """The rule file as data: one group of recording rules and one of alerts."""
    check_options(ref.source, options.window, options.hold, options.matchers)
    names = COUNTERS[engine_of(ref, str(options.engine))]  # InputError for an engine without counters
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
        f"(({record['generated']}{mine} > 0) unless ({record['drafted']}{mine} > 0)) and "
        f"present_over_time({record['drafted']}{mine}[{DRAFTED_LOOKBACK}])",
        options.hold,
        {**labels, "severity": "critical"},
        "tokens are generated but nothing is drafted",
        f"The seat generates tokens while no draft token was proposed over {options.window} (or the "
        f"spec-decode counters are gone) on a seat that drafted within {DRAFTED_LOOKBACK}: speculation "
        f"is off or broken, against {about}.",
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
