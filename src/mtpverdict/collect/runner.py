"""The campaign loop: boot each arm in order, measure every cell, record everything, stop, go on.

Thin by design: it gathers and records, it never computes a verdict. Every record is appended (one
fsync'd line) as soon as it exists, so an interruption at any instant leaves a valid results directory
that `--resume` completes without duplicating a record. The pieces: collect/owed.py (which boots are
owed), collect/boot.py (one boot's lifecycle), collect/measure.py (its runs and checks),
collect/started.py (start files and interrupted boots), collect/boot_record.py (the boot record),
collect/dry_run.py (`--dry-run`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from mtpverdict.collect import client as cl
from mtpverdict.collect.boot import BootSession
from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.collect.context import CollectContext
from mtpverdict.collect.dry_run import dry_run_plan, dry_run_report
from mtpverdict.collect.owed import PlannedBoot, plan_boots
from mtpverdict.collect.preflight import lock_results, preflight
from mtpverdict.collect.progress import CollectOutcome, CollectSummary, Event
from mtpverdict.collect.redact import Redactor
from mtpverdict.collect.shard import Shard, check_shard, refuse_unsharded, shard_document, write_shard_file
from mtpverdict.collect.signals import signal_number, stop_signals
from mtpverdict.collect.started import record_interrupted, rederived, stop_left_over_servers
from mtpverdict.errors import CollectError
from mtpverdict.formats.looks import LOOKS_FILE, hand_over
from mtpverdict.formats.results_io import CAMPAIGN_FILE, RAW_DIR, ResultsWriter, content_sha256

__all__ = [
    "CollectOutcome",
    "CollectSummary",
    "Collector",
    "Event",
    "SettledArms",
    "dry_run_plan",
    "dry_run_report",
]

# --until-resolved: given the results directory, the candidate arms already settled (name -> verdict);
# the caller decides how (mtpverdict.decide.settled_arms applies a policy), so collect stays below decide
SettledArms = Callable[[Path], Mapping[str, str]]


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
        continues: str | None = None,
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
        self.until_resolved = until_resolved
        checked = preflight(
            plan,
            self.results,
            variables=variables,
            resume=resume,
            allow_argv_mismatch=allow_argv_mismatch,
            until_resolved=until_resolved is not None,
            continues=continues,
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
            if continues is not None and not (self.results / CAMPAIGN_FILE).exists():
                taker = (
                    f"shards:{checked.campaign.get('source')}"
                    if shard is not None
                    else f"results:{self.results.resolve()}:{_start_token(self.results)}"
                )
                checked.campaign["continues"] = _hand_over(continues, str(checked.campaign["id"]), taker)
            if shard is not None:
                write_shard_file(self.results, shard_document(plan, shard, content_sha256(checked.campaign)))
            self.writer = ResultsWriter(self.results, checked.campaign)
        except BaseException:
            os.close(self._lock)
            raise
        self.summary = CollectSummary()
        self.ctx = CollectContext(
            plan=self.plan,
            results=self.results,
            variables=variables,
            writer=self.writer,
            redactor=self.redactor,
            headers=self.headers,
            report=on_event,
            clock=self.clock,
            summary=self.summary,
        )

    def on_event(self, event: Event) -> None:
        """Report progress to the caller, redacted: a note may quote a server's answer."""
        self.ctx.event(event)

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
        self.ctx.say_absent()
        for event in stop_left_over_servers(self.results):
            self.on_event(event)
        devices = None if self.shard is None else [self.shard.index]
        owed, owed_records = plan_boots(
            self.plan, self.writer, retry_failed=self.retry_failed, devices=devices
        )
        for record in owed_records:
            record_interrupted(self.ctx, rederived(self.ctx, record))
        self.on_event(Event("plan", detail=f"{len(owed)} boots to run", total=len(owed)))
        self._run_rounds(owed)

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
        """One owed boot, start to record (collect/boot.py)."""
        BootSession(self.ctx, planned).run()


def _hand_over(source: str, campaign: str, taker: str) -> dict[str, object]:
    """campaign.json's `continues`, the handover recorded in `source` first (formats/looks.hand_over);
    a source that cannot take the line refuses the campaign before anything of it is written."""
    try:
        return hand_over(source, campaign, taker)
    except OSError as exc:
        raise CollectError(
            f"{Path(source) / LOOKS_FILE}: cannot record that {campaign} continues this campaign "
            f"({exc.strerror or exc}); without it the alpha its looks left could be spent twice. "
            "Make it writable (a copy of it would hand over what it left once more)"
        ) from None


START_TOKEN = "continues-token"  # raw/: this collect's start, so a retry of it is told from a new one


def _start_token(results: Path) -> str:
    """A token written once into the new results directory before it hands over: a retry of the same
    start (campaign.json not yet written) finds it, a later collect into the same path (the first
    directory moved or removed) does not."""
    path = results / RAW_DIR / START_TOKEN
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = secrets.token_hex(16)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(token + "\n", encoding="utf-8")
        return token
