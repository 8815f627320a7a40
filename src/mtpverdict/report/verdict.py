"""The verdict a person reads first: the decision, its effect, each blocking cause once, the next step.

`verdict_lines` turns a typed Decision into at most about eight lines: the campaign and policy, the
`DECISION:` line (the selected arm with its effect and interval at the cell that limits it), the causes
that block or set arms aside (a cause shared by several arms is said once, with the arms it applies
to), the warnings on one line and the next step. `arm_table` is the one table shown beside them: per
candidate arm its effect against off at its weakest cell, the outcome in the words the regime map uses
and what limits it. Everything is built from the decision's numbers, never by cutting its reason
sentences apart, and every line fits the given width.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mtpverdict._text import OUTCOME_WORDS, terminal_safe
from mtpverdict.decide.regime import crossover
from mtpverdict.engines import registry
from mtpverdict.engines.names import SCHEDULE_ENGINE
from mtpverdict.engines.spec import CONFIG_FLAG
from mtpverdict.formats.decision import (
    ArmDecision,
    ArmOutcomeResult,
    ComparisonResult,
    ControlStatus,
    Decision,
    DecisionKind,
    RuleResult,
    RuleStatus,
    Verdict,
)
from mtpverdict.formats.policy import Severity
from mtpverdict.stats.runs import HIGHER_IS_BETTER

MAX_CAUSE_LINES = 4  # blocking causes listed before "... more (--verbose)"
MAX_TABLE_ROWS = 10  # candidate arms in the default table before "... more"
FOLD_RATIO = 2.0  # beyond a factor of two an effect reads as "2.5x faster" / "3.7x slower", not a percentage
SPEED_KINDS = ("faster_than_off", "beats_target")
CONTROL_NAMES = {"blind": "harness-blind", "floor": "sensitivity floor"}
ARM_CONTROLS = ("void", "failed_boots")  # controls whose findings the arms' own causes state
ELLIPSIS = "..."
MIN_CELL = 8  # a column cut to fit keeps at least this many characters
SHORT_METRICS = {"decode_tps": "decode tok/s", "aggregate_tps": "aggregate tok/s", "ttft_ms": "TTFT"}

# what keeps an arm's outcome from being resolved (ArmOutcomeResult.why)
LIMITS = {
    "missing_cell": "a cell not measured",
    "unknown_variance": "unreplicated",
    "one_boot_carries": "one boot carries it",
    "not_resolved": "interval too wide",
}
DECISION_WORDS = {
    DecisionKind.PROMOTE: "promote",
    DecisionKind.KEEP_REFERENCE: "keep the reference",
    DecisionKind.KEEP_MTP_DISABLED: "keep speculation off",
    DecisionKind.INCONCLUSIVE: "inconclusive",
}


def ci_text(alpha: float) -> str:
    """The two-sided interval level the decision reports (1 - 2 alpha)."""
    return f"{(1 - 2 * alpha) * 100:.0f}% CI"


def decision_words(kind: DecisionKind) -> str:
    """A decision kind as a sentence says it: `keep speculation off`, not `keep_mtp_disabled`."""
    return DECISION_WORDS[kind]


def clip(text: str, width: int) -> str:
    """`text` cut to `width` characters, the cut marked."""
    return text if len(text) <= width else text[: max(0, width - len(ELLIPSIS))] + ELLIPSIS


CONTINUED = " \\"  # a shell line continuation


def _wrapped(text: str, width: int, indent: str) -> list[str]:
    """`text` wrapped to `width`, its later lines indented; a word longer than a line is kept whole."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False) or [""]


def listed(names: Sequence[str], room: int) -> str:
    """`a, b, c` within `room` characters: as many names as fit, then `+N more`."""
    shown: list[str] = []
    for i, name in enumerate(names):
        rest = len(names) - i - 1
        tail = f", +{rest} more" if rest else ""
        if len(", ".join([*shown, name]) + tail) > room and shown:
            return ", ".join(shown) + f", +{len(names) - i} more"
        shown.append(name)
    return ", ".join(shown)


# ---------------------------------------------------------------- effects


def gain_text(ratio: float) -> str:
    """A ratio to off as people say it: `+15.2%`, `-7.6%`, `2.3x faster`, `3.8x slower`."""
    if ratio >= FOLD_RATIO:
        return f"{ratio:.1f}x faster"
    if 0 < ratio <= 1 / FOLD_RATIO:
        return f"{1 / ratio:.1f}x slower"
    return f"{(ratio - 1) * 100:+.1f}%"


def _strength(c: ComparisonResult) -> float:
    """How strongly a cell supports the arm: the interval's bound nearest to off, or the ratio."""
    higher = HIGHER_IS_BETTER.get(c.metric, True)
    bound = c.ci_low if higher else c.ci_high
    value = bound if bound is not None else c.ratio
    if value is None:
        return float("inf")
    return value if higher else -value


def deciding(decision: Decision, arm: str, metric: str) -> tuple[ComparisonResult, int] | None:
    """The cell that limits an arm (every cell must hold: the weakest one), and how many were compared."""
    found = [c for c in decision.comparisons if c.arm == arm and c.metric == metric and c.ratio is not None]
    if not found:
        return None
    return min(found, key=_strength), len(found)


def interval_text(c: ComparisonResult) -> str:
    if c.ci_low is None or c.ci_high is None:
        return ""
    return f" [{gain_text(c.ci_low)}, {gain_text(c.ci_high)}]"


def effect_text(decision: Decision, arm: str, metric: str) -> str:
    """`+15.2% [+7.5%, +23.5%] at chat c=1 (weakest of 3)`, or why there is no interval."""
    found = deciding(decision, arm, metric)
    if found is None:
        return "not compared"
    c, _ = found
    assert c.ratio is not None
    where = f"{c.workload} c={c.concurrency}"
    if c.ci_low is None:
        boots = "one boot" if c.n_arm_boots == 1 else f"{c.n_arm_boots} boots"
        return f"{gain_text(c.ratio)} at {where}, {boots}: no interval"
    return f"{gain_text(c.ratio)}{interval_text(c)} at {where}"


def _outcome(decision: Decision, arm: str, metric: str) -> ArmOutcomeResult | None:
    return next((o for o in decision.outcomes if o.arm == arm and o.metric == metric), None)


def outcome_text(decision: Decision, arm: str, metric: str) -> str:
    """The arm's combined outcome over the design and, when unresolved, what limits it."""
    found = _outcome(decision, arm, metric)
    if found is None or deciding(decision, arm, metric) is None:
        return "not compared"
    word = OUTCOME_WORDS.get(found.outcome, found.outcome)
    if found.outcome == "better":
        return "better at every cell"
    if found.outcome in ("worse", "below_min_effect"):
        return f"{word} at some cell"
    if found.outcome == "inconclusive" and found.why in LIMITS:
        return f"{word}: {LIMITS[found.why]}"
    return word


# ---------------------------------------------------------------- causes, grouped


@dataclass(frozen=True, slots=True)
class Cause:
    """One reason an arm is not promoted, in words that several arms can share."""

    text: str
    arm: str


def _speed_cause(decision: Decision, arm: ArmDecision, metric: str, failed: bool) -> str | None:
    found = _outcome(decision, arm.name, metric)
    if found is None:
        return None
    if failed:
        return {
            "worse": "slower than off at some cell",
            "below_min_effect": "not better than off by the minimum effect at some cell",
            "equivalent": "equivalent to off",
        }.get(found.outcome, f"{found.outcome} against off")
    if found.why == "missing_cell":
        cells = ", ".join(f"{w} c={c}" for w, c in found.missing_cells)
        return f"not measured at {cells}"
    if found.why == "unknown_variance":
        return _unreplicated(decision, arm.name, metric)
    if found.why == "one_boot_carries":
        return (
            f"one boot carries the gain (without {found.loo_boot}: p {found.loo_p:.2g})"
            if (found.loo_boot and found.loo_p is not None)
            else "one boot carries the gain"
        )
    return "the interval is too wide to settle better, equivalent or worse (more boots)"


def _unreplicated(decision: Decision, arm: str, metric: str) -> str:
    cells = [c for c in decision.comparisons if c.arm == arm and c.metric == metric and c.ci_low is None]
    if not cells:
        return "no credible boot-to-boot variance"
    arm_boots = min(c.n_arm_boots for c in cells)
    base_boots = min(c.n_base_boots for c in cells)
    history = "" if decision.inputs.noise_history else ", no A/A history"

    def boots(n: int, whose: str) -> str:
        return f"{'one' if n == 1 else n} {whose}{' ' if whose else ''}boot{'' if n == 1 else 's'}"

    each = (
        f"{boots(arm_boots, '')} per arm and control"
        if arm_boots == base_boots
        else f"{boots(arm_boots, '')} per arm, {boots(base_boots, 'control')}"
    )
    return f"unreplicated ({each}{history}): no interval"


def _rule_cause(rule: RuleResult) -> str:
    if rule.passed is False:
        return f"{rule.rule} failed"
    if rule.status is RuleStatus.MISSING:
        return f"{rule.rule}: not enough evidence to judge"
    return f"{rule.rule} unsettled"


def arm_causes(decision: Decision, arm: ArmDecision, metric: str) -> list[str]:
    """Why one candidate is not (or not yet) eligible, each cause in words other arms can share."""
    if arm.verdict is Verdict.VOID:
        return ["void (acceptance near zero: a broken draft head)"]
    vetoes = [r for r in arm.rules if r.severity is Severity.VETO]
    failed = [r for r in vetoes if r.passed is False]
    out = []
    for rule in failed if failed else [r for r in vetoes if r.passed is None]:
        speed = None
        if rule.kind in SPEED_KINDS:
            speed = _speed_cause(decision, arm, metric, rule.passed is False)
        out.append(speed or _rule_cause(rule))
        found = _outcome(decision, arm.name, metric)
        if speed and found and found.why == "missing_cell" and found.unknown_cells and not failed:
            out.append(_unreplicated(decision, arm.name, metric))  # measured cells lack a variance too
    return out


def grouped(causes: Iterable[Cause]) -> list[tuple[str, list[str]]]:
    """Each cause once, with the arms it applies to, in the order causes first appear."""
    by: dict[str, list[str]] = {}
    for c in causes:
        arms = by.setdefault(c.text, [])
        if c.arm not in arms:
            arms.append(c.arm)
    return list(by.items())


RULE_CAUSES = (" failed", ": not enough evidence to judge", " unsettled")


def _merged(causes: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Rules that failed (or lacked evidence) for the same arms, said once: `coherence, boot_ok failed`."""
    out: list[tuple[str, list[str]]] = []
    rules: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for text, arms in causes:
        suffix = next((s for s in RULE_CAUSES if text.endswith(s) and " " not in text[: -len(s)]), None)
        if suffix is None:
            out.append((text, arms))
            continue
        key = (suffix, tuple(arms))
        if key not in rules:
            rules[key] = []
            out.append((f"\0{len(rules) - 1}", arms))  # where the merged cause goes
        rules[key].append(text[: -len(suffix)])
    merged = [f"{', '.join(names)}{suffix}" for (suffix, _), names in rules.items()]
    return [(merged[int(t[1:])] if t.startswith("\0") else t, arms) for t, arms in out]


def blocking(decision: Decision, metric: str) -> list[tuple[str, list[str]]]:
    """Every candidate's causes, grouped; then the campaign controls that failed."""
    causes = [
        Cause(text, arm.name)
        for arm in decision.arms
        if not arm.is_control and arm.verdict is not Verdict.ELIGIBLE
        for text in arm_causes(decision, arm, metric)
    ]
    out = _merged(grouped(causes))
    for control in decision.controls:
        if control.status is ControlStatus.FAIL and control.name not in ARM_CONTROLS:
            out.append((terminal_safe(control.detail), []))
    return out


def warnings(decision: Decision) -> list[str]:
    """The warning-only rules that failed or lacked evidence, and the controls that could not run."""
    failed: dict[str, list[str]] = {}
    missing: list[str] = []
    for arm in decision.arms:
        if arm.is_control or arm.verdict is Verdict.VOID:
            continue
        for r in arm.rules:
            if r.severity is not Severity.WARN or r.passed is True:
                continue
            if r.status is RuleStatus.MISSING:
                missing.append(r.rule) if r.rule not in missing else None
            else:
                failed.setdefault(r.rule, []).append(arm.name)
    out = [f"{rule} ({listed(arms, 40)})" for rule, arms in failed.items()]
    if missing:
        out.append("no evidence for " + ", ".join(missing))
    untestable = list(
        dict.fromkeys(
            CONTROL_NAMES.get(c.name, c.name)
            for c in decision.controls
            if c.status is ControlStatus.UNTESTABLE
        )
    )
    if untestable:
        out.append(f"{' and '.join(untestable)} control{'s' if len(untestable) > 1 else ''} untestable")
    out += [
        f"{CONTROL_NAMES.get(c.name, c.name)} control warns"
        for c in decision.controls
        if c.status is ControlStatus.WARN
    ]
    return out


# ---------------------------------------------------------------- the lines


def selected_effect(decision: Decision, arm: str, metric: str) -> str:
    """`+15.2% decode tok/s [90% CI +7.5%, +23.5%] vs off at chat c=1 (weakest of 3 cells)`."""
    found = deciding(decision, arm, metric)
    if found is None:
        return ""
    c, n = found
    assert c.ratio is not None
    notes = [f"weakest of {n} cells"] if n > 1 else []
    ci = ""
    if c.ci_low is None:
        notes.append(("one boot" if c.n_arm_boots == 1 else f"{c.n_arm_boots} boots") + ": no interval")
    else:
        ci = f" [{ci_text(decision.policy.alpha)} {interval_text(c)[2:-1]}]"
    note = f" ({'; '.join(notes)})" if notes else ""
    where = f"{c.workload} c={c.concurrency}"
    return f"{gain_text(c.ratio)} {SHORT_METRICS.get(metric, metric)}{ci} vs off at {where}{note}"


def decision_line(decision: Decision, metric: str) -> str:
    """`DECISION: promote k3 (mtp k=3): +15.2% decode tok/s [...] vs off at chat c=1 (weakest of 3 cells)`."""
    head = f"DECISION: {decision_words(decision.decision)}"
    provisional = decision.provisional and decision.decision is not DecisionKind.INCONCLUSIVE
    if decision.decision is DecisionKind.PROMOTE and decision.schedule is not None:
        ranges = ", ".join(
            ("off" if r.k == 0 else f"k={r.k} ({r.arm})") + f" at batch sizes {r.start}-{r.end}"
            for r in decision.schedule.ranges
        )
        return head + f" a schedule{', provisional' if provisional else ''}: {ranges}"
    if decision.selected is not None:
        arm = decision.selected
        head += f" {terminal_safe(arm.arm)} ({terminal_safe(arm.spec.label())})"
        head += ", provisional" if provisional else ""
        effect = selected_effect(decision, arm.arm, metric)
        return head + (f": {effect}" if effect else "")
    head += ", provisional" if provisional else ""
    if decision.decision is DecisionKind.KEEP_MTP_DISABLED:
        return head + ": every candidate was rejected or void"
    return head + f": {_inconclusive_why(decision)}"


def _inconclusive_why(decision: Decision) -> str:
    """`no candidate could be judged`, `2 of 5 candidates could not be judged, 3 rejected or void`, or
    the campaign control that failed."""
    failed = [
        c.name for c in decision.controls if c.status is ControlStatus.FAIL and c.name not in ARM_CONTROLS
    ]
    candidates = [a for a in decision.arms if not a.is_control]
    count = {v: sum(a.verdict is v for a in candidates) for v in Verdict}
    unjudged = count[Verdict.INCONCLUSIVE]
    parts = []
    if failed:
        names = " and ".join(CONTROL_NAMES.get(name, name) for name in failed)
        parts.append(f"the {names} control{'s' if len(failed) > 1 else ''} failed")
    if unjudged == len(candidates):
        parts.append("no candidate could be judged")
    elif unjudged:
        parts.append(f"{unjudged} of {len(candidates)} candidates could not be judged")
    if unjudged and (count[Verdict.REJECTED] or count[Verdict.VOID]):
        parts.append(f"{count[Verdict.REJECTED] + count[Verdict.VOID]} rejected or void")
    if count[Verdict.ELIGIBLE]:
        parts.append(f"{count[Verdict.ELIGIBLE]} eligible")
    return ", ".join(parts) or "nothing could be decided"


def next_step_of(decision: Decision) -> str | None:
    """What to run next, its paths as placeholders: the decision's next step, or under a crossover (no
    one depth for every load) a what-if reading in schedule mode (another policy's decision would be
    one more look)."""
    if decision.next_step or decision.decision in (DecisionKind.PROMOTE, DecisionKind.KEEP_REFERENCE):
        return decision.next_step
    found = crossover(decision.policy.name, decision.policy.selection, decision.regime)
    return (
        f"the best depth depends on load; read it in schedule mode (a what-if, no look): {found[0][1]}"
        if found
        else None
    )


def verdict_lines(decision: Decision, metric: str, width: int, next_step: str | None) -> list[str]:
    """The summary's opening: campaign and policy, DECISION, causes, warnings, next step; each line
    within `width`."""
    campaign = decision.campaign
    title = f"{campaign.id} (policy {decision.policy.name}): {campaign.title}"
    lines = [clip(terminal_safe(title), width), *_wrapped(decision_line(decision, metric), width, "  ")]
    promoted = decision.decision in (DecisionKind.PROMOTE, DecisionKind.KEEP_REFERENCE)
    causes = blocking(decision, metric)
    if causes:
        lines.append("set aside:" if promoted else "blocking:")
        for text, arms in causes[:MAX_CAUSE_LINES]:
            line = f"  - {text}"
            if not arms:  # a campaign control's finding: its first line; --verbose has it whole
                lines.append(clip(line, width))
                continue
            line += ": " + listed([terminal_safe(a) for a in arms], max(12, 2 * width - len(line)))
            lines += _wrapped(line, width, "    ")
        if len(causes) > MAX_CAUSE_LINES:
            lines.append(f"  - ... {len(causes) - MAX_CAUSE_LINES} more causes (--verbose)")
    found = warnings(decision)
    if found:
        lines.append(clip(terminal_safe("warnings: " + "; ".join(found)), width))
    if decision.schedule is not None and decision.schedule.speculative_config is not None:
        config = shlex.quote(decision.schedule.speculative_config)
        lines.append(f"serve: {registry.title(SCHEDULE_ENGINE)} {CONFIG_FLAG} {config}")
    if next_step:
        first, then, command = next_step.partition("mtpverdict ")
        if then and first:
            lines += _wrapped(terminal_safe(f"next: {first.rstrip()}"), width, "  ")
            lines += command_lines(terminal_safe(f"mtpverdict {command}"), width, "  ")
        else:
            lines += _wrapped(terminal_safe(f"next: {next_step}"), width, "  ")
    return lines


def command_lines(command: str, width: int, indent: str) -> list[str]:
    """A shell command within `width`: cut between its words, each cut line ending in a backslash so a
    shell given the lines reads one command; a word longer than a line is kept whole."""
    try:
        words = [shlex.quote(w) for w in shlex.split(command)]
    except ValueError:  # not shell words (an unbalanced quote): shown as it is
        return [f"{indent}{command}"]
    if not words:
        return [indent]
    lines: list[str] = []
    line = f"{indent}{words[0]}"
    for i, word in enumerate(words[1:], start=2):
        room = width - (0 if i == len(words) else len(CONTINUED))
        if len(line) + 1 + len(word) > room:
            lines.append(line + CONTINUED)
            line = f"{indent}    {word}"
        else:
            line += f" {word}"
    return [*lines, line]


# ---------------------------------------------------------------- the table


def arm_table(decision: Decision, metric: str, width: int, max_rows: int = MAX_TABLE_ROWS) -> str:
    """Per candidate arm: its effect against off at its weakest cell, the outcome and what limits it,
    acceptance and the verdict; fitted to `width`."""
    candidates = [a for a in decision.arms if not a.is_control]
    # arms still in play first, then the rejected and void ones the causes above already name
    rank = {Verdict.ELIGIBLE: 0, Verdict.INCONCLUSIVE: 1, Verdict.REJECTED: 2, Verdict.VOID: 3}
    shown = sorted(
        candidates,
        key=lambda a: (rank.get(a.verdict, 4), deciding(decision, a.name, metric) is None),
    )
    max_rows = max(1, max_rows)
    if len(shown) > max_rows:  # the line saying how many more takes a row of its own
        max_rows = max(1, max_rows - 1)
    rows = [
        [
            terminal_safe(a.name),
            terminal_safe(a.label),
            effect_text(decision, a.name, metric),
            outcome_text(decision, a.name, metric),
            acceptance_short(a),
            str(a.verdict),
        ]
        for a in shown[:max_rows]
    ]
    headers = [
        "arm",
        "spec",
        f"vs off, weakest cell ({ci_text(decision.policy.alpha)})",
        "outcome",
        "acceptance",
        "verdict",
    ]
    table = fit_table(headers, rows, width, drop=(4, 1))
    more = len(shown) - max_rows
    if more > 0:
        table += "\n" + clip(f"... {more} more arms (--verbose)", width)
    return table


def acceptance_short(arm: ArmDecision) -> str:
    """`93.2% n=279`: the arm's pooled acceptance and the drafted tokens behind it."""
    acc = arm.acceptance
    if acc is None or acc.primary.acceptance_rate is None:
        return ""
    n = acc.primary.draft_tokens
    return f"{acc.primary.acceptance_rate * 100:.1f}%" + (f" n={n}" if n is not None else " n=?")


def _render(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    from tabulate import tabulate

    return str(tabulate(rows, headers=list(headers), tablefmt="simple", disable_numparse=True))


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fit_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, drop: Sequence[int] = ()
) -> str:
    """A table within `width` columns: the columns in `drop` go first (in that order), then the widest
    column's cells are cut, marked with "...", until it fits."""
    keep = list(range(len(headers)))
    heads, body = list(headers), [list(r) for r in rows]

    def pick(cols: Sequence[int]) -> tuple[list[str], list[list[str]]]:
        return [heads[i] for i in cols], [[r[i] for i in cols] for r in body]

    text = _render(*pick(keep))
    for column in drop:
        if _widest(text) <= width:
            return text
        keep.remove(column)
        text = _render(*pick(keep))
    h, b = pick(keep)
    while _widest(text) > width:
        sizes = [max([len(h[i]), *(len(r[i]) for r in b)]) for i in range(len(h))]
        i = max(range(len(h)), key=lambda j: sizes[j])
        second = max((sizes[j] for j in range(len(h)) if j != i), default=0)
        target = max(sizes[i] - (_widest(text) - width), min(second, sizes[i] - 1), MIN_CELL)
        if target >= sizes[i]:  # nothing left to cut sensibly: the terminal wraps it
            break
        h[i] = clip(h[i], target)
        b = [
            [*r[:i], cell, *r[i + 1 :]]
            for r, cell in zip(b, _cut_column([r[i] for r in b], target), strict=True)
        ]
        text = _render(h, b)
    return text


def _cut_column(cells: Sequence[str], width: int) -> list[str]:
    """A column's cells within `width`, cut at the end, or in the middle where cutting at the end would
    make different cells read the same (arms named alike but for their ends)."""
    end = [clip(c, width) for c in cells]
    if len(set(end)) == len(set(cells)):
        return end
    middle = [clip_middle(c, width) for c in cells]
    return middle if len(set(middle)) > len(set(end)) else end


def clip_middle(text: str, width: int) -> str:
    """`text` within `width` characters, its middle cut out and marked, so both ends stay."""
    if len(text) <= width:
        return text
    room = max(0, width - len(ELLIPSIS))
    tail = room // 2
    return text[: room - tail] + ELLIPSIS + (text[-tail:] if tail else "")
