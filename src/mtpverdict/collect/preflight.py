"""The checks a campaign passes before anything runs, shared by a real run and `--dry-run`.

Nothing here writes: a dry run calls `preflight` and so refuses exactly what a real run refuses, and
a real run calls it before it creates or locks the results directory.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._files import NotReadable, read_regular
from mtpverdict._jsonio import canonical
from mtpverdict.collect.campaign import (
    MAX_CAMPAIGN_BYTES,
    SPEC_PLACEHOLDER,
    CampaignPlan,
    depth_problems,
    parity_problems,
)
from mtpverdict.collect.launch import resolve_deployment
from mtpverdict.collect.redact import Redactor, check_secrets, named_secrets
from mtpverdict.engines import registry
from mtpverdict.engines.interface import COLLECT_PARTS
from mtpverdict.errors import CollectError, Problem, ResultsError
from mtpverdict.formats._check import loads_strict
from mtpverdict.formats.looks import continuation
from mtpverdict.formats.results_io import CAMPAIGN_FILE, RAW_DIR, RECORDS_FILE, resume_problem

LOCK_FILE = "collect.lock"  # under raw/: held (flock) by the one collect writing the directory
# campaign.json restates the campaign file's arms and workloads as JSON: a few times its size at most
MAX_CAMPAIGN_JSON_BYTES = 4 * MAX_CAMPAIGN_BYTES
BOOT_RECORD_MARK = b'"kind":"boot"'  # how a boot record's line reads (sorted compact keys)
VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class Preflight:
    """What the checks found: the campaign.json to write, the parity breaks allowed, warnings, and the
    plan to run (the campaign's, with the server's clock turned on where collect could)."""

    campaign: dict[str, Any]
    mismatch: tuple[str, ...]
    api_key: str
    warnings: tuple[str, ...]
    plan: CampaignPlan | None = None
    clock: str = ""  # whose clock times decode and TTFT, and why (said once at the start)
    secrets: tuple[str, ...] = ()  # values redacted from everything collect writes (collect/redact.py)


def preflight(
    plan: CampaignPlan,
    results: Path,
    *,
    variables: dict[str, str],
    resume: bool,
    allow_argv_mismatch: bool,
    until_resolved: bool,
    continues: str | None = None,
) -> Preflight:
    """Every check a run makes before it starts; raise CollectError or ResultsError on a refusal.

    `continues` names the earlier campaign this one continues (a results directory or a campaign id):
    campaign.json records it and the alpha its looks spent (formats/looks.continuation)."""
    if until_resolved and plan.boots < 2:
        raise CollectError(f"{plan.source}: --until-resolved needs boots >= 2 (the budget of rounds)")
    if results.exists() and not results.is_dir():
        raise CollectError(f"{results}: exists and is not a directory; choose a results directory")
    holds_campaign = (results / CAMPAIGN_FILE).exists()
    if holds_campaign and not resume:
        raise CollectError(
            f"{results}: already holds a campaign; pass --resume to continue it or "
            "choose a new results directory"
        )
    plan = resolve_deployment(plan)  # [server] compose: the arms' argv from the service (collect/launch.py)
    undefined = plan.undefined(variables)
    if undefined:
        raise CollectError(
            f"{plan.source}: server.command needs a value for {', '.join(undefined)} "
            "(define it in [vars] or pass --var NAME=VALUE)"
        )
    depths = depth_problems(plan.arms)
    if depths:
        raise CollectError(f"{plan.source}: " + "; ".join(depths))
    mismatch = tuple(parity_problems(plan.arms))
    if mismatch and not allow_argv_mismatch:
        raise CollectError("; ".join(mismatch))
    api_key = os.environ.get(plan.server.api_key_env, "") if plan.server.api_key_env else ""
    if plan.server.api_key_env and not api_key:
        raise CollectError(f"the API key variable {plan.server.api_key_env} is not set")
    plan, clock = server_clock(plan, _existing_argv(results / CAMPAIGN_FILE) if holds_campaign else None)
    plan = with_missing_parts(plan)
    named = named_secrets(plan, variables)
    check_secrets([(f"the API key variable {plan.server.api_key_env}", api_key), *named])
    secrets = (api_key, *(value for _, value in named))
    campaign = Redactor(secrets).value(_campaign_object(plan, variables, results, mismatch, until_resolved))
    _continued(campaign, results if holds_campaign else None, continues)
    warnings: list[str] = [f"harness parity not held (--allow-argv-mismatch): {m}" for m in mismatch]
    if holds_campaign:
        _same_campaign(results / CAMPAIGN_FILE, campaign)
        n = _boot_records(results)
        warnings.append(
            f"{results} already holds this campaign ({n} boot record{'' if n == 1 else 's'}); "
            "a real run continues it"
        )
    elif results.is_dir():
        warnings.append(f"{results} exists; a real run writes the campaign into it")
    holder = _lock_holder(results)
    if holder is not None:
        warnings.append(
            f"another collect (pid {holder}) is running on {results}: a real run would be refused"
        )
    return Preflight(
        campaign, mismatch, api_key, tuple(warnings), plan, clock, tuple(s for s in secrets if s)
    )


def server_clock(plan: CampaignPlan, existing: Sequence[str] | None) -> tuple[CampaignPlan, str]:
    """The plan with the engine's per-request timing turned on alike for every arm when its flag is
    known and the campaign's engine version has it (the engine's `server_fields`: vLLM's from 0.32), and
    a sentence saying whose clock times decode and TTFT, or why not the server's.

    The flag joins server.command, which every arm shares, so harness parity holds and gate, which
    compares speculative flags only, reads the arms as before. A resume keeps what campaign.json
    recorded (`existing`: its first arm's serve_argv), so a campaign begun without it continues so.
    """
    server = plan.server
    client = "decode and TTFT on the client's clock (streams it reads in a burst are set aside)"
    known = server.engine in registry.ENGINES
    parts = registry.get(server.engine) if known else None
    fields = registry.present(parts.server_fields) if parts is not None else None
    if parts is None or fields is None:
        return plan, f"{client}: collect knows no per-request timing for engine {server.engine}"
    if not fields.timed:
        return plan, f"{client}: {parts.title}'s {fields.response_key} gives no per-request timing"
    own = f"decode and TTFT on {parts.title}'s own clock"
    flag = fields.clock_flag
    if flag is None:
        return plan, f"{own} (each response's {fields.response_key})"
    given = [*server.command, *(a for arm in plan.arms for a in arm.serve_args)]
    if any(flag in part for part in given):
        return plan, f"{own} ({flag} in the campaign)"
    why = _why_not(plan, existing, parts.title, flag, fields.clock_since)
    if why:
        return plan, f"{client}: {why}"
    command = list(server.command)
    at = command.index(SPEC_PLACEHOLDER) if SPEC_PLACEHOLDER in command else len(command)
    command.insert(at, flag)
    plan = _with_note(plan, f"Harness flag {flag} added by collect to every arm (the server's clock).")
    plan = dataclasses.replace(plan, server=dataclasses.replace(plan.server, command=tuple(command)))
    return plan, (
        f"{own}: collect added {flag} to every arm alike (a harness flag, not a speculative one; "
        "recorded in campaign.json); the client's clock is kept beside it"
    )


def _why_not(
    plan: CampaignPlan, existing: Sequence[str] | None, title: str, flag: str, since: tuple[int, int] | None
) -> str:
    """Why collect cannot turn the engine's per-request timing on for this campaign ("" when it can)."""
    if plan.server.mode != "launch":
        return f"server.mode = {plan.server.mode}: collect does not start the server (start it with {flag})"
    if plan.server.shell:
        return f"shell = true: collect does not edit a shell line (add {flag} to server.command)"
    if existing is not None and flag not in existing:
        return f"this campaign was begun without {flag}, and a resume continues it as it was"
    if since is None:
        return ""
    version = dict(plan.scope).get("engine_version") or ""
    found = VERSION.match(version)
    first = f"{since[0]}.{since[1]}"
    if found is None:
        return (
            f"[scope] engine_version ({version or 'not given'}) does not say which {title} runs: state it "
            f"({first} or later turns the server's clock on), or add {flag} to server.command"
        )
    if (int(found.group(1)), int(found.group(2))) < since:
        return f"{title} {version} is older than {first}, which reports no per-request timing"
    return ""


def with_missing_parts(plan: CampaignPlan) -> CampaignPlan:
    """The plan with a note, recorded in campaign.json, of each part collect would use that the
    campaign's engine lacks (collect says them once too, CollectContext.say_absent)."""
    reasons = registry.missing_parts(plan.server.engine, COLLECT_PARTS)
    return _with_note(plan, " ".join(f"Missing evidence: {r}." for r in reasons)) if reasons else plan


def _with_note(plan: CampaignPlan, note: str) -> CampaignPlan:
    return dataclasses.replace(plan, notes=f"{plan.notes} {note}" if plan.notes else note)


def _existing_argv(path: Path) -> tuple[str, ...] | None:
    """The first arm's serve_argv campaign.json recorded (None when it cannot be read or has none)."""
    try:
        data = loads_strict(read_regular(path, MAX_CAMPAIGN_JSON_BYTES, "campaign.json").decode("utf-8"))
    except (NotReadable, ValueError):
        return None  # _same_campaign reports it
    arms = data.get("arms") if isinstance(data, dict) else None
    argv = (
        arms[0].get("serve_argv") if isinstance(arms, list) and arms and isinstance(arms[0], dict) else None
    )
    return tuple(str(a) for a in argv) if isinstance(argv, list) else ()


def _campaign_object(
    plan: CampaignPlan,
    variables: dict[str, str],
    results: Path,
    mismatch: tuple[str, ...],
    until_resolved: bool,
) -> dict[str, Any]:
    campaign = plan.results_campaign(variables, str(results))
    if mismatch:
        campaign["notes"] = (
            (campaign.get("notes") or "") + " Harness parity not held (recorded by "
            "--allow-argv-mismatch): " + "; ".join(mismatch)
        ).strip()
    campaign["planned_boots"] = plan.boots * plan.device_count  # a decision before them is interim
    if until_resolved:
        campaign["sequential_looks"] = plan.boots  # decide spends alpha over this many looks
    return campaign


def _continued(campaign: dict[str, Any], existing: Path | None, continues: str | None) -> None:
    """Set campaign.json's `continues`: a resume keeps what the campaign recorded when it began."""
    if existing is None:
        if continues is not None:
            campaign["continues"] = continuation(continues)
        return
    try:
        before = loads_strict(
            read_regular(existing / CAMPAIGN_FILE, MAX_CAMPAIGN_JSON_BYTES, "campaign.json").decode("utf-8")
        )
    except (NotReadable, ValueError):
        return  # _same_campaign reports it
    kept = before.get("continues") if isinstance(before, dict) else None
    if continues is not None and kept is None:
        raise CollectError(
            f"{existing}: was collected without --continues; a campaign names the one it continues when "
            "it begins (a new results directory)"
        )
    if kept is not None:
        _same_continuation(existing, kept, continues)
        campaign["continues"] = kept


def _same_continuation(existing: Path, kept: object, continues: str | None) -> None:
    """Refuse a resume whose --continues names another campaign than the one it began continuing
    (it would otherwise keep the first in silence, and the user believe the second counted)."""
    if continues is None or not isinstance(kept, dict):
        return
    other = _another_continuation(kept, continues)
    if other is not None:
        raise CollectError(
            f"{existing}: continues campaign {kept.get('campaign')!r}, and --continues names {other}: "
            "a resume keeps the campaign it began continuing (resume without --continues, or collect "
            "a new results directory)"
        )


def _another_continuation(kept: dict[str, Any], continues: str) -> str | None:
    """What --continues names when it provably is not the campaign `kept` records: a results
    directory of another campaign, or another directory of the same one (its looks file lacks the
    handover line whose chain `kept` holds), or another campaign id. A path with nothing there
    cannot be compared (the directory moved), and is not refused."""
    from mtpverdict.formats.looks import LOOKS_FILE, holds_chain

    directory = Path(continues)
    if directory.is_dir() and (directory / CAMPAIGN_FILE).is_file():
        named = continuation(continues).get("campaign")
        if named != kept.get("campaign"):
            return f"campaign {named!r} ({continues})"
        chain = kept.get("looks_chain")
        if isinstance(chain, str) and holds_chain(directory / LOOKS_FILE, chain) is False:
            return f"another directory of it ({continues}), not the one whose alpha it took"
        return None
    if directory.exists() or os.sep in continues:
        return None
    return f"campaign {continues!r}" if continues != kept.get("campaign") else None


def _same_campaign(path: Path, campaign: dict[str, Any]) -> None:
    """Refuse to continue a results directory written for another campaign (or another --var)."""
    try:
        existing = loads_strict(read_regular(path, MAX_CAMPAIGN_JSON_BYTES, "campaign.json").decode("utf-8"))
    except (NotReadable, ValueError) as exc:
        raise ResultsError([Problem(str(path), f"cannot be resumed: {exc}")]) from None
    problem = resume_problem(existing, json.loads(canonical(campaign)))
    if problem is not None:
        raise ResultsError([Problem(str(path), problem)])


def _boot_records(results: Path) -> int:
    path = results / RECORDS_FILE
    if not path.is_file():  # only a regular file is opened: a FIFO would block the dry run
        return 0
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if BOOT_RECORD_MARK in line)
    except OSError:
        return 0


def _lock_holder(results: Path) -> str | None:
    """The pid written by a collect that holds the directory's lock now, without taking it."""
    try:
        fd = os.open(results / RAW_DIR / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
    finally:
        os.close(fd)  # closing drops the shared lock if it was taken
    return None


def lock_results(results: Path) -> int:
    """Create the results directory and hold its lock for this process; refuse if another collect
    holds it (two writers would interleave records, and a resume would stop the other's server)."""
    (results / RAW_DIR).mkdir(parents=True, exist_ok=True)
    path = results / RAW_DIR / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise CollectError(
            f"{results}: another collect (pid {holder}) is running on this results directory; "
            "wait for it to end, or stop it, before resuming"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
