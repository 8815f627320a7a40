"""The campaign loop: boot each arm in order, measure every cell, record everything, stop, go on.

Thin by design: it gathers and records, it never computes a verdict. Every record is appended (one
fsync'd line) as soon as it exists, so an interruption at any instant leaves a valid results directory
that `--resume` completes without duplicating a record.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx

from mtpverdict._describe import describe_exception
from mtpverdict._files import NotReadable, read_regular
from mtpverdict._jsonio import atomic_write
from mtpverdict.collect import client as cl
from mtpverdict.collect import datasets, logruns
from mtpverdict.collect import served as sv
from mtpverdict.collect.campaign import ArmPlan, CampaignPlan, DevicePlan, WorkloadPlan
from mtpverdict.collect.llamacpp import NO_KV_LINE, NO_REQUEST_LINES, judge_ready
from mtpverdict.collect.ownership import ProcessMark, StopStatus, stop_marked
from mtpverdict.collect.preflight import lock_results, preflight
from mtpverdict.collect.redact import Redactor
from mtpverdict.collect.server import LaunchedServer
from mtpverdict.collect.shard import Shard, check_shard, refuse_unsharded, shard_document, write_shard_file
from mtpverdict.collect.signals import Terminated, deferred, signal_number, stop_signals
from mtpverdict.errors import CollectError
from mtpverdict.formats._check import loads_strict
from mtpverdict.formats.results_io import ResultsWriter, content_sha256, record_errors
from mtpverdict.stats import layout

HEALTH_POLL_SECONDS = 1.0
INTERRUPTED = "interrupted"  # the boot status of a boot collect stopped before it finished
INTERRUPTED_NOTE = "interrupted: collect stopped before this boot finished; its runs are kept"
UNREADABLE_NOTE = (
    "interrupted: collect stopped while writing this boot's start file, which is unreadable; "
    "what was known of the boot is lost, its runs are kept"
)
STARTED_DIR = "boots"  # under raw/: one JSON file per boot started, so an interrupted boot is known
MAX_STARTED_BYTES = 1 << 20  # a start file holds one boot record and a process mark: a few KB
STARTED_NAME = re.compile(r"^(?P<arm>[A-Za-z0-9][A-Za-z0-9_.+-]{0,63})-boot(?P<boot>[1-9][0-9]{0,8})\.json$")


# --until-resolved: given the results directory, the candidate arms already settled (name -> verdict);
# the caller decides how (mtpverdict.decide.settled_arms applies a policy), so collect stays below decide
SettledArms = Callable[[Path], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Event:
    """Progress reported to the caller (the CLI renders it; the library never prints)."""

    kind: str  # plan | boot | ready | run | arm_done | note
    arm: str = ""
    boot: int = 0
    detail: str = ""
    done: int = 0
    total: int = 0


@dataclass(frozen=True, slots=True)
class PlannedBoot:
    """A boot the campaign still owes: arm, boot number, order in the campaign."""

    arm: ArmPlan
    boot: int
    order: int
    round: int = 1
    device: DevicePlan | None = None  # None: a campaign without [[devices]]


class CollectOutcome(StrEnum):
    """How a collect run ended; the CLI gives each its exit code (README, Exit codes)."""

    COMPLETE = "complete"  # every boot it ran became ready and ran to the end
    BOOTS_FAILED = "boots_failed"  # it ran to the end, but a boot failed or was refused
    INTERRUPTED = "interrupted"  # stopped (Ctrl-C) before the end; --resume continues
    TERMINATED = "terminated"  # stopped by SIGTERM (a CI cancellation, systemd) before the end; --resume


@dataclass(slots=True)
class CollectSummary:
    """What a collect run did."""

    boots: int = 0
    failed_boots: int = 0
    requests: int = 0
    request_errors: int = 0
    records: int = 0
    interrupted: bool = False
    signal: int | None = None  # the signal that interrupted it (SIGINT or SIGTERM)
    stopped_early: bool = False
    skipped_boots: int = 0
    per_arm: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "arm boot N: why", one per failed boot

    @property
    def outcome(self) -> CollectOutcome:
        if self.interrupted:
            return (
                CollectOutcome.TERMINATED if self.signal == Terminated.signum else CollectOutcome.INTERRUPTED
            )
        return CollectOutcome.BOOTS_FAILED if self.failed_boots else CollectOutcome.COMPLETE


class ServerDied(Exception):
    """The arm's server exited while the campaign was using it."""


class BootRefused(Exception):
    """The arm's server showed, once measuring began, that it is not serving the arm (its depth)."""


def _started_path(results: Path, arm: str, boot: int) -> Path:
    return results / "raw" / STARTED_DIR / f"{arm}-boot{boot}.json"


async def port_in_use(host: str, port: int, wait_seconds: float) -> bool:
    """True when something still accepts connections on host:port after waiting up to wait_seconds.

    A server launched on a busy port fails to bind while the health check reaches the other process,
    which would then be measured as this arm.
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=1.0)
        except (OSError, TimeoutError):
            return False
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return True
        await asyncio.sleep(0.25)


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


def boot_record(
    arm: str,
    boot: int,
    order: int,
    status: str,
    *,
    argv: list[str] | None = None,
    log: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """A boot record with nothing measured yet (the boot fills it in as it learns)."""
    record: dict[str, Any] = {
        "kind": "boot",
        "arm": arm,
        "boot": boot,
        "order": order,
        "status": status,
        "ready_seconds": None,
        "kv_cache_tokens": None,
        "block_size": None,
        "num_blocks": None,
        "max_model_len": None,
        "engine_version": None,
        "argv": argv,
        "error": None,
        "observed_k": None,
        "log": log,
    }
    if note is not None:
        record["note"] = note
    return record


def plan_boots(
    plan: CampaignPlan,
    writer: ResultsWriter,
    *,
    retry_failed: bool = False,
    devices: Sequence[int] | None = None,
) -> tuple[list[PlannedBoot], list[dict[str, Any]]]:
    """Boots still owed on the given devices (every device by default), and boot records owed for
    interrupted boots.

    Each device runs `plan.boots` rounds of every arm in its layout's order (stats/layout.py); a
    campaign without devices is one device keeping the file's order. A boot is settled once its boot
    record exists (ready or failed) and is not interrupted. A boot that was started but has no boot
    record (collect was killed) gets a record saying it was interrupted, built from its start file (or
    from the file's name when the file is torn: it is then placed after every boot of its device); its
    runs stay as evidence and a fresh boot is owed. With retry_failed a failed boot is not settled
    either: a fresh boot is owed, and the failed boot's record stays, so the policy's boot_ok rule
    still sees it. Fresh boots take the next numbers of their device (layout.boot_number).
    """
    count = plan.device_count
    scope = list(range(count)) if devices is None else sorted(set(devices))
    started = [s for s in read_started(writer.root) if layout.device_of(s.boot, count) in scope]
    records = [r for r in writer.records if layout.device_of(int(r.get("boot") or 1), count) in scope]
    owed_records = _interrupted_records(plan, records, started, writer.root)
    owed: list[PlannedBoot] = []
    for device in scope:
        owed.extend(_device_owed(plan, device, [*records, *owed_records], started, retry_failed))
    return sorted(owed, key=lambda p: (p.round, p.order)), owed_records


def _interrupted_records(
    plan: CampaignPlan, records: list[dict[str, Any]], started: list[StartedBoot], root: Path
) -> list[dict[str, Any]]:
    """Boot records for started boots that have none: from the start file, or its name when torn."""
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
            record = boot_record(found.arm, found.boot, order, INTERRUPTED, log=kept, note=UNREADABLE_NOTE)
            out.append(record | _device_keys(plan.devices[device] if plan.devices else None))
        else:
            record = found.data["record"]
            where = {"kind": "boot", "arm": found.arm, "boot": found.boot, "order": found.data["order"]}
            out.append({**record, **where, "status": INTERRUPTED, "note": INTERRUPTED_NOTE})
    return out


def _device_owed(
    plan: CampaignPlan,
    device: int,
    records: list[dict[str, Any]],
    started: list[StartedBoot],
    retry_failed: bool,
) -> list[PlannedBoot]:
    """The boots device `device` still owes, numbered after everything it has started."""
    count = plan.device_count
    mine = [r for r in records if layout.device_of(int(r.get("boot") or 1), count) == device]
    used_seq: dict[str, int] = {}
    order_seq = 0
    for rec in mine:
        seq = layout.seq_of(int(rec.get("boot") or 1), count)
        used_seq[rec["arm"]] = max(used_seq.get(rec["arm"], 0), seq)
        if rec["kind"] == "boot":
            order_seq = max(order_seq, layout.seq_of(int(rec["order"]), count))
    for found in started:
        if layout.device_of(found.boot, count) == device:
            used_seq[found.arm] = max(used_seq.get(found.arm, 0), layout.seq_of(found.boot, count))
            if found.data is not None:
                order_seq = max(order_seq, layout.seq_of(found.data["order"], count))
    settled: dict[str, int] = {}
    for rec in mine:
        if rec["kind"] != "boot":
            continue
        interrupted = rec["status"] == INTERRUPTED or rec.get("note") == INTERRUPTED_NOTE
        if not interrupted and not (retry_failed and rec["status"] == "failed"):
            settled[rec["arm"]] = settled.get(rec["arm"], 0) + 1
    by_name = {a.name: a for a in plan.arms}
    target = plan.devices[device] if plan.devices else None
    owed: list[PlannedBoot] = []
    for round_ in range(1, plan.boots + 1):
        for name in layout.round_order(list(by_name), seed=plan.order_seed, device=device, round_=round_):
            if settled.get(name, 0) >= round_:
                continue
            settled[name] = settled.get(name, 0) + 1
            used_seq[name] = used_seq.get(name, 0) + 1
            order_seq += 1
            owed.append(
                PlannedBoot(
                    arm=by_name[name],
                    boot=layout.boot_number(used_seq[name], device, count),
                    order=layout.boot_number(order_seq, device, count),
                    round=round_,
                    device=target,
                )
            )
    return owed


def _device_keys(device: DevicePlan | None) -> dict[str, Any]:
    """The device and node keys of a boot record (none for a campaign without devices)."""
    return {} if device is None else {"device": device.name, "node": device.node}


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


def dry_run_plan(plan: CampaignPlan, *, stream_tps: float = 50.0, boot_seconds: float = 120.0) -> list[str]:
    """Lines describing what a campaign will do and an estimate of its wall time.

    The estimate assumes every stream decodes at `stream_tps` and every boot takes `boot_seconds`
    (both stated in the output): a run lasts max_tokens / stream_tps whatever its concurrency. On
    several devices the devices run in parallel (one shard each), so the wall time is one device's.
    """
    devices = plan.device_count
    per_device = len(plan.arms) * plan.boots
    boots = per_device * devices
    runs = len(plan.workloads) * len(plan.concurrency) * plan.reps
    requests_per_boot = sum(plan.concurrency) * plan.reps * len(plan.workloads)
    run_seconds = sum(w.max_tokens for w in plan.workloads) / stream_tps * len(plan.concurrency) * plan.reps
    warm = plan.warmup_runs * plan.workloads[0].max_tokens / stream_tps
    checks = (
        sum(c.max_tokens for c in plan.coherence) / stream_tps
        + sum(w.max_tokens for w in plan.workloads if w.expect_identical) / stream_tps
    )
    per_boot = boot_seconds + warm + run_seconds + checks
    lines = [
        f"campaign {plan.id}: {plan.title}",
        f"{len(plan.arms)} arms x {plan.boots} boot(s) = {per_device} boots"
        + (f" per device, {boots} in all" if plan.devices else "")
        + ", in order "
        + ", ".join(a.name for a in plan.arms),
    ]
    lines += _device_lines(plan)
    lines += [
        f"per boot: {plan.warmup_runs} warm-up run(s), {runs} measured runs ({requests_per_boot} requests), "
        f"{len(plan.coherence)} coherence cases, {plan.likelihood_reps if plan.likelihood_text else 0} "
        "likelihood checks",
        f"total: {boots * requests_per_boot} measured requests",
        f"estimated wall time: {per_device * per_boot / 60:.1f} min ({per_device} boots x {per_boot:.0f} s"
        + (
            f" on each of {devices} devices in parallel; {boots * per_boot / 60:.1f} min on one)"
            if plan.devices
            else ")"
        )
        + f", assuming {boot_seconds:.0f} s per boot and {stream_tps:.0f} tok/s per stream",
    ]
    return lines


def _device_lines(plan: CampaignPlan) -> list[str]:
    """Each device's first round, in the order its shard boots the arms."""
    if not plan.devices:
        return []
    lines = [
        f"{len(plan.devices)} devices, one shard each (collect --shard I/{len(plan.devices)}); arm order "
        f"(controls included) drawn per device and round with order_seed {plan.order_seed}"
    ]
    for i, device in enumerate(plan.devices):
        order = layout.round_order([a.name for a in plan.arms], seed=plan.order_seed, device=i, round_=1)
        node = f" on {device.node}" if device.node else ""
        lines.append(
            f"  shard {i}: device {device.name}{node}, port {plan.port(device)}: round 1 " + ", ".join(order)
        )
    return lines


def dry_run_report(
    plan: CampaignPlan,
    results: str | os.PathLike[str],
    *,
    variables: dict[str, str],
    resume: bool,
    allow_argv_mismatch: bool,
    until_resolved: bool,
    stream_tps: float = 50.0,
    boot_seconds: float = 120.0,
) -> list[str]:
    """What `collect --dry-run` prints: the plan and its cost, then a `warning:` line for each thing
    a real run would do that the user may not expect. Every check of a real run is made first (the
    same preflight), so a dry run refuses what a real run refuses; nothing is written."""
    checked = preflight(
        plan,
        Path(results),
        variables=variables,
        resume=resume,
        allow_argv_mismatch=allow_argv_mismatch,
        until_resolved=until_resolved,
    )
    lines = dry_run_plan(checked.plan or plan, stream_tps=stream_tps, boot_seconds=boot_seconds)
    clock = [f"note: {checked.clock}"] if checked.clock else []
    return lines + clock + [f"warning: {w}" for w in checked.warnings]


class Collector:
    """Runs one campaign into one results directory."""

    def __init__(
        self,
        plan: CampaignPlan,
        results: str | os.PathLike[str],
        *,
        variables: dict[str, str],
        resume: bool,
        allow_argv_mismatch: bool,
        on_event: Callable[[Event], None],
        until_resolved: SettledArms | None = None,
        retry_failed: bool = False,
        shard: Shard | None = None,
    ) -> None:
        if shard is not None:
            check_shard(plan, shard, until_resolved=until_resolved is not None)
        else:
            refuse_unsharded(Path(results))
        self.shard = shard
        self.plan = plan
        self.retry_failed = retry_failed
        self.results = Path(results)
        self.variables = variables
        self._on_event = on_event
        self.until_resolved = until_resolved
        checked = preflight(
            plan,
            self.results,
            variables=variables,
            resume=resume,
            allow_argv_mismatch=allow_argv_mismatch,
            until_resolved=until_resolved is not None,
        )
        self.plan = checked.plan or plan  # the server's clock turned on where collect could
        self._clock_note = checked.clock
        self.mismatch = list(checked.mismatch)
        self.api_key = checked.api_key
        self.redactor = Redactor(checked.secrets)  # in every byte collect writes (collect/redact.py)
        self.headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.clock = cl.Clock()
        self._lock = lock_results(self.results)  # held until run() ends (or this process does)
        try:
            if shard is not None:
                write_shard_file(self.results, shard_document(plan, shard, content_sha256(checked.campaign)))
            self.writer = ResultsWriter(self.results, checked.campaign)
        except BaseException:
            os.close(self._lock)
            raise
        self.summary = CollectSummary()
        self._said: set[str] = set()  # evidence the engine does not show, said once per collect
        self._sent: list[logruns.Sent] = []  # this boot's request groups in order (llama.cpp log lines)

    # --- records -------------------------------------------------------------------------------------

    def _append(self, record: dict[str, Any]) -> None:
        if self.writer.append(self.redactor.value(record)):
            self.summary.records += 1

    def _redact(self, text: str) -> str:
        return self.redactor.text(text)

    def on_event(self, event: Event) -> None:
        """Report progress to the caller, redacted: a note may quote a server's answer."""
        self._on_event(dataclasses.replace(event, detail=self._redact(event.detail)))

    def _missing(self, note: tuple[str, str], arm: str, boot: int) -> None:
        """Say once per collect that the engine does not show a piece of evidence (never a failure)."""
        key, sentence = note
        if key not in self._said:
            self._said.add(key)
            self.on_event(Event("note", arm, boot, f"missing evidence: {sentence}"))

    @property
    def _llamacpp(self) -> bool:
        return self.plan.server.engine == "llamacpp"

    # --- the loop ------------------------------------------------------------------------------------

    def run(self) -> CollectSummary:
        try:
            with stop_signals(lambda text: self.on_event(Event("note", detail=text))):
                try:
                    self._run_campaign()
                except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (collect/signals.py)
                    self.summary.interrupted = True
                    self.summary.signal = signal_number(exc)
        finally:
            self.writer.close()
            os.close(self._lock)
        return self.summary

    def _run_campaign(self) -> None:
        if self._clock_note:
            self.on_event(Event("note", detail=self._clock_note))
        for event in stop_left_over_servers(self.results):
            self.on_event(event)
        devices = None if self.shard is None else [self.shard.index]
        owed, owed_records = plan_boots(
            self.plan, self.writer, retry_failed=self.retry_failed, devices=devices
        )
        for record in owed_records:
            self._record_interrupted(self._rederived(record))
        self.on_event(Event("plan", detail=f"{len(owed)} boots to run", total=len(owed)))
        self._run_rounds(owed)

    def _rederived(self, found: dict[str, Any]) -> dict[str, Any]:
        """An interrupted boot's record from what collect can derive again, not from its start file.

        A start file is not evidence (anyone who can write the results directory can edit it): the argv
        is the one the campaign gives that boot, and what the gate's freshness check and the KV
        ceilings read (engine version, KV pool) is read again from the boot's log. Of the start file's
        record only the ready time, the context window, the slots and a depth seen in force that is
        the arm's own are kept.
        """
        plan, boot = self.plan, int(found["boot"])
        arm = next(a for a in plan.arms if a.name == found["arm"])
        device = plan.devices[layout.device_of(boot, plan.device_count)] if plan.devices else None
        launch = plan.server.mode == "launch"
        argv = plan.serve_argv(arm, self.variables, boot, str(self.results), device) if launch else None
        log = f"raw/logs/{arm.name}-boot{boot}.log"
        kept = log if launch and (self.results / log).is_file() else None
        note = found.get("note") if found.get("note") == UNREADABLE_NOTE else INTERRUPTED_NOTE
        invalid = record_errors(found) if note == INTERRUPTED_NOTE else []
        if invalid:  # the start file held a record the results format refuses: nothing of it is kept
            note = f"{INTERRUPTED_NOTE}; its start file held an invalid record ({invalid[0]})"[:500]
        rebuilt = boot_record(
            arm.name, boot, int(found["order"]), INTERRUPTED, argv=argv, log=kept, note=note
        )
        if not invalid:
            rebuilt |= {k: found[k] for k in ("ready_seconds", "max_model_len", "slots") if k in found}
            if found.get("observed_k") == (arm.k or 0):
                rebuilt["observed_k"] = found["observed_k"]
        return rebuilt | _device_keys(device)

    def _record_interrupted(self, record: dict[str, Any]) -> None:
        """Append the boot record of a boot a killed collect left unfinished (its start file's)."""
        arm = next(a for a in self.plan.arms if a.name == record["arm"])
        log = record.get("log")
        if isinstance(log, str) and log == f"raw/logs/{arm.name}-boot{record['boot']}.log":
            sent = _started_sent(_started_path(self.results, arm.name, record["boot"]))
            self._log_surface(arm, record["boot"], log, record, sent)  # its engine log still holds windows
        try:
            self._append(record)
        except ValueError as exc:  # the start file held a record the results format refuses
            kept = log if isinstance(log, str) and (self.results / str(log)).is_file() else None
            note = f"{INTERRUPTED_NOTE}; its start file held an invalid record ({exc})"
            self._append(
                boot_record(arm.name, record["boot"], record["order"], INTERRUPTED, log=kept, note=note[:500])
            )
        self.on_event(Event("note", record["arm"], record["boot"], "recorded an interrupted boot"))

    def _run_rounds(self, owed: list[PlannedBoot]) -> None:
        done = 0
        try:
            for round_ in sorted({p.round for p in owed}):
                settled: Mapping[str, str] = {}
                if self.until_resolved is not None:
                    settled = self._settled()
                    open_arms = [
                        a.name for a in self.plan.arms if a.role == "candidate" and a.name not in settled
                    ]
                    if settled:
                        self.on_event(
                            Event(
                                "note",
                                detail=f"before round {round_}: settled "
                                + ", ".join(f"{a} ({v})" for a, v in sorted(settled.items())),
                            )
                        )
                    if not open_arms:
                        self.summary.stopped_early = True
                        self.summary.skipped_boots = len(owed) - done
                        self.on_event(
                            Event(
                                "note",
                                detail=f"every candidate is settled; {len(owed) - done} "
                                "planned boots are not needed",
                            )
                        )
                        break
                for planned in [p for p in owed if p.round == round_]:
                    if planned.arm.name in settled:
                        self.summary.skipped_boots += 1
                        continue
                    self._boot(planned)
                    done += 1
                    self.on_event(
                        Event(
                            "arm_done",
                            planned.arm.name,
                            planned.boot,
                            self.summary.per_arm[-1],
                            done=done + self.summary.skipped_boots,
                            total=len(owed),
                        )
                    )
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (collect/signals.py)
            self.summary.interrupted = True
            self.summary.signal = signal_number(exc)

    def _settled(self) -> Mapping[str, str]:
        """Candidates no further boot would change the verdict of, as the campaign's callback judges them."""
        assert self.until_resolved is not None
        return self.until_resolved(self.results)

    def _boot(self, planned: PlannedBoot) -> None:
        arm, plan = planned.arm, self.plan
        log_rel = f"raw/logs/{arm.name}-boot{planned.boot}.log"
        argv = (
            plan.serve_argv(arm, self.variables, planned.boot, str(self.results), planned.device)
            if plan.server.mode == "launch"
            else []
        )
        base_url = (
            arm.base_url.rstrip("/")
            if plan.server.mode == "external" and arm.base_url
            else f"http://{plan.server.host}:{plan.port(planned.device)}"
        )
        launch = plan.server.mode == "launch"
        record = boot_record(
            arm.name, planned.boot, planned.order, "ready", argv=argv or None, log=log_rel if launch else None
        ) | _device_keys(planned.device)
        started = _started_path(self.results, arm.name, planned.boot)
        _write_started(self.redactor, started, planned, record, None)
        self.on_event(
            Event("boot", arm.name, planned.boot, self._redact(" ".join(argv)) if argv else base_url)
        )
        server = None
        if launch:
            env = plan.server_env(self.variables, planned.device)
            server = LaunchedServer(argv, env, self.results / log_rel, started, self.redactor)
        self.summary.boots += 1
        self._sent = []
        before_requests, before_errors = self.summary.requests, self.summary.request_errors
        try:
            asyncio.run(self._boot_async(planned, record, server, base_url, started))
        except httpx.HTTPError as exc:  # a transport failure no request helper turned into a record
            record["status"] = "failed"
            record["error"] = self._redact(describe_exception(exc))
        except BaseException:  # Ctrl-C, or an error that stops the campaign: the boot did not finish
            if record["status"] != "failed":
                record["status"] = INTERRUPTED
            record["note"] = INTERRUPTED_NOTE
            raise
        finally:
            with deferred():  # a signal now waits: the server is stopped and the boot recorded first
                if server is not None:
                    server.stop(plan.server.grace_seconds)
                if launch:
                    self._log_surface(arm, planned.boot, log_rel, record, self._sent)
                if record["status"] == "failed":
                    self.summary.failed_boots += 1
                    self.summary.failed.append(
                        self._redact(f"{arm.name} boot {planned.boot}: {record['error']}")
                    )
                self._append(record)
                atomic_write(started.with_suffix(".done"), "")
                self.summary.per_arm.append(
                    self._arm_line(
                        planned,
                        record,
                        self.summary.requests - before_requests,
                        self.summary.request_errors - before_errors,
                    )
                )

    def _arm_line(self, planned: PlannedBoot, record: dict[str, Any], requests: int, errors: int) -> str:
        """One line per finished boot: status, ready time, requests, acceptance of this boot."""
        mine = [
            r
            for r in self.writer.records
            if r["kind"] == "acceptance"
            and r["arm"] == planned.arm.name
            and r["boot"] == planned.boot
            and r["source"] == "metrics"
            and r.get("status", "ok") == "ok"
        ]
        drafted = sum(int(r["draft_tokens"] or 0) for r in mine)
        accepted = sum(int(r["accepted_tokens"] or 0) for r in mine)
        acceptance = f", acceptance {accepted}/{drafted}" if drafted else ""
        ready = "" if record["ready_seconds"] is None else f", ready in {record['ready_seconds']:.0f} s"
        status = record["status"] + (f" ({record['error']})" if record["error"] else "")
        return (
            f"{planned.arm.name} boot {planned.boot}: {status}{ready}, {requests} requests, {errors} errors"
            f"{acceptance}"
        )

    async def _boot_async(
        self,
        planned: PlannedBoot,
        record: dict[str, Any],
        server: LaunchedServer | None,
        base_url: str,
        started: Path,
    ) -> None:
        plan, arm = self.plan, planned.arm
        # one request per connection: a server may close a kept-alive connection just as it is reused
        # (llama-server closes one idle for 5 s, and after 100 requests), and the request sent on it fails
        limits = httpx.Limits(max_connections=max(plan.concurrency) + 4, max_keepalive_connections=0)
        timeout = httpx.Timeout(connect=30.0, read=plan.server.stall_seconds, write=60.0, pool=None)
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
            if server is not None:
                port = plan.port(planned.device)
                if await port_in_use(plan.server.host, port, plan.server.grace_seconds):
                    record["status"] = "failed"
                    record["error"] = (
                        f"port {port} on {plan.server.host} is already in use by another "
                        "process; stop it or choose another server.port (a server there would be "
                        "measured as this arm)"
                    )
                    return
                server.start()
                _write_started(self.redactor, started, planned, record, server)
            ready = await self._wait_ready(client, base_url, server)
            if ready is None:
                record["status"] = "failed"
                record["error"] = self._redact(self._boot_error(server))
                return
            record["ready_seconds"] = round(ready, 3)
            model = await self._model(client, base_url, record)
            version = await cl.get_text(client, base_url + "/version", self.headers)
            if version:
                try:
                    record["engine_version"] = str(json.loads(version).get("version"))
                except (ValueError, AttributeError):
                    record["engine_version"] = version.strip()[:80]
            snapshot_text = await cl.get_text(client, base_url + "/metrics", self.headers)
            self._boot_metrics(snapshot_text, record, planned)
            refusal = await self._llama_ready(client, base_url, planned, record) if self._llamacpp else None
            refusal = refusal or _depth_refusal(arm, record["observed_k"])
            if refusal is not None:
                record["status"] = "failed"
                record["error"] = refusal
                return
            # a resume keeps what is known
            _write_started(self.redactor, started, planned, record, server, self._sent)
            try:
                await self._measure(client, base_url, model, planned, server, record)
                await self._coherence(client, base_url, model, planned, server, record)
                await self._likelihood(client, base_url, model, planned, server, record)
                if plan.server.settle_seconds:  # let the engine print its last stats window
                    await asyncio.sleep(plan.server.settle_seconds)
            except (ServerDied, BootRefused) as exc:
                record["status"] = "failed"
                record["error"] = self._redact(str(exc) or describe_exception(exc))

    async def _wait_ready(
        self, client: httpx.AsyncClient, base_url: str, server: LaunchedServer | None
    ) -> float | None:
        start = self.clock.now()
        while self.clock.now() - start < self.plan.server.boot_timeout:
            if server is not None and server.returncode() is not None:
                return None
            try:
                response = await client.get(
                    base_url + self.plan.server.health_path, headers=self.headers, timeout=5.0
                )
                if response.status_code == 200:
                    models = await client.get(base_url + "/v1/models", headers=self.headers, timeout=10.0)
                    if models.status_code == 200:
                        return self.clock.now() - start
            except httpx.HTTPError:
                pass
            await asyncio.sleep(HEALTH_POLL_SECONDS)
        return None

    def _boot_error(self, server: LaunchedServer | None) -> str:
        if server is None:
            return f"the server did not become healthy within {self.plan.server.boot_timeout:.0f} s"
        code = server.returncode()
        tail = server.log_tail().strip().splitlines()[-3:]
        what = (
            f"the server exited with status {code} before it was ready"
            if code is not None
            else f"the server was not ready within {self.plan.server.boot_timeout:.0f} s"
        )
        return what + (": " + " | ".join(line.strip()[:160] for line in tail) if tail else "")

    async def _model(self, client: httpx.AsyncClient, base_url: str, record: dict[str, Any]) -> str:
        if self.plan.server.model:
            return self.plan.server.model
        fetched = await cl.fetch_text(client, base_url + "/v1/models", self.headers)
        if fetched.text is None:  # too large, too slow or not 200: say so, not "lists no model"
            raise CollectError(f"{self._redact(fetched.error or '')}; set server.model")
        try:
            entry = json.loads(fetched.text or "{}")["data"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise CollectError(f"{base_url}/v1/models lists no model; set server.model") from None
        if isinstance(entry.get("max_model_len"), int):
            record["max_model_len"] = entry["max_model_len"]
        return str(entry["id"])

    def _boot_metrics(self, text: str | None, record: dict[str, Any], planned: PlannedBoot) -> None:
        from mtpverdict.errors import EngineTextError
        from mtpverdict.parse import observed_k, parse_metrics

        if not text:
            return
        path = self.writer.raw_path(f"metrics/{planned.arm.name}-boot{planned.boot}-ready.prom")
        atomic_write(path, self._redact(text))
        try:
            snapshot = parse_metrics(text, source=str(path))
        except EngineTextError:
            return
        record["observed_k"] = observed_k(snapshot)
        for kv in snapshot.kv_capacity:
            record["kv_cache_tokens"] = record["kv_cache_tokens"] or kv.kv_cache_tokens
            record["block_size"] = record["block_size"] or kv.block_size
            record["num_blocks"] = record["num_blocks"] or kv.num_blocks

    async def _llama_ready(
        self, client: httpx.AsyncClient, base_url: str, planned: PlannedBoot, record: dict[str, Any]
    ) -> str | None:
        """llama-server's /props and /slots once /health is ok (collect/llamacpp.py): the refusal, if any.

        Records the per-slot context (the window one request may use) and the build, and the depth as
        0 when no slot speculates; a speculating arm's depth shows on /metrics once it has drafted.
        """
        props = await cl.get_text(client, base_url + "/props", self.headers)
        slots = await cl.get_text(client, base_url + "/slots", self.headers)
        ready = judge_ready(
            props, slots, speculates=planned.arm.k is not None, concurrency=max(self.plan.concurrency)
        )
        for note in ready.missing:
            self._missing(note, planned.arm.name, planned.boot)
        record["max_model_len"] = record["max_model_len"] or ready.window_tokens
        if ready.slots is not None:
            record["slots"] = ready.slots
        record["engine_version"] = record["engine_version"] or ready.version
        if ready.speculating is False and record["observed_k"] is None:
            record["observed_k"] = 0
        return ready.refusal

    def _note_sent(
        self,
        group: logruns.Sent,
        planned: PlannedBoot,
        record: dict[str, Any],
        server: LaunchedServer | None,
    ) -> None:
        """Keep a request group of this boot, in memory and in its start file (for a resume)."""
        self._sent.append(group)
        started = _started_path(self.results, planned.arm.name, planned.boot)
        _write_started(self.redactor, started, planned, record, server, self._sent)

    def _learn_depth(self, arm: ArmPlan, record: dict[str, Any], snapshot: Any) -> None:
        """The depth in force from a scrape taken while measuring, until known (llama.cpp exports the
        per-position series only once a draft was verified); BootRefused when it is not the arm's."""
        from mtpverdict.parse import observed_k

        if record["observed_k"] is not None or snapshot is None:
            return
        record["observed_k"] = observed_k(snapshot)
        refusal = _depth_refusal(arm, record["observed_k"])
        if refusal is not None:
            raise BootRefused(refusal)

    def _check_alive(self, server: LaunchedServer | None, where: str) -> None:
        if server is not None and server.returncode() is not None:
            raise ServerDied(f"the server exited with status {server.returncode()} during {where}")

    async def _metrics(
        self, client: httpx.AsyncClient, base_url: str, rel: str
    ) -> tuple[str | None, Any, str | None]:
        """A /metrics snapshot, read bounded: (raw path, parsed snapshot, the bound it passed if any)."""
        from mtpverdict.errors import EngineTextError
        from mtpverdict.parse import parse_metrics

        fetched = await cl.fetch_text(client, base_url + "/metrics", self.headers)
        if fetched.text is None:
            return None, None, fetched.error if fetched.breached else None
        atomic_write(self.writer.raw_path(rel), self._redact(fetched.text))
        try:
            return f"raw/{rel}", parse_metrics(fetched.text), None
        except EngineTextError:
            return f"raw/{rel}", None, None

    async def _measure(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str,
        planned: PlannedBoot,
        server: LaunchedServer | None,
        record: dict[str, Any],
    ) -> None:
        plan = self.plan
        first = plan.workloads[0]
        for rep in range(1, plan.warmup_runs + 1):
            results = await self._run(base_url, model, first, min(plan.concurrency), rep)
            self._record_requests(planned, first.id, min(plan.concurrency), rep, results, warmup=True)
            self._note_sent(_sent_run(None, results, f"warm-up run {rep}"), planned, record, server)
            self._check_alive(server, "a warm-up run")
        for workload in plan.workloads:
            for conc in plan.concurrency:
                for rep in range(1, plan.reps + 1):
                    await self._timed_run(
                        client, base_url, model, planned, server, record, workload, conc, rep
                    )
            if workload.expect_identical:
                await self._identity_probe(client, base_url, model, planned, server, record, workload)

    async def _run(
        self, base_url: str, model: str, workload: WorkloadPlan, conc: int, rep: int
    ) -> cl.RunResult:
        """One run of `workload` at `conc` streams, as the campaign sends it (warm-up or measured)."""
        return await datasets.run_workload(  # one prompt, or a dataset's drawn prompts
            workload,
            rep,
            base_url,
            concurrency=conc,
            model=model,
            clock=self.clock,
            headers=self.headers,
            limits=cl.StreamLimits(stall_seconds=self.plan.server.stall_seconds),
        )

    async def _timed_run(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str,
        planned: PlannedBoot,
        server: LaunchedServer | None,
        record: dict[str, Any],
        workload: WorkloadPlan,
        conc: int,
        rep: int,
    ) -> None:
        """One measured run between two /metrics scrapes, recorded; the depth learned from the scrapes."""
        arm = planned.arm
        tag = f"{arm.name}-boot{planned.boot}-{workload.id}-c{conc}-r{rep}"
        before_rel, before, missed = await self._metrics(client, base_url, f"metrics/{tag}-before.prom")
        self._learn_depth(arm, record, before)
        results = await self._run(base_url, model, workload, conc, rep)
        after_rel, after, missed_after = await self._metrics(client, base_url, f"metrics/{tag}-after.prom")
        self._record_requests(planned, workload.id, conc, rep, results, warmup=False)
        group = _sent_run((workload.id, conc, rep), results, f"{workload.id} c={conc} rep {rep}")
        self._note_sent(group, planned, record, server)
        self._record_delta(planned, workload.id, conc, rep, before, after, after_rel, missed or missed_after)
        errors = sum(1 for r in results.streams if r.status != "ok")
        n = len(results.streams)
        self.on_event(
            Event("run", arm.name, planned.boot, f"{workload.id} c={conc} rep {rep}: {n - errors}/{n} ok")
        )
        self._check_alive(server, f"{workload.id} c={conc} rep {rep}")
        self._learn_depth(arm, record, after)

    async def _identity_probe(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str,
        planned: PlannedBoot,
        server: LaunchedServer | None,
        record: dict[str, Any],
        workload: WorkloadPlan,
    ) -> None:
        """One un-nonced greedy probe: the same prompt in every arm, EOS ignored (a probe that stops at the
        first EOS compares a handful of tokens)."""
        done = await cl.complete(
            client,
            base_url,
            model=model,
            prompt=workload.prompt,
            max_tokens=workload.max_tokens,
            chat=workload.chat,
            headers=self.headers,
            ignore_eos=True,
        )
        group = logruns.Sent.of(None, [_llama_counts(done.served)], f"identity probe {workload.id}")
        self._note_sent(group, planned, record, server)
        self._check_alive(server, f"the identity probe of {workload.id}")
        if done.text is not None:
            self._append(_coherence_record(planned, f"identity-{workload.id}", True, None, done.text))
        elif done.error:
            self.on_event(
                Event("note", planned.arm.name, planned.boot, f"identity probe failed: {done.error}")
            )

    def _record_requests(
        self,
        planned: PlannedBoot,
        workload: str,
        conc: int,
        rep: int,
        results: cl.RunResult,
        *,
        warmup: bool,
    ) -> None:
        cpu_share = results.cpu_share
        drawn = next(w.drawn for w in self.plan.workloads if w.id == workload)
        for r in results.streams:
            self.summary.requests += 0 if warmup else 1
            self.summary.request_errors += 0 if warmup or r.status == "ok" else 1
            self._append(
                {
                    "kind": "request",
                    "arm": planned.arm.name,
                    "boot": planned.boot,
                    "workload": workload,
                    "concurrency": conc,
                    "rep": rep,
                    "stream": r.stream,
                    "warmup": warmup,
                    "t_start": r.t_start,
                    "t_first": r.t_first,
                    "t_end": r.t_end,
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "status": r.status,
                    "error": None if r.error is None else self._redact(r.error),
                    "output_sha256": r.output_sha256,
                    "nonce": r.nonce,
                    "bunched_chunks": r.bunched,
                    "chunks": r.chunks,
                    **_served_fields(r),
                    **datasets.request_fields(drawn, rep, conc, r.stream),
                    "client_cpu_share": None if cpu_share is None else round(cpu_share, 4),
                }
            )

    def _record_delta(
        self,
        planned: PlannedBoot,
        workload: str,
        conc: int,
        rep: int,
        before: Any,
        after: Any,
        raw: str | None,
        missed: str | None = None,
    ) -> None:
        from mtpverdict.parse import VoidWindow, acceptance_delta

        if missed is not None:
            self.on_event(Event("note", planned.arm.name, planned.boot, f"/metrics not read: {missed}"))
        if before is None or after is None:
            if missed is not None and planned.arm.k:  # a speculating arm owes this run's counter delta
                self._append(
                    {
                        "kind": "acceptance",
                        "arm": planned.arm.name,
                        "boot": planned.boot,
                        "workload": workload,
                        "concurrency": conc,
                        "rep": rep,
                        "source": "metrics",
                        "scoped": "run",
                        "raw": None,
                        "status": "void",
                        "drafts": None,
                        "draft_tokens": None,
                        "accepted_tokens": None,
                        "error": self._redact(missed),
                    }
                )
            return
        delta = acceptance_delta(before, after)
        if delta is None:
            return
        base = {
            "kind": "acceptance",
            "arm": planned.arm.name,
            "boot": planned.boot,
            "workload": workload,
            "concurrency": conc,
            "rep": rep,
            "source": "metrics",
            "scoped": "run",
            "raw": raw,
        }
        if isinstance(delta, VoidWindow):
            self._append(
                {
                    **base,
                    "status": "void",
                    "drafts": None,
                    "draft_tokens": None,
                    "accepted_tokens": None,
                    "error": delta.reason,
                }
            )
            return
        self._append(
            {
                **base,
                "drafts": delta.drafts,
                "draft_tokens": delta.draft_tokens,
                "accepted_tokens": delta.accepted_tokens,
                "accepted_per_position": None
                if delta.accepted_per_position is None
                else list(delta.accepted_per_position),
            }
        )

    async def _coherence(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str,
        planned: PlannedBoot,
        server: LaunchedServer | None,
        record: dict[str, Any],
    ) -> None:
        for case in self.plan.coherence:
            done = await cl.complete(
                client,
                base_url,
                model=model,
                prompt=case.prompt,
                max_tokens=case.max_tokens,
                chat=case.chat,
                headers=self.headers,
            )
            group = logruns.Sent.of(None, [_llama_counts(done.served)], f"coherence case {case.id}")
            self._note_sent(group, planned, record, server)
            self._check_alive(server, f"coherence case {case.id}")
            text, error = done.text, done.error
            passed = text is not None and case.expected in text
            self._append(
                _coherence_record(
                    planned,
                    case.id,
                    passed,
                    case.expected,
                    text if text is not None else f"[request failed: {error}]",
                )
            )

    async def _likelihood(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str,
        planned: PlannedBoot,
        server: LaunchedServer | None,
        record: dict[str, Any],
    ) -> None:
        if not self.plan.likelihood_text:
            return
        for rep in range(1, self.plan.likelihood_reps + 1):
            found = await cl.prompt_nll(
                client, base_url, model=model, text=self.plan.likelihood_text, headers=self.headers
            )
            # its answer is not read for draft counts: llama.cpp's log lines stop being placed here
            self._note_sent(logruns.Sent(None, None, "the likelihood check"), planned, record, server)
            self._check_alive(server, "the likelihood check")
            if isinstance(found, str):
                self.on_event(Event("note", planned.arm.name, planned.boot, f"likelihood: {found}"))
                return
            tokens, nll = found
            self._append(
                {
                    "kind": "likelihood",
                    "arm": planned.arm.name,
                    "boot": planned.boot,
                    "rep": rep,
                    "tokens": tokens,
                    "mean_nll": nll,
                }
            )

    def _log_surface(
        self,
        arm: ArmPlan,
        boot: int,
        log_rel: str,
        record: dict[str, Any],
        sent: list[logruns.Sent] | None = None,
    ) -> None:
        """The engine log's acceptance (second surface) and KV pool, read after the boot.

        Cumulative lines (llama.cpp's per-drafter `statistics`, totals since boot) are left out: the
        /metrics deltas cover the same counters per run. llama.cpp's per-request lines are matched to
        the runs that printed them (collect/logruns.py), given the boot's request groups in order
        (`sent`; None for a boot a killed collect left, whose groups are not known); each measured
        run's lines become one run-scoped record, warm-up and check lines are set aside, and lines
        that cannot be placed are kept as engine-wide windows.
        """
        from mtpverdict.parse import parse_file

        path = self.results / log_rel
        if not path.is_file():
            return
        engine: Any = self.plan.server.engine
        parsed = parse_file(path, engine)
        for kv in parsed.kv_capacity:
            if record["kv_cache_tokens"] is None and kv.kv_cache_tokens is not None:
                record["kv_cache_tokens"] = kv.kv_cache_tokens
        if record["engine_version"] is None and parsed.engine_version:
            record["engine_version"] = parsed.engine_version
        if self._llamacpp and record["kv_cache_tokens"] is None:
            self._missing(NO_KV_LINE, arm.name, boot)
        readings = [r for r in parsed.acceptance if r.source == "log" and r.kind != "counter_total"]
        windows = readings
        if self._llamacpp:
            lines = [r for r in readings if logruns.per_request(r)]
            windows = [r for r in readings if not logruns.per_request(r)]
            if not lines and any(group.drafted for group in sent or ()):
                self._missing(NO_REQUEST_LINES, arm.name, boot)
            matched = logruns.match_lines(lines, sent) if sent is not None else None
            for found in () if matched is None else matched.runs:
                self._append_log(arm.name, boot, logruns.run_record(arm.name, boot, log_rel, found))
            windows += list(lines if matched is None else matched.unmatched)
            if matched is not None and matched.reason:
                detail = f"{len(matched.unmatched)} per-request log lines kept as windows: {matched.reason}"
                self.on_event(Event("note", arm.name, boot, detail))
        for reading in windows:
            rec = logruns.window_record(arm.name, boot, log_rel, reading)
            has_counts = rec["draft_tokens"] is not None and rec["accepted_tokens"] is not None
            if has_counts or rec["per_position_rate"] is not None or rec["acceptance_rate"] is not None:
                self._append_log(arm.name, boot, rec)

    def _append_log(self, arm: str, boot: int, rec: dict[str, Any]) -> None:
        try:
            self._append(rec)
        except ValueError as exc:  # a log window the results format cannot hold is kept as a note
            self.on_event(Event("note", arm, boot, f"log window at line {rec['line']} kept out: {exc}"))


def _started_sent(path: Path) -> list[logruns.Sent] | None:
    """The request groups a start file kept; None when it kept none or cannot be read."""
    try:
        data = json.loads(read_regular(path, MAX_STARTED_BYTES, "a start file"))
    except (NotReadable, ValueError):
        return None
    return logruns.sent_from_json(data.get("sent")) if isinstance(data, dict) else None


def _depth_refusal(arm: ArmPlan, observed: int | None) -> str | None:
    """Why a boot is refused when the depth in force is known and is not the arm's; None otherwise."""
    if arm.k is None or observed is None or observed == arm.k:
        return None
    return (
        f"speculation in force (k={observed}, from the per-position acceptance counters) does not match "
        f"the arm (k={arm.k}); refused"
    )


def _write_started(
    redactor: Redactor,
    path: Path,
    planned: PlannedBoot,
    record: dict[str, Any],
    server: LaunchedServer | None,
    sent: list[logruns.Sent] | None = None,
) -> None:
    """What a resume needs of a boot in progress: its record so far, the server to stop, and the
    request groups sent so far (so the lines of a llama.cpp log can still be placed in their runs)."""
    started: dict[str, Any] = {
        "arm": planned.arm.name,
        "boot": planned.boot,
        "order": planned.order,
        "record": record,
    }
    if sent is not None:
        started["sent"] = logruns.sent_to_json(sent)
    if server is not None and server.mark is not None:
        started.update(server.mark.as_json())
    elif server is not None and server.pid is not None:
        started["pid"] = server.pid  # it exited at once: no mark, so it is never signalled
    atomic_write(path, json.dumps(redactor.value(started), sort_keys=True))


def _coherence_record(
    planned: PlannedBoot, case: str, passed: bool, expected: str | None, text: str
) -> dict[str, Any]:
    import hashlib

    return {
        "kind": "coherence",
        "arm": planned.arm.name,
        "boot": planned.boot,
        "case": case,
        "passed": passed,
        "expected": expected,
        "output_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "output": cl.truncate(text),
    }


def _llama_counts(served: sv.Served | None) -> tuple[bool, logruns.Pair | None]:
    """A request as llama.cpp's log matching needs it: whether its `timings` were read, and its
    (drafted, accepted) counts when it drafted (llama-server adds them only then)."""
    if served is None or served.llama is None:
        return False, None
    found = served.acceptance
    return True, None if found is None else (found.draft_tokens, found.accepted_tokens)


def _sent_run(run: logruns.RunKey | None, results: cl.RunResult, what: str) -> logruns.Sent:
    """A run's streams as one group of llama.cpp's log matching (collect/logruns.py)."""
    requests = []
    for r in results.streams:
        found = r.acceptance
        read = r.status == "ok" and r.llama is not None
        requests.append((read, None if found is None else (found.draft_tokens, found.accepted_tokens)))
    return logruns.Sent.of(run, requests, what)


def _served_fields(r: cl.StreamResult) -> dict[str, Any]:
    """What the server reported about one request, as optional request-record fields (absent when unknown)."""
    timing, acceptance, llama = r.timing, r.acceptance, r.llama
    fields: dict[str, Any] = {}
    if timing is not None:
        fields.update(
            server_ttft_ms=timing.ttft_ms,
            server_queue_ms=timing.queue_ms,
            server_generation_ms=timing.generation_ms,
            server_mean_itl_ms=timing.mean_itl_ms,
        )
    elif llama is not None:  # prompt_ms: slot start to first token; predicted_ms: first to last token
        fields.update(server_ttft_ms=llama.prompt_ms, server_generation_ms=llama.predicted_ms)
    if acceptance is not None:
        fields.update(
            spec_steps=acceptance.steps,
            spec_draft_tokens=acceptance.draft_tokens,
            spec_accepted_tokens=acceptance.accepted_tokens,
            spec_accepted_per_position=None
            if acceptance.accepted_per_position is None
            else list(acceptance.accepted_per_position),
        )
    return {k: v for k, v in fields.items() if v is not None}
