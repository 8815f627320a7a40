"""The checks a campaign passes before anything runs, shared by a real run and `--dry-run`.

Nothing here writes: a dry run calls `preflight` and so refuses exactly what a real run refuses, and
a real run calls it before it creates or locks the results directory.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._files import NotReadable, read_regular
from mtpverdict._jsonio import canonical
from mtpverdict.collect.campaign import MAX_CAMPAIGN_BYTES, CampaignPlan, depth_problems, parity_problems
from mtpverdict.collect.redact import Redactor, check_secrets, named_secrets
from mtpverdict.errors import CollectError, Problem, ResultsError
from mtpverdict.formats._check import loads_strict
from mtpverdict.formats.results_io import CAMPAIGN_FILE, RAW_DIR, RECORDS_FILE, resume_problem

LOCK_FILE = "collect.lock"  # under raw/: held (flock) by the one collect writing the directory
# campaign.json restates the campaign file's arms and workloads as JSON: a few times its size at most
MAX_CAMPAIGN_JSON_BYTES = 4 * MAX_CAMPAIGN_BYTES
BOOT_RECORD_MARK = b'"kind":"boot"'  # how a boot record's line reads (sorted compact keys)


@dataclass(frozen=True, slots=True)
class Preflight:
    """What the checks found: the campaign.json to write, the parity breaks allowed, warnings."""

    campaign: dict[str, Any]
    mismatch: tuple[str, ...]
    api_key: str
    warnings: tuple[str, ...]
    secrets: tuple[str, ...] = ()  # values redacted from everything collect writes (collect/redact.py)


def preflight(
    plan: CampaignPlan,
    results: Path,
    *,
    variables: dict[str, str],
    resume: bool,
    allow_argv_mismatch: bool,
    until_resolved: bool,
) -> Preflight:
    """Every check a run makes before it starts; raise CollectError or ResultsError on a refusal."""
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
    named = named_secrets(plan, variables)
    check_secrets([(f"the API key variable {plan.server.api_key_env}", api_key), *named])
    secrets = (api_key, *(value for _, value in named))
    campaign = Redactor(secrets).value(_campaign_object(plan, variables, results, mismatch, until_resolved))
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
    return Preflight(campaign, mismatch, api_key, tuple(warnings), tuple(s for s in secrets if s))


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
    if until_resolved:
        campaign["sequential_looks"] = plan.boots  # decide spends alpha over this many looks
    return campaign


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
