"""SIGTERM stops a collect as Ctrl-C does (exit 143), and a SIGINT a shell left ignored stops it too."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect.signals import SIGINT_RESTORED, Terminated, deferred, stop_signals
from mtpverdict.formats.results_io import load_results

from ..conftest import wait_for_request
from .conftest import campaign_text, collect_running, interruptible, run_collect

CLI = [sys.executable, "-m", "mtpverdict"]
EXIT_INTERRUPTED = 130  # README, Exit codes
EXIT_TERMINATED = 143


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _ignore_sigint() -> None:
    """preexec_fn: the disposition a shell gives a script's background job (an ignore survives exec)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(campaign: Path, out: Path, preexec: Callable[[], object]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CLI, "collect", str(campaign), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
    )


def _stop_and_wait(proc: subprocess.Popen[bytes], sig: int) -> tuple[str, str]:
    """Signal the collect and read what it said; one the signal did not end is left to collect_running."""
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=90)
    return out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.slow  # waits on boots at 30 tok/s
def test_sigterm_stops_the_server_records_the_boot_and_resume_completes(tmp_path: Path, port: int) -> None:
    # 30 tok/s: each boot takes seconds, so the signal lands while collect still has boots to run
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text(port, tps=30))
    out = tmp_path / "results"
    with collect_running(_start(campaign, out, interruptible), out) as proc:  # no server outlives a failure
        wait_for_request(out, "ngram_k2", timed=True, proc=proc)  # mid-campaign: the second arm is measuring
        _, err = _stop_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == EXIT_TERMINATED, err
    assert "terminated (SIGTERM)" in err and "--resume" in err and "Traceback" not in err
    assert _port_free(port)  # the server was stopped, not left listening
    load_results(out)  # valid as the signal left it
    written = (out / "records.jsonl").read_bytes()
    resumed = run_collect([*CLI, "collect", str(campaign), "--out", str(out), "--resume"], out, timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "records.jsonl").read_bytes().startswith(written)  # nothing lost or rewritten
    after = load_results(out)  # a duplicate record or a torn line would not load
    statuses = list(after.boots["status"])
    assert statuses.count("interrupted") == 1 and statuses.count("failed") == 0
    ready = after.boots[after.boots["status"] == "ready"]
    assert set(ready["arm"]) == {"off_A", "ngram_k2", "draft_random_k2", "off_B"}
    assert _port_free(port)


@pytest.mark.slow  # waits on boots at 30 tok/s
def test_an_inherited_sigint_ignore_is_undone_and_said(tmp_path: Path, port: int) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text(port, tps=30))
    out = tmp_path / "results"
    with collect_running(_start(campaign, out, _ignore_sigint), out) as proc:  # a SIGINT still ignored
        wait_for_request(out, "off_A", proc=proc)  # ends in a kill here, and its server is stopped
        said, err = _stop_and_wait(proc, signal.SIGINT)
    assert proc.returncode == EXIT_INTERRUPTED, err  # it ran on to the end when SIGINT stayed ignored
    assert "SIGINT was ignored when collect started" in said
    assert _port_free(port)
    load_results(out)


def test_the_handlers_hold_only_while_collect_runs_and_a_second_sigterm_is_ignored() -> None:
    said: list[str] = []
    before_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    before_term = signal.getsignal(signal.SIGTERM)
    try:
        stopped = False
        try:
            with stop_signals(said.append):
                assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(5)  # not reached: the handler raises as soon as the signal is taken
                except Terminated:
                    stopped = True
                    os.kill(os.getpid(), signal.SIGTERM)  # while stopping: ignored, the cleanup goes on
                    time.sleep(0.2)
        except Terminated:
            stopped = False  # the second SIGTERM must not interrupt the cleanup
        assert stopped and said == [SIGINT_RESTORED]
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as inherited, once collect is done
        assert signal.getsignal(signal.SIGTERM) == before_term
    finally:
        signal.signal(signal.SIGINT, before_int)


def test_a_signal_during_a_boots_cleanup_waits_for_it_to_end() -> None:
    steps: list[str] = []
    with stop_signals(steps.append):
        try:
            with deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("cleanup ran to its end")  # the server stopped, the boot recorded
        except Terminated:
            steps.append("then stopped")
        try:  # already stopping (an exception in flight): a signal then changes nothing
            try:
                raise KeyboardInterrupt
            finally:
                with deferred():
                    os.kill(os.getpid(), signal.SIGTERM)
                    steps.append("cleanup while stopping")
        except KeyboardInterrupt as exc:
            steps.append(type(exc).__name__)
    assert steps == ["cleanup ran to its end", "then stopped", "cleanup while stopping", "KeyboardInterrupt"]


def test_a_signal_while_an_error_is_handled_still_stops_collect() -> None:
    """A record appended inside an `except ValueError` (the start file's fallback) took the handled
    error for "collect is already stopping", and a SIGTERM held meanwhile was dropped: collect went on."""
    steps: list[str] = []
    with stop_signals(steps.append):
        try:
            try:
                raise ValueError("a start file the format refuses")
            except ValueError:
                with deferred():
                    os.kill(os.getpid(), signal.SIGTERM)
                    steps.append("fallback written")
            steps.append("went on")
        except Terminated:
            steps.append("stopped")
    assert steps == ["fallback written", "stopped"]


def test_a_deferred_block_inside_another_is_held_by_the_outer_one() -> None:
    steps: list[str] = []
    with stop_signals(steps.append):
        try:
            with deferred():
                with deferred():
                    os.kill(os.getpid(), signal.SIGTERM)
                    steps.append("inner ended")
                steps.append("outer ended")  # the signal waited for the outer block too
        except Terminated:
            steps.append("then stopped")
    assert steps == ["inner ended", "outer ended", "then stopped"]


def test_a_signal_while_deferred_swaps_its_handlers_leaves_every_handler_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGTERM landing between the two handler swaps raised out of the setup and left SIGINT held
    for good: Ctrl-C then did nothing for the rest of the process."""
    real = signal.signal
    with stop_signals(lambda text: None):
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def swap_then_signal(sig: int, handler: Any) -> Any:
            previous = real(sig, handler)
            if sig == signal.SIGINT and handler is not before[signal.SIGINT]:
                raise Terminated  # as the SIGTERM handler would, right after SIGINT was swapped
            return previous

        monkeypatch.setattr(signal, "signal", swap_then_signal)
        with pytest.raises(Terminated):
            with deferred():
                pass  # never reached
        monkeypatch.setattr(signal, "signal", real)
        assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_signal_while_deferred_restores_its_handlers_leaves_every_handler_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C landing once SIGINT was restored raised out of the restore with SIGTERM still held: every
    later deferred block then took itself as nested, and SIGTERMs were swallowed."""
    real = signal.signal
    with stop_signals(lambda text: None):
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def restore_then_interrupt(sig: int, handler: Any) -> Any:
            previous = real(sig, handler)
            if type(previous).__name__ == "_Hold" and not raised:  # the first handler restored
                raised.append(sig)
                raise KeyboardInterrupt  # a Ctrl-C landing right after it
            return previous

        raised: list[int] = []
        monkeypatch.setattr(signal, "signal", restore_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            with deferred():
                pass
        monkeypatch.setattr(signal, "signal", real)
        assert raised
        assert {sig: signal.getsignal(sig) for sig in before} == before


def _one_external_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measure: Callable[[Any], Any]
) -> tuple[Any, Path]:
    """A one-boot external campaign, its start and readiness skipped, measured by `measure`; the
    collect's summary and results directory."""
    from mtpverdict.collect import Collector, load_campaign_file
    from mtpverdict.collect.boot import BootSession
    from mtpverdict.collect.measure import Measurement

    from .conftest import small_campaign

    async def no_wait(self: BootSession) -> bool:
        return True

    async def served(self: BootSession, client: object) -> str:
        return "fake-model"

    monkeypatch.setattr(BootSession, "start", no_wait)
    monkeypatch.setattr(BootSession, "ready", served)
    monkeypatch.setattr(Measurement, "run", measure)
    text = small_campaign(9).replace('mode = "launch"', 'mode = "external"')
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(text.replace('name = "off_A"', 'name = "off_A"\nbase_url = "http://127.0.0.1:9"'))
    out = tmp_path / "results"
    collector = Collector(
        load_campaign_file(campaign),
        out,
        variables={},
        resume=False,
        allow_argv_mismatch=False,
        on_event=lambda _: None,
    )
    return collector.run(), out


def test_a_sigterm_reaching_the_boot_as_a_group_before_the_loop_stops_stops_collect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group came while nothing was cancelling the boot: it became a CancelledError, which left
    collect with a traceback and exit 1 instead of 143 (one SIGTERM test in a loaded suite run)."""
    from mtpverdict.collect import CollectOutcome

    async def grouped(self: object) -> None:
        raise BaseExceptionGroup("connecting", [BaseExceptionGroup("inner", [Terminated()])])

    summary, out = _one_external_boot(tmp_path, monkeypatch, grouped)
    assert summary.outcome == CollectOutcome.TERMINATED
    assert load_results(out).boots["status"].tolist() == ["interrupted"]


def test_a_sigterm_inside_an_httpx_connect_stops_collect_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx connects through an anyio task group: a signal taken inside its connecting task reaches the
    boot wrapped in a BaseExceptionGroup while asyncio.run cancels the boot, which asyncio printed as
    `unhandled exception during asyncio.run() shutdown` with a traceback (one collect in ~12 under load).
    Here the boot's measurement does what that connect does, at once, with no server."""
    import anyio

    from mtpverdict.collect import CollectOutcome

    async def signalled_connect(self: object) -> None:
        async def connecting() -> None:
            raise Terminated  # what the SIGTERM handler raises in the task it interrupts

        async with anyio.create_task_group() as group:
            group.start_soon(connecting)
            await anyio.sleep(30)

    summary, out = _one_external_boot(tmp_path, monkeypatch, signalled_connect)
    assert summary.outcome == CollectOutcome.TERMINATED
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert load_results(out).boots["status"].tolist() == ["interrupted"]
