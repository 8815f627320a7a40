"""The signals that stop a collect: SIGTERM as Ctrl-C is, and a SIGINT a shell left ignored made live again.

A CI cancellation or `systemctl stop` sends SIGTERM; Python's default for it ends the process at once,
leaving the server listening and the boot without a record. While a collect runs, SIGTERM raises
`Terminated`, a KeyboardInterrupt, so it takes the path Ctrl-C takes: the server is stopped, the boot
recorded interrupted, the results directory left valid for `--resume`; the CLI exits 143 (128 + 15).
A second SIGTERM while that happens is ignored, so the cleanup finishes (systemd follows with SIGKILL
after its timeout in any case). A boot's cleanup (stopping its server, appending its record) runs
`deferred`: a SIGINT or SIGTERM arriving then waits for it to end, so no server is left running and no
finished boot loses its record.

A shell starts a background job (`collect ... &` in a script) with SIGINT ignored, and Python keeps an
ignored SIGINT ignored: Ctrl-C and `kill -INT` would do nothing. A collect restores the default
handling and says so, so SIGINT stops it as documented.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from types import FrameType

SIGINT_RESTORED = (
    "SIGINT was ignored when collect started (a shell's background job): collect stops on it as on Ctrl-C"
)


class Terminated(KeyboardInterrupt):
    """SIGTERM reached a running collect: it stops as on Ctrl-C."""

    signum = int(signal.SIGTERM)


def signal_number(exc: KeyboardInterrupt) -> int:
    """The signal that stopped a collect: SIGTERM for Terminated, else SIGINT."""
    return Terminated.signum if isinstance(exc, Terminated) else int(signal.SIGINT)


@contextmanager
def stop_signals(note: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, SIGTERM raises Terminated and an inherited SIGINT ignore is undone."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        yield
        return
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        note(SIGINT_RESTORED)
    stopping = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise Terminated

    previous_term = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        if previous_int == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


_DEFERRED = (signal.SIGINT, signal.SIGTERM)


class _Hold:
    """The handler of a `deferred` block: it keeps the signals that came."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.pending.append(signum)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs; then act on one that came, unless the block runs
    because collect is already stopping (an exception in flight), which it then simply goes on doing.
    A block inside another is held by the outer one; a signal while the handlers are being swapped
    finds every handler restored."""
    handlers = {sig: signal.getsignal(sig) for sig in _DEFERRED}
    if threading.current_thread() is not threading.main_thread() or any(
        isinstance(h, _Hold) for h in handlers.values()
    ):
        yield
        return
    # stopping: an interrupt (Ctrl-C, SIGTERM, a cancellation) is in flight; an ordinary exception being
    # handled (a fallback written in an `except`) is not one, and a signal then still stops collect
    in_flight = sys.exc_info()[1]
    stopping = in_flight is not None and not isinstance(in_flight, Exception)
    hold = _Hold()
    previous = {sig: h for sig, h in handlers.items() if h not in (signal.SIG_IGN, signal.SIG_DFL, None)}
    with ExitStack() as restore:  # every handler restored, whatever signal lands while it is done
        for sig, h in previous.items():
            restore.callback(signal.signal, sig, h)  # before the swap, so a signal after it finds it
            signal.signal(sig, hold)
        yield
    if hold.pending and not stopping:
        raise Terminated if hold.pending[0] == Terminated.signum else KeyboardInterrupt
