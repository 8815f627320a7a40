"""One boot's lifecycle: start its server, wait until it serves, read what it is, measure, stop, record.

`BootSession.run` takes one planned boot from its start file to its boot record. The record is
appended whatever happens (ready, failed, refused or interrupted), after the server is stopped and
its log read, with a signal deferred meanwhile; the start file's .done then says the boot finished.
`start` is the one place a boot's server starts, `ready` where collect learns what it serves.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

import httpx

from mtpverdict._describe import describe_exception
from mtpverdict._jsonio import atomic_write
from mtpverdict.collect import client as cl
from mtpverdict.collect import logruns, plain
from mtpverdict.collect.boot_record import INTERRUPTED, INTERRUPTED_NOTE, RecordedBoot, new_boot
from mtpverdict.collect.campaign import ArmPlan
from mtpverdict.collect.context import CollectContext
from mtpverdict.collect.discipline import prepare_boot
from mtpverdict.collect.engine_log import read_engine_log
from mtpverdict.collect.launch import launched_server
from mtpverdict.collect.measure import Measurement
from mtpverdict.collect.owed import PlannedBoot
from mtpverdict.collect.progress import Event
from mtpverdict.collect.server import LaunchedServer
from mtpverdict.collect.signals import deferred
from mtpverdict.collect.started import started_path, write_started
from mtpverdict.engines.interface import Readiness
from mtpverdict.errors import CollectError

HEALTH_POLL_SECONDS = 1.0


class ServerDied(Exception):
    """The arm's server exited while the campaign was using it."""


class BootRefused(Exception):
    """The arm's server showed, once measuring began, that it is not serving the arm (its depth)."""


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


def depth_refusal(arm: ArmPlan, observed: int | None) -> str | None:
    """Why a boot is refused when the depth in force is known and is not the arm's; None otherwise."""
    if arm.k is None or observed is None or observed == arm.k:
        return None
    return (
        f"speculation in force (k={observed}, from the per-position acceptance counters) does not match "
        f"the arm (k={arm.k}); refused"
    )


class BootSession:
    """One planned boot of one arm, and what collect has learnt of it so far (`record`)."""

    def __init__(self, ctx: CollectContext, planned: PlannedBoot) -> None:
        plan, arm = ctx.plan, planned.arm
        self.ctx, self._planned = ctx, planned
        self.launch = plan.server.mode == "launch"
        self.log_rel = f"raw/logs/{arm.name}-boot{planned.boot}.log"
        self.argv = (
            plan.serve_argv(arm, ctx.variables, planned.boot, str(ctx.results), planned.device)
            if self.launch
            else []
        )
        self.base_url = (
            arm.base_url.rstrip("/")
            if plan.server.mode == "external" and arm.base_url
            else f"http://{plan.server.host}:{plan.port(planned.device)}"
        )
        self.record: RecordedBoot = new_boot(
            arm.name,
            planned.boot,
            planned.order,
            "ready",
            argv=self.argv or None,
            log=self.log_rel if self.launch else None,
            device=planned.device,
        )
        self.started = started_path(ctx.results, arm.name, planned.boot)
        self.server: LaunchedServer | None = None
        self.sent: list[logruns.Sent] = []  # this boot's request groups in order (llama.cpp log lines)

    @property
    def planned(self) -> PlannedBoot:
        return self._planned

    # --- the lifecycle -------------------------------------------------------------------------------

    def run(self) -> None:
        """The whole boot; its boot record is appended however it ends. Ctrl-C and SIGTERM propagate."""
        summary = self.ctx.summary
        self._announce()
        before = (summary.requests, summary.request_errors)
        try:
            cl.run_loop(self._serve())
        except httpx.HTTPError as exc:  # a transport failure no request helper turned into a record
            self._fail(self.ctx.redact(describe_exception(exc)))
        except BaseException:  # Ctrl-C, or an error that stops the campaign: the boot did not finish
            self.interrupted()
            raise
        finally:
            with deferred():  # a signal now waits: the server is stopped and the boot recorded first
                self.stop(summary.requests - before[0], summary.request_errors - before[1])

    def _announce(self) -> None:
        """The start file (before anything runs, so a killed collect knows the boot), then the event."""
        ctx, planned = self.ctx, self.planned
        write_started(ctx.redactor, self.started, self.record, None)
        shown = ctx.redact(" ".join(self.argv)) if self.argv else self.base_url
        ctx.event(Event("boot", planned.arm.name, planned.boot, shown))
        if self.launch:
            env = ctx.plan.server_env(ctx.variables, planned.device)
            where = (planned.arm.name, planned.boot, planned.device)
            self.server = launched_server(
                ctx.plan, self.argv, env, ctx.results / self.log_rel, self.started, ctx.redactor, where
            )
        ctx.summary.boots += 1

    async def _serve(self) -> None:
        """Start, ready, measure, on one HTTP client; a failure is left in the record.

        A signal taken inside a task of httpx's (an anyio task group, while it connects) reaches this
        boot as a group. When asyncio.run is already cancelling the boot (the interrupt left the event
        loop from that task first), the boot ends cancelled, as asyncio.run asked, instead of with an
        error asyncio would print with its traceback; when the group comes first (seen under uvloop
        on a loaded machine), the interrupt in it is raised, so collect stops as on that signal.
        """
        try:
            await self._on_client()
        except BaseExceptionGroup as group:
            interrupts, rest = group.split((KeyboardInterrupt, asyncio.CancelledError))
            if rest is not None:
                raise
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # asyncio.run is cancelling this boot
                raise asyncio.CancelledError from None
            taken = _first_interrupt(interrupts)
            if taken is None:
                raise asyncio.CancelledError from None
            raise taken from None  # the signal reached the boot before the loop stopped: it stops collect

    async def _on_client(self) -> None:
        plan = self.ctx.plan
        # one request per connection: a server may close a kept-alive connection just as it is reused
        # (llama-server closes one idle for 5 s, and after 100 requests), and the request sent on it fails
        limits = httpx.Limits(max_connections=max(plan.concurrency) + 4, max_keepalive_connections=0)
        timeout = httpx.Timeout(connect=30.0, read=plan.server.stall_seconds, write=60.0, pool=None)
        async with httpx.AsyncClient(limits=limits, timeout=timeout, verify=cl.httpx_tls()) as client:
            if not await self.start():
                return
            model = await self.ready(client)
            if model is not None:
                await self.measure(client, model)

    async def start(self) -> bool:
        """Launch the arm's server (none in external mode) once its port is free; False, the boot
        failed, when it cannot start."""
        plan, server = self.ctx.plan, self.server
        prepared: dict[str, Any] = {}
        env = plan.server_env(self.ctx.variables, self.planned.device)  # its device's selection
        failure = prepare_boot(plan, server, prepared, env=env)  # collect/discipline.py: before_boot, ...
        self.record = replace(self.record, **prepared)
        if failure is not None:
            self._fail(self.ctx.redact(failure))
            return False
        if server is None:
            return True
        port = plan.port(self.planned.device)
        if await port_in_use(plan.server.host, port, plan.server.grace_seconds):
            self._fail(
                f"port {port} on {plan.server.host} is already in use by another process; stop it or "
                "choose another server.port (a server there would be measured as this arm)"
            )
            return False
        server.start()
        write_started(self.ctx.redactor, self.started, self.record, server)
        return True

    async def ready(self, client: httpx.AsyncClient) -> str | None:
        """Wait until the server serves, then read what it is (model, version, KV pool, depth in force,
        the engine's readiness endpoints); the model to measure, or None with the boot failed or refused."""
        ready = await self._wait_ready(client)
        if ready is None:
            self._fail(self.ctx.redact(self._boot_error()))
            return None
        self.record = replace(self.record, ready_seconds=round(ready, 3))
        model = await self._model(client)
        headers = self.ctx.headers
        version = await plain.get_text(client, self.base_url + "/version", headers)
        if version:
            try:
                self.record = replace(self.record, engine_version=str(json.loads(version).get("version")))
            except (ValueError, AttributeError):
                self.record = replace(self.record, engine_version=version.strip()[:80])
        self._boot_metrics(await plain.get_text(client, self.base_url + "/metrics", headers))
        readiness = self.ctx.readiness
        refusal = await self._engine_ready(client, readiness) if readiness is not None else None
        refusal = refusal or depth_refusal(self.planned.arm, self.record.observed_k)
        if refusal is not None:
            self._fail(refusal)
            return None
        return model

    async def measure(self, client: httpx.AsyncClient, model: str) -> None:
        """Every run and check of the campaign on this boot (collect/measure.py); a server that dies or
        shows another depth fails the boot."""
        # what the boot learnt while it became ready: a resume keeps it
        write_started(self.ctx.redactor, self.started, self.record, self.server, self.sent)
        try:
            await Measurement(self.ctx, self, client, self.base_url, model).run()
            if self.ctx.plan.server.settle_seconds:  # let the engine print its last stats window
                await asyncio.sleep(self.ctx.plan.server.settle_seconds)
        except (ServerDied, BootRefused) as exc:
            self._fail(self.ctx.redact(str(exc) or describe_exception(exc)))

    def interrupted(self) -> None:
        """The boot did not finish (Ctrl-C, SIGTERM, an error that stops the campaign)."""
        status = self.record.status if self.record.failed else INTERRUPTED
        self.record = replace(self.record, status=status, note=INTERRUPTED_NOTE)

    def stop(self, requests: int, errors: int) -> None:
        """Stop the server, read its log, append the boot record and mark the start file done."""
        ctx, planned, summary = self.ctx, self.planned, self.ctx.summary
        if self.server is not None:
            self.server.stop(ctx.plan.server.grace_seconds)
        if self.launch:
            self.record = read_engine_log(ctx, self.record, self.log_rel, self.sent)
        if self.record.failed:
            summary.failed_boots += 1
            summary.failed.append(ctx.redact(f"{planned.arm.name} boot {planned.boot}: {self.record.error}"))
        ctx.append(self.record.as_json())
        atomic_write(self.started.with_suffix(".done"), "")
        summary.per_arm.append(self._arm_line(requests, errors))

    # --- what measuring asks of the boot (measure.LiveBoot) -------------------------------------------

    def note_sent(self, group: logruns.Sent) -> None:
        """Keep a request group of this boot, in memory and in its start file (for a resume)."""
        self.sent.append(group)
        write_started(self.ctx.redactor, self.started, self.record, self.server, self.sent)

    def check_alive(self, where: str) -> None:
        if self.server is not None and self.server.returncode() is not None:
            raise ServerDied(f"the server exited with status {self.server.returncode()} during {where}")

    def learn_depth(self, snapshot: Any) -> None:
        """The depth in force from a scrape taken while measuring, until known (llama.cpp exports the
        per-position series only once a draft was verified); BootRefused when it is not the arm's."""
        from mtpverdict.parse import observed_k

        if self.record.observed_k is not None or snapshot is None:
            return
        self.record = replace(self.record, observed_k=observed_k(snapshot))
        refusal = depth_refusal(self.planned.arm, self.record.observed_k)
        if refusal is not None:
            raise BootRefused(refusal)

    # --- the record ----------------------------------------------------------------------------------

    def _fail(self, error: str) -> None:
        self.record = replace(self.record, status="failed", error=error)

    def _arm_line(self, requests: int, errors: int) -> str:
        """One line per finished boot: status, ready time, requests, acceptance of this boot."""
        planned, record = self.planned, self.record
        mine = [
            r
            for r in self.ctx.writer.records
            if r["kind"] == "acceptance"
            and r["arm"] == planned.arm.name
            and r["boot"] == planned.boot
            and r["source"] == "metrics"
            and r.get("status", "ok") == "ok"
        ]
        drafted = sum(int(r["draft_tokens"] or 0) for r in mine)
        accepted = sum(int(r["accepted_tokens"] or 0) for r in mine)
        acceptance = f", acceptance {accepted}/{drafted}" if drafted else ""
        ready = "" if record.ready_seconds is None else f", ready in {record.ready_seconds:.0f} s"
        status = record.status + (f" ({record.error})" if record.error else "")
        return (
            f"{planned.arm.name} boot {planned.boot}: {status}{ready}, {requests} requests, {errors} errors"
            f"{acceptance}"
        )

    # --- readiness -----------------------------------------------------------------------------------

    async def _wait_ready(self, client: httpx.AsyncClient) -> float | None:
        plan, clock, headers = self.ctx.plan, self.ctx.clock, self.ctx.headers
        start = clock.now()
        while clock.now() - start < plan.server.boot_timeout:
            if self.server is not None and self.server.returncode() is not None:
                return None
            try:
                response = await client.get(
                    self.base_url + plan.server.health_path, headers=headers, timeout=5.0
                )
                if response.status_code == 200:
                    models = await client.get(self.base_url + "/v1/models", headers=headers, timeout=10.0)
                    if models.status_code == 200:
                        return clock.now() - start
            except httpx.HTTPError:
                pass
            await asyncio.sleep(HEALTH_POLL_SECONDS)
        return None

    def _boot_error(self) -> str:
        server, timeout = self.server, self.ctx.plan.server.boot_timeout
        if server is None:
            return f"the server did not become healthy within {timeout:.0f} s"
        code = server.returncode()
        tail = server.log_tail().strip().splitlines()[-3:]
        what = (
            f"the server exited with status {code} before it was ready"
            if code is not None
            else f"the server was not ready within {timeout:.0f} s"
        )
        return what + (": " + " | ".join(line.strip()[:160] for line in tail) if tail else "")

    async def _model(self, client: httpx.AsyncClient) -> str:
        if self.ctx.plan.server.model:
            return self.ctx.plan.server.model
        fetched = await plain.fetch_text(client, self.base_url + "/v1/models", self.ctx.headers)
        if fetched.text is None:  # too large, too slow or not 200: say so, not "lists no model"
            raise CollectError(f"{self.ctx.redact(fetched.error or '')}; set server.model")
        try:
            entry = json.loads(fetched.text or "{}")["data"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise CollectError(f"{self.base_url}/v1/models lists no model; set server.model") from None
        if isinstance(entry.get("max_model_len"), int):
            self.record = replace(self.record, max_model_len=entry["max_model_len"])
        return str(entry["id"])

    def _boot_metrics(self, text: str | None) -> None:
        """The /metrics snapshot of a ready server, kept under raw/: the depth in force and the KV pool."""
        from mtpverdict.errors import EngineTextError
        from mtpverdict.parse import observed_k, parse_metrics

        if not text:
            return
        planned = self.planned
        path = self.ctx.writer.raw_path(f"metrics/{planned.arm.name}-boot{planned.boot}-ready.prom")
        atomic_write(path, self.ctx.redact(text))
        try:
            snapshot = parse_metrics(text, source=str(path))
        except EngineTextError:
            return
        self.record = replace(self.record, observed_k=observed_k(snapshot))
        for kv in snapshot.kv_capacity:
            record = self.record
            self.record = replace(
                self.record,
                kv_cache_tokens=record.kv_cache_tokens or kv.kv_cache_tokens,
                block_size=record.block_size or kv.block_size,
                num_blocks=record.num_blocks or kv.num_blocks,
            )

    async def _engine_ready(self, client: httpx.AsyncClient, readiness: Readiness) -> str | None:
        """The engine's readiness endpoints once /health is ok, judged by its `readiness` part (llama.cpp:
        /props and /slots): the refusal, if any.

        Records the context one request may use, the slot count and the build, and the depth as 0 when
        the server does not speculate; a speculating arm's depth shows on /metrics once it has drafted.
        """
        planned = self.planned
        bodies = await read_endpoints(client, self.base_url, self.ctx.headers, readiness.paths)
        ready = readiness.judge(
            bodies, speculates=planned.arm.k is not None, concurrency=max(self.ctx.plan.concurrency)
        )
        for note in ready.missing:
            self.ctx.missing(note, planned.arm.name, planned.boot)
        record = self.record
        self.record = replace(
            self.record,
            max_model_len=record.max_model_len or ready.window_tokens,
            engine_version=record.engine_version or ready.version,
        )
        if ready.slots is not None:
            self.record = replace(self.record, slots=ready.slots)
        if ready.speculating is False and self.record.observed_k is None:
            self.record = replace(self.record, observed_k=0)
        return ready.refusal


async def read_endpoints(
    client: httpx.AsyncClient, base_url: str, headers: dict[str, str], paths: tuple[str, ...]
) -> dict[str, str | None]:
    """Each path's body, in order (None where it did not answer 200)."""
    return {path: await plain.get_text(client, base_url + path, headers) for path in paths}


def _first_interrupt(group: BaseExceptionGroup[BaseException] | None) -> KeyboardInterrupt | None:
    """The first KeyboardInterrupt (Ctrl-C, or Terminated for SIGTERM) in a group, nested ones too."""
    for exc in () if group is None else group.exceptions:
        found = _first_interrupt(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(found, KeyboardInterrupt):
            return found
    return None
