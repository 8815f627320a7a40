"""Start files and interrupted boots: what collect keeps of a boot in progress, and what a resume makes of it.

Each boot started writes raw/boots/ARM-bootN.json (its record so far, the server's process mark and
the request groups sent) and, once its boot record is appended, ARM-bootN.done beside it. A start
file without its .done is a boot a killed collect left: a resume stops its server where the mark
proves it collect's, and records the boot as interrupted from what it can derive again.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msgspec import UNSET

from mtpverdict._files import NotReadable, read_regular
from mtpverdict._jsonio import atomic_write
from mtpverdict.collect import logruns
from mtpverdict.collect.boot_record import (
    INTERRUPTED,
    INTERRUPTED_NOTE,
    UNREADABLE_NOTE,
    RecordedBoot,
    new_boot,
)
from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.collect.context import CollectContext
from mtpverdict.collect.engine_log import read_engine_log
from mtpverdict.collect.ownership import ProcessMark, StopStatus, stop_marked
from mtpverdict.collect.progress import Event
from mtpverdict.collect.redact import Redactor
from mtpverdict.collect.server import LaunchedServer
from mtpverdict.formats._check import loads_strict
from mtpverdict.formats.results_io import record_errors
from mtpverdict.stats import layout

STARTED_DIR = "boots"  # under raw/: one JSON file per boot started, so an interrupted boot is known
MAX_STARTED_BYTES = 1 << 20  # a start file holds one boot record and a process mark: a few KB
STARTED_NAME = re.compile(r"^(?P<arm>[A-Za-z0-9][A-Za-z0-9_.+-]{0,63})-boot(?P<boot>[1-9][0-9]{0,8})\.json$")


def started_path(results: Path, arm: str, boot: int) -> Path:
    return results / "raw" / STARTED_DIR / f"{arm}-boot{boot}.json"


@dataclass(frozen=True, slots=True)
class StartedBoot:
    """A boot's start file as a resume finds it: its content, or None when unreadable (torn)."""

    path: Path
    arm: str
    boot: int
    data: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        return self.path.with_suffix(".done").exists()


def read_started(results: Path) -> list[StartedBoot]:
    """Every start file under raw/boots/, in name order; a file that is not whole JSON of the shape
    collect writes (a crash while it was written) is kept with data None, named by its file name."""
    found: list[StartedBoot] = []
    directory = results / "raw" / STARTED_DIR
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        name = STARTED_NAME.match(path.name)
        if name is None:
            continue
        try:
            data = loads_strict(read_regular(path, MAX_STARTED_BYTES, "a start file").decode("utf-8"))
        except (NotReadable, ValueError):
            data = None
        if not _started_shape(data):
            found.append(StartedBoot(path, name["arm"], int(name["boot"]), None))
            continue
        found.append(StartedBoot(path, data["arm"], data["boot"], data))
    return found


def _started_shape(data: object) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("arm"), str)
        and all(isinstance(data.get(k), int) and not isinstance(data.get(k), bool) for k in ("boot", "order"))
        and isinstance(data.get("record"), dict)
    )


def write_started(
    redactor: Redactor,
    path: Path,
    record: RecordedBoot,
    server: LaunchedServer | None,
    sent: list[logruns.Sent] | None = None,
) -> None:
    """What a resume needs of a boot in progress: its record so far, the server to stop, and the
    request groups sent so far (so the lines of a llama.cpp log can still be placed in their runs)."""
    started: dict[str, Any] = {
        "arm": record.arm,
        "boot": record.boot,
        "order": record.order,
        "record": record.as_json(),
    }
    if sent is not None:
        started["sent"] = logruns.sent_to_json(sent)
    if server is not None and server.mark is not None:
        started.update(server.mark.as_json())
    elif server is not None and server.pid is not None:
        started["pid"] = server.pid  # it exited at once: no mark, so it is never signalled
    atomic_write(path, json.dumps(redactor.value(started), sort_keys=True))


def started_sent(path: Path) -> list[logruns.Sent] | None:
    """The request groups a start file kept; None when it kept none or cannot be read."""
    try:
        data = json.loads(read_regular(path, MAX_STARTED_BYTES, "a start file"))
    except (NotReadable, ValueError):
        return None
    return logruns.sent_from_json(data.get("sent")) if isinstance(data, dict) else None


def stop_left_over_servers(results: Path) -> list[Event]:
    """Stop the servers of unfinished boots that a killed collect left running, where each is proven
    this collect's (ownership.stop_marked); a notice for each stopped, and for each left alone."""
    events = []
    for found in read_started(results):
        if found.finished:
            continue
        if found.data is None:
            events.append(
                Event("note", found.arm, found.boot, "its start file is unreadable: no process was signalled")
            )
            continue
        mark = ProcessMark.from_json(found.data, found.path)
        if mark is None:
            if found.data.get("pid") is not None:
                events.append(
                    Event(
                        "note",
                        found.arm,
                        found.boot,
                        f"pid {found.data['pid']} was not signalled: its start file carries no proof "
                        "that collect launched it (token, start time, process group)",
                    )
                )
            continue
        outcome = stop_marked(mark)
        if outcome.status != StopStatus.GONE:
            events.append(Event("note", found.arm, found.boot, outcome.detail))
    return events


def interrupted_records(
    plan: CampaignPlan, records: list[dict[str, Any]], started: list[StartedBoot], root: Path
) -> list[dict[str, Any]]:
    """Boot records for started boots that have none: from the start file, or its name when torn
    (then placed after every boot of its device). Not yet evidence: `rederived` makes the records
    collect appends."""
    count = plan.device_count
    boot_records = {(r["arm"], r["boot"]) for r in records if r["kind"] == "boot"}
    last_seq = [0] * count  # the latest order position known on each device
    for number in [int(r["order"]) for r in records if r["kind"] == "boot"] + [
        s.data["order"] for s in started if s.data is not None
    ]:
        device = layout.device_of(number, count)
        last_seq[device] = max(last_seq[device], layout.seq_of(number, count))
    arm_names = {a.name for a in plan.arms}
    out: list[dict[str, Any]] = []
    for found in started:
        if (found.arm, found.boot) in boot_records or found.arm not in arm_names:
            continue
        device = layout.device_of(found.boot, count)
        if found.data is None:
            last_seq[device] += 1
            order = layout.boot_number(last_seq[device], device, count)
            log = f"raw/logs/{found.arm}-boot{found.boot}.log"
            kept = log if (root / log).is_file() else None
            target = plan.devices[device] if plan.devices else None
            torn = new_boot(
                found.arm, found.boot, order, INTERRUPTED, log=kept, note=UNREADABLE_NOTE, device=target
            )
            out.append(torn.as_json())
        else:
            record = found.data["record"]
            where = {"kind": "boot", "arm": found.arm, "boot": found.boot, "order": found.data["order"]}
            out.append({**record, **where, "status": INTERRUPTED, "note": INTERRUPTED_NOTE})
    return out


def rederived(ctx: CollectContext, found: dict[str, Any]) -> RecordedBoot:
    """An interrupted boot's record from what collect can derive again, not from its start file.

    A start file is not evidence (anyone who can write the results directory can edit it): the argv
    is the one the campaign gives that boot, and what the gate's freshness check and the KV
    ceilings read (engine version, KV pool) is read again from the boot's log. Of the start file's
    record only the ready time, the context window, the slots and a depth seen in force that is
    the arm's own are kept.
    """
    plan, boot = ctx.plan, int(found["boot"])
    arm = next(a for a in plan.arms if a.name == found["arm"])
    device = plan.devices[layout.device_of(boot, plan.device_count)] if plan.devices else None
    launch = plan.server.mode == "launch"
    argv = plan.serve_argv(arm, ctx.variables, boot, str(ctx.results), device) if launch else None
    log = f"raw/logs/{arm.name}-boot{boot}.log"
    kept = log if launch and (ctx.results / log).is_file() else None
    note = found.get("note") if found.get("note") == UNREADABLE_NOTE else INTERRUPTED_NOTE
    invalid = record_errors(found) if note == INTERRUPTED_NOTE else []
    if invalid:  # the start file held a record the results format refuses: nothing of it is kept
        note = f"{INTERRUPTED_NOTE}; its start file held an invalid record ({invalid[0]})"[:500]
    rebuilt = new_boot(
        arm.name, boot, int(found["order"]), INTERRUPTED, argv=argv, log=kept, note=note, device=device
    )
    if invalid:
        return rebuilt
    return dataclasses.replace(  # an absent field stays as new_boot left it
        rebuilt,
        ready_seconds=found.get("ready_seconds"),
        max_model_len=found.get("max_model_len"),
        slots=found.get("slots", UNSET),
        observed_k=found["observed_k"] if found.get("observed_k") == (arm.k or 0) else None,
    )


def record_interrupted(ctx: CollectContext, record: RecordedBoot) -> None:
    """Append the boot record of a boot a killed collect left unfinished (its start file's)."""
    log = record.log
    if log is not None and log == f"raw/logs/{record.arm}-boot{record.boot}.log":
        sent = started_sent(started_path(ctx.results, record.arm, record.boot))
        record = read_engine_log(ctx, record, log, sent)  # its engine log still holds windows
    try:
        ctx.append(record.as_json())
    except ValueError as exc:  # the start file held a record the results format refuses
        kept = log if log is not None and (ctx.results / log).is_file() else None
        note = f"{INTERRUPTED_NOTE}; its start file held an invalid record ({exc})"
        ctx.append(
            new_boot(record.arm, record.boot, record.order, INTERRUPTED, log=kept, note=note[:500]).as_json()
        )
    ctx.note(record.arm, record.boot, "recorded an interrupted boot")
