"""The measured part of a ready boot: warm-up, the cells (workload x concurrency x rep), checks, records.

Every run is sent between two /metrics scrapes; each request becomes a request record, each pair of
scrapes an acceptance record (the counter delta), each check (identity probe, coherence case,
likelihood) its record. The boot being measured is seen through `LiveBoot`: it keeps the request
groups sent, says whether its server still runs, and learns the depth in force from the scrapes.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from mtpverdict._jsonio import atomic_write
from mtpverdict.collect import client as cl
from mtpverdict.collect import datasets, logruns, plain
from mtpverdict.collect import served as sv
from mtpverdict.collect.campaign import WorkloadPlan
from mtpverdict.collect.context import CollectContext
from mtpverdict.collect.owed import PlannedBoot
from mtpverdict.collect.progress import Event
from mtpverdict.collect.signals import deferred
from mtpverdict.formats.results import SERVER_REQUEST_FIELDS
from mtpverdict.formats.results_io.write import encoded, record_key


class LiveBoot(Protocol):
    """What measuring needs of the boot it measures (collect/boot.py's BootSession)."""

    @property
    def planned(self) -> PlannedBoot: ...

    def note_sent(self, group: logruns.Sent) -> None:
        """Keep a request group of this boot (llama.cpp's log lines are matched to them)."""

    def check_alive(self, where: str) -> None:
        """Raise when the boot's server has exited (`where`: what was running)."""

    def learn_depth(self, snapshot: Any) -> None:
        """The depth in force from a /metrics snapshot, until known; raise when it is not the arm's."""


# what a request record the results format refused keeps: who and when, with nothing the server said
REFUSED_KEPT = ("kind", "arm", "boot", "workload", "concurrency", "rep", "stream", "warmup", "t_start")
REFUSED_NULL = ("t_first", "t_end", "prompt_tokens", "completion_tokens")
SERVED = tuple(f for f in SERVER_REQUEST_FIELDS if f != "client_cpu_share")  # what the server said


class Measurement:
    """One ready boot's measurement, on one HTTP client, against one model."""

    def __init__(
        self, ctx: CollectContext, boot: LiveBoot, client: httpx.AsyncClient, base_url: str, model: str
    ) -> None:
        self.ctx, self.boot, self.client, self.base_url, self.model = ctx, boot, client, base_url, model
        self.arm, self.number = boot.planned.arm.name, boot.planned.boot

    async def run(self) -> None:
        """Warm-up runs, every cell (with the identity probes), the coherence cases, the likelihood."""
        plan = self.ctx.plan
        await self._warm_up()
        for workload in plan.workloads:
            for conc in plan.concurrency:
                for rep in range(1, plan.reps + 1):
                    await self._cell(workload, conc, rep)
            if workload.expect_identical:
                await self._identity_probe(workload)
        await self._coherence()
        await self._likelihood()

    async def _warm_up(self) -> None:
        plan = self.ctx.plan
        first, conc = plan.workloads[0], min(plan.concurrency)
        for rep in range(1, plan.warmup_runs + 1):
            results = await self._streams(first, conc, rep)
            sent = _sent_run(None, results, f"warm-up run {rep}")
            self._record_requests(first.id, conc, rep, results, sent, warmup=True)
            self.boot.check_alive("a warm-up run")

    async def _streams(self, workload: WorkloadPlan, conc: int, rep: int) -> cl.RunResult:
        """One run of `workload` at `conc` streams, as the campaign sends it (warm-up or measured): its
        one prompt, or a dataset workload's drawn prompts (collect/datasets.py chooses each stream's)."""
        return await datasets.run_workload(
            workload,
            rep,
            self.base_url,
            concurrency=conc,
            model=self.model,
            clock=self.ctx.clock,
            headers=self.ctx.headers,
            limits=cl.StreamLimits(
                stall_seconds=self.ctx.plan.server.stall_seconds, server_fields=self.ctx.server_fields
            ),
        )

    async def _cell(self, workload: WorkloadPlan, conc: int, rep: int) -> None:
        """One measured run between two /metrics scrapes, recorded; the depth learned from the scrapes."""
        tag = f"{self.arm}-boot{self.number}-{workload.id}-c{conc}-r{rep}"
        _, before, missed = await self._scrape(f"metrics/{tag}-before.prom")
        self.boot.learn_depth(before)
        results = await self._streams(workload, conc, rep)
        sent = _sent_run((workload.id, conc, rep), results, f"{workload.id} c={conc} rep {rep}")
        self._record_requests(workload.id, conc, rep, results, sent, warmup=False)  # before the scrape
        after_rel, after, missed_after = await self._scrape(f"metrics/{tag}-after.prom")
        self._record_delta(workload.id, conc, rep, (before, after), after_rel, missed or missed_after)
        errors = sum(1 for r in results.streams if r.status != "ok")
        n = len(results.streams)
        self.ctx.event(
            Event("run", self.arm, self.number, f"{workload.id} c={conc} rep {rep}: {n - errors}/{n} ok")
        )
        self.boot.check_alive(f"{workload.id} c={conc} rep {rep}")
        self.boot.learn_depth(after)

    async def _scrape(self, rel: str) -> tuple[str | None, Any, str | None]:
        """A /metrics snapshot, read bounded: (raw path, parsed snapshot, the bound it passed if any)."""
        from mtpverdict.errors import EngineTextError
        from mtpverdict.parse import parse_metrics

        fetched = await plain.fetch_text(self.client, self.base_url + "/metrics", self.ctx.headers)
        if fetched.text is None:
            return None, None, fetched.error if fetched.breached else None
        atomic_write(self.ctx.writer.raw_path(rel), self.ctx.redact(fetched.text))
        try:
            return f"raw/{rel}", parse_metrics(fetched.text), None
        except EngineTextError:
            return f"raw/{rel}", None, None

    async def _identity_probe(self, workload: WorkloadPlan) -> None:
        """One un-nonced greedy probe: the same prompt in every arm, EOS ignored (a probe that stops at the
        first EOS compares a handful of tokens)."""
        done = await plain.complete(
            self.client,
            self.base_url,
            model=self.model,
            prompt=workload.prompt,
            max_tokens=workload.max_tokens,
            chat=workload.chat,
            headers=self.ctx.headers,
            ignore_eos=True,
            limits=cl.StreamLimits(server_fields=self.ctx.server_fields),
        )
        self.boot.note_sent(
            logruns.Sent.of(None, [_log_counts(done.served)], f"identity probe {workload.id}")
        )
        self.boot.check_alive(f"the identity probe of {workload.id}")
        if done.text is not None:
            self.ctx.append(self._coherence_record(f"identity-{workload.id}", True, None, done.text))
        elif done.error:
            self.ctx.note(self.arm, self.number, f"identity probe failed: {done.error}")

    async def _coherence(self) -> None:
        for case in self.ctx.plan.coherence:
            done = await plain.complete(
                self.client,
                self.base_url,
                model=self.model,
                prompt=case.prompt,
                max_tokens=case.max_tokens,
                chat=case.chat,
                headers=self.ctx.headers,
                limits=cl.StreamLimits(server_fields=self.ctx.server_fields),
            )
            self.boot.note_sent(
                logruns.Sent.of(None, [_log_counts(done.served)], f"coherence case {case.id}")
            )
            self.boot.check_alive(f"coherence case {case.id}")
            text, error = done.text, done.error
            passed = text is not None and case.expected in text
            shown = text if text is not None else f"[request failed: {error}]"
            self.ctx.append(self._coherence_record(case.id, passed, case.expected, shown))

    async def _likelihood(self) -> None:
        plan = self.ctx.plan
        if not plan.likelihood_text:
            return
        for rep in range(1, plan.likelihood_reps + 1):
            found = await plain.prompt_nll(
                self.client,
                self.base_url,
                model=self.model,
                text=plan.likelihood_text,
                headers=self.ctx.headers,
            )
            # its answer is not read for draft counts: llama.cpp's log lines stop being placed here
            self.boot.note_sent(logruns.Sent(None, None, "the likelihood check"))
            self.boot.check_alive("the likelihood check")
            if isinstance(found, str):
                self.ctx.note(self.arm, self.number, f"likelihood: {found}")
                return
            tokens, nll = found
            self.ctx.append(
                {
                    "kind": "likelihood",
                    "arm": self.arm,
                    "boot": self.number,
                    "rep": rep,
                    "tokens": tokens,
                    "mean_nll": nll,
                }
            )

    def _record_requests(
        self,
        workload: str,
        conc: int,
        rep: int,
        results: cl.RunResult,
        sent: logruns.Sent,
        *,
        warmup: bool,
    ) -> None:
        """The run's request records, written together, then its group noted for the engine log; a
        signal meanwhile waits for both, so a finished run is on disk, noted and counted, or none."""
        with deferred():
            records = self._request_records(workload, conc, rep, results, warmup=warmup)
            written = self._append_requests(records)
            self.boot.note_sent(sent)
            if not warmup:
                summary = self.ctx.summary
                summary.requests += len(written)
                summary.request_errors += sum(1 for r in written if r["status"] != "ok")

    def _append_requests(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append the run's records; each one the results format refuses goes in as what of it the
        format takes (`_writable`). Returns the records as written."""
        try:
            self.ctx.append_many(records)
            return records
        except ValueError:  # the valid ones are written
            known = set(self.ctx.writer.keys)
        final = [r if record_key(r) in known else self._writable(r) for r in records]
        try:
            self.ctx.append_many([r for r in final if record_key(r) not in known])
        except ValueError as exc:  # even the last fallback refused: said, and the rest goes on
            self.ctx.note(self.arm, self.number, f"a stream's record could not be written: {exc}")
            known = set(self.ctx.writer.keys)
            return [r for r in final if record_key(r) in known]
        return final

    def _writable(self, record: dict[str, Any]) -> dict[str, Any]:
        """What of a refused record the results format takes, as it will be written (redacted): without
        the server's per-request fields, else the stream as an error keeping the client's own fields,
        else only who and when (a note says which)."""
        why = encoded(self.ctx.redactor.value(record))
        if not isinstance(why, str):
            return record
        stream = "{} c={} rep {} stream {}".format(
            record["workload"], record["concurrency"], record["rep"], record["stream"]
        )
        client_only = {k: v for k, v in record.items() if k not in SERVED}
        failed = {
            "status": "error",
            "error": f"the results format refused this stream's record: {why}",
            **dict.fromkeys(REFUSED_NULL),
        }
        candidates = (
            ("the server's per-request fields dropped", client_only),
            ("recorded as an error", client_only | failed),
            ("recorded as an error", {k: record[k] for k in REFUSED_KEPT} | failed),
        )
        for said, candidate in candidates:
            if not isinstance(encoded(self.ctx.redactor.value(candidate)), str):
                self.ctx.note(self.arm, self.number, f"{stream}: {said}: {why}")
                return candidate
        return candidates[-1][1]  # refused too (a name a secret's redaction cuts): the writer says so

    def _request_records(
        self, workload: str, conc: int, rep: int, results: cl.RunResult, *, warmup: bool
    ) -> list[dict[str, Any]]:
        """One request record per stream of the run, its error redacted."""
        cpu_share = results.cpu_share
        drawn = next(w.drawn for w in self.ctx.plan.workloads if w.id == workload)
        return [
            {
                "kind": "request",
                "arm": self.arm,
                "boot": self.number,
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
                "error": None if r.error is None else self.ctx.redact(r.error),
                "output_sha256": r.output_sha256,
                "nonce": r.nonce,
                "bunched_chunks": r.bunched,
                "chunks": r.chunks,
                **_served_fields(r),
                **datasets.request_fields(drawn, rep, conc, r.stream),
                "client_cpu_share": None if cpu_share is None else round(cpu_share, 4),
            }
            for r in results.streams
        ]

    def _record_delta(
        self,
        workload: str,
        conc: int,
        rep: int,
        scrapes: tuple[Any, Any],
        raw: str | None,
        missed: str | None = None,
    ) -> None:
        """The acceptance record of one run: the counter delta between its scrapes (before, after), void
        with the reason when the delta is; a speculating arm whose scrape failed owes a void one."""
        from mtpverdict.parse import VoidWindow, acceptance_delta

        before, after = scrapes
        base = {
            "kind": "acceptance",
            "arm": self.arm,
            "boot": self.number,
            "workload": workload,
            "concurrency": conc,
            "rep": rep,
            "source": "metrics",
            "scoped": "run",
        }
        if missed is not None:
            self.ctx.note(self.arm, self.number, f"/metrics not read: {missed}")
        void = {"status": "void", "drafts": None, "draft_tokens": None, "accepted_tokens": None}
        if before is None or after is None:
            if missed is not None and self.boot.planned.arm.k:  # a speculating arm owes this run's delta
                self.ctx.append({**base, "raw": None, **void, "error": self.ctx.redact(missed)})
            return
        delta = acceptance_delta(before, after)
        if delta is None:
            return
        if isinstance(delta, VoidWindow):
            self.ctx.append({**base, "raw": raw, **void, "error": delta.reason})
            return
        per_position = None if delta.accepted_per_position is None else list(delta.accepted_per_position)
        self.ctx.append(
            {
                **base,
                "raw": raw,
                "drafts": delta.drafts,
                "draft_tokens": delta.draft_tokens,
                "accepted_tokens": delta.accepted_tokens,
                "accepted_per_position": per_position,
            }
        )

    def _coherence_record(self, case: str, passed: bool, expected: str | None, text: str) -> dict[str, Any]:
        return {
            "kind": "coherence",
            "arm": self.arm,
            "boot": self.number,
            "case": case,
            "passed": passed,
            "expected": expected,
            "output_sha256": cl.text_sha256(text),
            "output": plain.truncate(text),
        }


def _log_counts(served: sv.Served | None) -> tuple[bool, logruns.Pair | None]:
    """A request as log matching needs it: whether the engine's own response object was read, and
    its (drafted, accepted) counts when it drafted (llama-server adds them only then)."""
    if served is None or not served.own_read:
        return False, None
    found = served.acceptance
    return True, None if found is None else (found.draft_tokens, found.accepted_tokens)


def _sent_run(run: logruns.RunKey | None, results: cl.RunResult, what: str) -> logruns.Sent:
    """A run's streams as one group of log matching (collect/logruns.py)."""
    requests = []
    for r in results.streams:
        found = r.acceptance
        read = r.status == "ok" and r.own_read
        requests.append((read, None if found is None else (found.draft_tokens, found.accepted_tokens)))
    return logruns.Sent.of(run, requests, what)


def _served_fields(r: cl.StreamResult) -> dict[str, Any]:
    """What the server reported about one request, as optional request-record fields (absent when unknown)."""
    timing, acceptance, phases = r.timing, r.acceptance, r.phases
    fields: dict[str, Any] = {}
    if timing is not None:
        fields.update(
            server_ttft_ms=timing.ttft_ms,
            server_queue_ms=timing.queue_ms,
            server_generation_ms=timing.generation_ms,
            server_mean_itl_ms=timing.mean_itl_ms,
        )
    elif phases is not None:  # prompt_ms: slot start to first token; predicted_ms: first to last token
        fields.update(server_ttft_ms=phases.prompt_ms, server_generation_ms=phases.predicted_ms)
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
