"""A confirmation campaign: a campaign file plus one arm that serves the schedule a decision derived.

`mtpverdict decide` in schedule mode derives a schedule from fixed depths and prints vLLM's
--speculative-config for it; `mtpverdict schedule-arm CAMPAIGN.toml DECISION.json --out NEW.toml` writes
the campaign again with an arm serving exactly that JSON, so a second campaign can run the schedule
beside the fixed depths and off, and a decision in schedule mode can confirm it (`[selection] confirm`).

The new arm copies the settings of the arm the schedule runs at its largest depth: its serve_args lose
every speculative flag and gain `--speculative-config JSON` (reporting flags such as
--per-request-spec-decode-metrics stay), its k is the schedule's largest depth (what the per-position
counters show). That JSON is derived, never copied: the copied arm's own speculative config (its
method, model and every other setting, placeholders as the campaign writes them) with the depth keys
of the decision's typed ranges. The decision's `speculative_config` must say the same (a placeholder
of the arm's matches the value collect substituted for it), or the command is refused naming each
key that differs: a decision edited to name another method or draft model is never served.

The arm is placed before the campaign's last control, so off still brackets it. Arms that
ran another schedule are left out: a confirmation campaign confirms one schedule. The file is edited
with tomlkit, so its comments and layout survive, and the result is checked as `collect` checks it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._jsonio import atomic_write
from mtpverdict.collect.campaign import (
    MAX_CAMPAIGN_BYTES,
    PLACEHOLDER,
    REPORTING_FLAGS,
    ArmPlan,
    CampaignPlan,
    depth_problems,
    flag_spans,
    parity_problems,
    parse_campaign,
)
from mtpverdict.engines import registry
from mtpverdict.engines.interface import Absent
from mtpverdict.engines.names import SCHEDULE_ENGINE
from mtpverdict.engines.spec import CONFIG_FLAG, SCHEDULE_KEY, DepthRange, config_argv, depth_free
from mtpverdict.errors import CampaignError, InputError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.decision import Decision, Schedule, parse_decision
from mtpverdict.serveconfig import ServeSpec, extract_spec, normalise_flag

CONFIRM_SUFFIX = "-confirm"
SHOWN_DIFFERENCES = 5  # keys named in a refusal
MAX_SETTING_CHARS = 4096  # a setting's value matched against a placeholder (a path, a model name)
# the note an earlier schedule-arm wrote ("ARM serves the schedule of FILE sha256 HEX16."): each run of
# non-space characters is tried once (the lookbehind) and the origin is bounded (a file name is at most
# 255 bytes), so 100 KB of notes cannot backtrack
SERVES = re.compile(r" ?(?<!\S)\S+ serves the schedule of [^\n]{1,320}?\.(?=\s|$)")


@dataclass(frozen=True, slots=True)
class ScheduleArm:
    """The confirmation campaign's text and what was done to make it."""

    text: str
    arm: str  # the new arm
    template: str  # the fixed-depth arm whose settings it copies
    config: str  # the --speculative-config JSON it serves
    dropped: tuple[str, ...]  # arms that ran another schedule, left out
    campaign_id: str


def _schedule(decision: Decision, source: str) -> tuple[Schedule, str]:
    """The decision's schedule and its JSON, or why there is nothing (consistent) to serve."""
    schedule = decision.schedule
    if schedule is None:
        why = 'the decision holds no schedule: decide with [selection] mode = "schedule"'
        raise InputError([Problem(source, why, key="schedule")])
    config = schedule.speculative_config
    if config is None:
        why = f"the schedule gives no {CONFIG_FLAG} to serve: {schedule.note or 'no range speculates'}"
        raise InputError([Problem(source, why, key="schedule.speculative_config")])
    mismatch = _inconsistent(schedule, config)
    if mismatch is not None:
        raise InputError([Problem(source, mismatch, key="schedule.speculative_config")])
    return schedule, config


def _inconsistent(schedule: Schedule, config: str) -> str | None:
    """Why the JSON is not the ranges as vLLM would run them (None: it is): a decision file edited by
    hand, or written by another tool, is checked before it is served."""
    spec = extract_spec(config_argv(config))
    if not isinstance(spec, ServeSpec) or not spec.schedule:
        engine = registry.title(SCHEDULE_ENGINE)
        return f"is not a {engine} speculative config with {SCHEDULE_KEY}"
    ranges = [(r.start, r.end, r.k) for r in schedule.ranges]
    top = max((r.k for r in schedule.ranges), default=0)
    if [(r.first_batch, r.last_batch, r.k) for r in spec.schedule] != ranges or spec.k != top:
        return "does not match schedule.ranges (their starts, depths and largest depth)"
    if not any(r.k == top and r.arm is not None for r in schedule.ranges):
        return f"no range at the largest depth k={top} names the arm that measured it"
    return None


def derived_config(arm: ArmPlan, schedule: Schedule) -> tuple[dict[str, Any] | None, str]:
    """The config the new arm serves: `arm`'s own speculative settings with the schedule's depths
    (None and why, when the arm's serve_args hold no vLLM speculative config to copy)."""
    spec = extract_spec(arm.serve_args) if arm.serve_args else None
    if not isinstance(spec, ServeSpec) or spec.off:
        why = "" if spec is None or isinstance(spec, ServeSpec) else f" ({'; '.join(spec.reasons)})"
        engine = registry.title(SCHEDULE_ENGINE)
        return None, f"arm {arm.name}'s serve_args hold no {engine} speculative config to copy{why}"
    if spec.method != arm.method:
        return None, f"arm {arm.name} declares method {arm.method} but its serve_args run {spec.method}"
    compiler = registry.schedule_compiler(spec.engine)
    if isinstance(compiler, Absent):
        return None, f"arm {arm.name}'s serve_args run {spec.engine}: {compiler.reason}"
    table = [DepthRange(r.start, r.end, r.k) for r in schedule.ranges]
    compiled = compiler(depth_free(spec.settings_dict()), max(r.k for r in schedule.ranges), table)
    config: dict[str, Any] = json.loads(compiled)
    return config, ""


def _same_setting(mine: Any, theirs: Any) -> bool:
    """Equal, or a string of the arm's whose {placeholders} stand for what `theirs` holds there."""
    if isinstance(mine, str) and isinstance(theirs, str) and PLACEHOLDER.search(mine):
        return len(theirs) <= MAX_SETTING_CHARS and _fills(PLACEHOLDER.split(mine)[::2], theirs)
    return bool(mine == theirs) and type(mine) is type(theirs)


def _fills(parts: list[str], text: str) -> bool:
    """Whether `text` is the literal `parts` in order with anything between them (a glob's `*`; the
    leftmost find of each part is enough, so this is linear, unlike a regex of several `.*`)."""
    first, last = parts[0], parts[-1]
    if len(first) + len(last) > len(text) or not (text.startswith(first) and text.endswith(last)):
        return False
    position, end = len(first), len(text) - len(last)
    for part in parts[1:-1]:
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


def _differences(mine: dict[str, Any], config: str, arm: str) -> list[str]:
    """Each key where the decision's JSON says something else than the arm's settings."""
    try:
        theirs = _check.loads_strict(config)
    except ValueError as exc:
        return [f"is not JSON: {exc}"]
    if not isinstance(theirs, dict):
        return ["is not a JSON object"]
    out = []
    for key in sorted(set(mine) | set(theirs), key=str):
        if key not in theirs:
            out.append(f"{key} is missing (arm {arm} sets {mine[key]!r})")
        elif key not in mine:
            out.append(f"{key} = {_short(theirs[key])} is not a setting of arm {arm}")
        elif not _same_setting(mine[key], theirs[key]):
            out.append(f"{key} = {_short(theirs[key])}, but arm {arm} runs {_short(mine[key])}")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _template(plan: CampaignPlan, schedule: Schedule, source: str) -> str:
    """The arm the schedule runs at its largest depth (every scheduled arm shares its other settings)."""
    top = max(r.k for r in schedule.ranges)
    name = next(r.arm for r in schedule.ranges if r.k == top and r.arm is not None)
    if not any(a.name == name for a in plan.arms):
        why = f"the schedule's arm {name} is not in this campaign; pass the campaign the decision was made on"
        raise CampaignError([Problem(source, why, key="arms")])
    return name


def _check_depths(plan: CampaignPlan, schedule: Schedule, source: str) -> None:
    """Every depth the schedule runs is one an arm of this campaign measured: a range at k > 0 names an
    arm of the schedule's method whose k is that depth, so an edited decision cannot pick a depth (or
    name an arm) no campaign arm ran."""
    arms = {a.name: a for a in plan.arms}
    problems = []
    for r in schedule.ranges:
        if r.k == 0:
            continue
        arm = arms.get(r.arm) if r.arm is not None else None
        span = f"batch sizes {r.start}-{r.end} run k={r.k}"
        if arm is None:
            problems.append(f"{span}, but name no arm of this campaign that measured it ({r.arm})")
        elif arm.k != r.k or arm.method != schedule.method:
            problems.append(f"{span}, but their arm {arm.name} runs {arm.method} at k={arm.k}")
    if problems:
        raise InputError([Problem(source, p, key="schedule.ranges") for p in problems[:SHOWN_DIFFERENCES]])


def kept_args(serve_args: tuple[str, ...]) -> list[str]:
    """serve_args without their speculative flags (each with its values); reporting flags stay."""
    return [
        token
        for flag, tokens, known in flag_spans(serve_args)
        if not known or normalise_flag(flag) in REPORTING_FLAGS
        for token in tokens
    ]


def _ran_a_schedule(serve_args: tuple[str, ...]) -> bool:
    spec = extract_spec(serve_args) if serve_args else None
    return isinstance(spec, ServeSpec) and bool(spec.schedule)


def _check_plan(plan: CampaignPlan, source: str) -> None:
    """A schedule arm needs vLLM booted by collect (it passes the schedule on the command line)."""
    compiler = registry.schedule_compiler(plan.server.engine)
    if isinstance(compiler, Absent):
        why = f"{compiler.reason}; this campaign's engine is {plan.server.engine}"
        raise CampaignError([Problem(source, why, key="server.engine")])
    if plan.server.mode != "launch":
        why = 'collect must boot the servers (mode = "launch") to serve the schedule on the command line'
        raise CampaignError([Problem(source, why, key="server.mode")])


def _inline(values: dict[str, Any]) -> Any:
    """`values` as a TOML inline table (`labels = { ... }`), which an inline arm may hold too."""
    import tomlkit

    table = tomlkit.inline_table()
    table.update(values)
    return table


def _arm_table(arm: ArmPlan, name: str, schedule: Schedule, origin: str, config: str) -> Any:
    """The new arm as a TOML table, with `arm`'s settings and the schedule's depth and JSON."""
    import tomlkit

    table = tomlkit.table()
    table["name"] = name
    table["role"] = "candidate"
    table["method"] = arm.method
    table["k"] = max(r.k for r in schedule.ranges)  # the largest depth: what the counters show
    value = tomlkit.string(config, literal="'" not in config)
    table["serve_args"] = [*config_argv(value), *kept_args(arm.serve_args)]
    if arm.family != "default":
        table["family"] = arm.family
    table["labels"] = _inline({"confirms": origin})
    if arm.config is not None:  # the engine's speculative config, recorded in the campaign
        table["config"] = _inline({k: v for k, v in json.loads(config).items() if v is not None})
    table.add(tomlkit.nl())
    return table


def schedule_arm(
    campaign_text: str,
    campaign_source: str,
    decision: Decision,
    decision_source: str,
    *,
    origin: str,
    name: str | None = None,
    campaign_id: str | None = None,
) -> ScheduleArm:
    """The campaign text with an arm serving the decision's schedule; `origin` names the decision in
    the arm's `confirms` label (its file and hash)."""
    plan = parse_campaign(campaign_text, campaign_source)
    schedule, config = _schedule(decision, decision_source)
    if decision.campaign.id != plan.id:
        why = f"the decision was made on campaign {decision.campaign.id!r}, not {plan.id!r}"
        why += f" ({campaign_source})"
        raise InputError([Problem(decision_source, why, key="campaign.id")])
    _check_plan(plan, campaign_source)
    template = next(a for a in plan.arms if a.name == _template(plan, schedule, campaign_source))
    _check_depths(plan, schedule, decision_source)
    config = _served_config(template, schedule, config, decision_source)
    arm_name = name or f"{schedule.method}_schedule"
    dropped = tuple(a.name for a in plan.arms if a is not template and _ran_a_schedule(a.serve_args))
    if arm_name in {a.name for a in plan.arms} - set(dropped):
        raise InputError([Problem("--name", f"the campaign already has an arm named {arm_name}")])
    new_id = campaign_id or (plan.id if plan.id.endswith(CONFIRM_SUFFIX) else plan.id + CONFIRM_SUFFIX)
    table = _arm_table(template, arm_name, schedule, origin, config)
    text = _edited(campaign_text, table, dropped, new_id, f"{arm_name} serves the schedule of {origin}.")
    _check_result(text, campaign_source, arm_name)
    return ScheduleArm(text, arm_name, template.name, config, dropped, new_id)


def _served_config(template: ArmPlan, schedule: Schedule, decided: str, source: str) -> str:
    """The JSON the new arm serves (derived from `template`), once the decision's says the same."""
    if schedule.method != template.method:
        why = (
            f"the schedule's method is {schedule.method}, but its arm {template.name} runs {template.method}"
        )
        raise InputError([Problem(source, why, key="schedule.method")])
    mine, why = derived_config(template, schedule)
    if mine is None:
        raise InputError([Problem(source, why, key="schedule.speculative_config")])
    differ = _differences(mine, decided, template.name)
    if differ:
        shown = "; ".join(differ[:SHOWN_DIFFERENCES]) + ("; ..." if len(differ) > SHOWN_DIFFERENCES else "")
        why = f"is not arm {template.name}'s settings with the schedule's depths: {shown}"
        raise InputError([Problem(source, why, key="schedule.speculative_config")])
    return json.dumps(mine, sort_keys=True, separators=(",", ":"))


def _edited(text: str, table: Any, dropped: tuple[str, ...], new_id: str, note: str) -> str:
    """The campaign text without the dropped arms, with `table` before its last control, the new id,
    and `note` added to its notes."""
    import tomlkit

    doc = tomlkit.parse(text)
    arms = doc["arms"]
    for i in reversed(range(len(arms))):
        if arms[i]["name"] in dropped:
            del arms[i]
    roles = [str(a["role"]) for a in arms]
    at = len(roles) - 1 if roles and roles[-1] == "control" else len(roles)
    if not isinstance(arms, tomlkit.items.AoT):  # arms = [{...}, ...]: an inline table there too
        table = _inline(dict(table.items()))
    arms.insert(at, table)
    doc["id"] = new_id
    earlier = SERVES.sub("", str(doc["notes"])).strip() if "notes" in doc else ""  # made again: one note
    doc["notes"] = f"{earlier} {note}" if earlier else note
    return tomlkit.dumps(doc)


def _check_result(text: str, source: str, name: str) -> None:
    """The written campaign must be one collect runs: valid, the new arm carrying only speculative and
    reporting flags, asking for its declared depth."""
    plan = parse_campaign(text, f"{source} (with the schedule arm)")
    mine = tuple(a for a in plan.arms if a.name == name)
    problems = parity_problems(mine) + depth_problems(mine)
    if problems:
        raise CampaignError([Problem(plan.source, p) for p in problems])


def write_schedule_arm(
    campaign: Path, decision: Path, out: Path, *, name: str | None = None, campaign_id: str | None = None
) -> ScheduleArm:
    """Read the campaign and decision files, write the confirmation campaign to `out` (a new file)."""
    if out.exists() or os.path.abspath(out) == os.path.abspath(campaign):
        why = "already exists; name a new file for the confirmation campaign"
        raise InputError([Problem(str(out), why)])
    source = str(campaign)
    what = "a campaign file"
    data = _check.read_document(campaign, limit=MAX_CAMPAIGN_BYTES, what=what, error=CampaignError)
    text = _check.text_of(data, source, CampaignError)
    raw = _check.read_document(decision, limit=_check.MAX_DECISION_BYTES, what="a decision file")
    found = parse_decision(_check.text_of(raw, str(decision)), str(decision))
    digest = hashlib.sha256(raw).hexdigest()
    origin = f"{decision.name} sha256 {digest[:16]}"
    made = schedule_arm(text, source, found, str(decision), origin=origin, name=name, campaign_id=campaign_id)
    atomic_write(out, made.text)
    return made
