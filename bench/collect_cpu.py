"""CPU of the whole `mtpverdict collect` process per streamed token, beside the stream loop's and a floor's.

A fast local server (this file with --serve, its own process, on uvloop where installed) answers as
vLLM's API server does: /health, /v1/models, /version and a small vLLM-shaped /metrics, and streamed
completions exactly as bench/collector_accuracy.py's server streams them (chunked, vLLM 0.32's event
shape, the first delta --ttft-ms after the request, then one delta of --tpd tokens every tpd / --tps s).

For each concurrency, three measurements against that one server, in turn, each in its own process:
- `collect`: the real CLI (`python -m mtpverdict collect`) on a small external-mode campaign (two
  controls, one boot each, one warm-up run and --reps measured runs at that concurrency). Its CPU is
  the process's user + system time from os.wait4 (it starts no child in external mode), over every
  token it streamed (warm-up included): what a user's collect costs, start-up, /metrics scrapes,
  records and the campaign loop included;
- `stream-loop`: mtpverdict.collect.client.run_concurrent alone in a long-lived worker, the same runs
  (CPU around the runs only): the 21.6 us of docs/performance.md's client table;
- `floor`: a bare asyncio buffered protocol that reads the same streams and notes the reads that carry
  text (bench/collector_accuracy.py's floor): the event loop and the kernel alone.
Every figure is also given over the floor of the same round (the machine is shared and noisy). The
collect figure is split into a fixed part and the rest: the fixed part is the CPU of the same campaign
at concurrency 1 and 2 tokens per request (start-up and imports, preflight, two boots, their /metrics
scrapes and records: everything that does not grow with the tokens), the rest is what grows with them.

With --baseline SRC (the src/ directory of an earlier version), that version is measured too, in turn
with this one in every round, so before and after see the same load.

    python bench/collect_cpu.py [--levels 64,256] [--rounds 2] [--reps 2] [--baseline OLD/src]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import collector_accuracy as ca

BENCH = Path(__file__).resolve()
ROOT = BENCH.parent.parent
MODEL = "bench-tpd1"
METRICS = (
    "# TYPE vllm:generation_tokens counter\n"
    'vllm:generation_tokens_total{{engine="0",model_name="{model}"}} {generated:.1f}\n'
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{{block_size="16",engine="0",kv_cache_size_tokens="1048576",'
    'num_gpu_blocks="65536"}} 1.0\n'
)

# --------------------------------------------------------------------------------------------------
# the server: collector_accuracy's stream, plus what collect asks of a server besides streams


def _answer(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (
        status.encode(),
        ctype,
        len(body),
        body,
    )


async def _serve(args: argparse.Namespace) -> None:
    generated = [0]

    def get(path: str) -> bytes:
        if path == "/health":
            return _answer("200 OK", b"")
        if path == "/v1/models":
            body = {"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 65536}]}
            return _answer("200 OK", json.dumps(body).encode())
        if path == "/version":
            return _answer("200 OK", b'{"version": "0.0.0-bench"}')
        if path == "/metrics":
            text = METRICS.format(model=MODEL, generated=generated[0]).encode()
            return _answer("200 OK", text, b"text/plain; version=0.0.4")
        return _answer("404 Not Found", b"{}")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        method, path = head.split(b" ", 2)[:2]
        if method == b"GET":
            writer.write(get(path.decode("latin-1")))
        else:
            length = 0
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = json.loads(await reader.readexactly(length)) if length else {}
            done = await ca._stream(writer, body, args)
            generated[0] += int(done["n"])
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", args.port, backlog=1024)
    async with server:
        await server.serve_forever()


# --------------------------------------------------------------------------------------------------
# the measured processes


def _campaign(port: int, level: int, args: argparse.Namespace) -> str:
    arms = "\n".join(
        f'[[arms]]\nname = "{name}"\nrole = "control"\nbase_url = "http://127.0.0.1:{port}"\n'
        for name in ("off_A", "off_B")
    )
    return f"""
campaign_version = 1
id = "collect-cpu"
title = "collect's CPU per streamed token"
concurrency = [{level}]
reps = {args.reps}
warmup_runs = 1
boots = 1
window_tokens = 65536

[scope]
device = "bench"
engine = "vllm"
model = "{MODEL}"

[server]
mode = "external"
model = "{MODEL}"
stall_seconds = 30

{arms}
[[workloads]]
id = "bench"
prompt = "{ca.PROMPT}"
max_tokens = {args.tokens}
ignore_eos = true
"""


def _cpu_of(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run argv to its end: (its user + system CPU seconds, its stderr's tail)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[2:4]} exited {proc.returncode}: {err.decode()[-600:]}")
    return usage.ru_utime + usage.ru_stime, err.decode()[-200:]


def _streamed_tokens(results: Path) -> int:
    tokens = 0
    with (results / "records.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["kind"] == "request" and rec["status"] == "ok":
                tokens += int(rec["completion_tokens"])
    return tokens


def _collect(
    src: Path, port: int, level: int, args: argparse.Namespace, tmp: Path, tokens: int | None = None
) -> tuple[float, int]:
    """One whole collect of the small campaign by the mtpverdict in `src`: (process CPU seconds, tokens
    streamed)."""
    campaign = tmp / f"campaign-c{level}.toml"
    sized = argparse.Namespace(**{**vars(args), "tokens": tokens or args.tokens})
    campaign.write_text(_campaign(port, level, sized), encoding="utf-8")
    results = Path(tempfile.mkdtemp(dir=tmp, prefix=f"results-c{level}-"))
    results.rmdir()
    env = {**os.environ, "PYTHONPATH": str(src)}
    cpu, _ = _cpu_of(
        [sys.executable, "-m", "mtpverdict", "collect", str(campaign), "--out", str(results)], env
    )
    return cpu, _streamed_tokens(results)


def _startup(src: Path) -> float:
    """CPU of the interpreter, the imports and the CLI: `python -m mtpverdict collect --help`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return _cpu_of([sys.executable, "-m", "mtpverdict", "collect", "--help"], env)[0]


async def _loop_runs(name: str, port: int, cmd: dict[str, int]) -> tuple[float, int]:
    """`runs` runs of `c` streams by the stream loop or the floor: (CPU seconds around them, tokens)."""
    runner = ca.RUNNERS["client" if name == "stream-loop" else "floor"]
    base = f"http://127.0.0.1:{port}"
    cpu = time.process_time()
    tokens = 0
    for _ in range(cmd["runs"]):
        streams = await runner(base, {"c": cmd["c"], "tokens": cmd["tokens"], "tpd": 1}, {})
        tokens += sum(int(s["n"]) for s in streams if not s["error"] and s["first"] is not None)
    return time.process_time() - cpu, tokens


def _worker(name: str, port: int) -> None:
    """A long-lived worker: a JSON command per stdin line, a JSON answer per stdout line; each command
    runs on the event loop collect runs its boots on (mtpverdict.collect.client.run_loop)."""
    try:
        from mtpverdict.collect.client import run_loop
    except ImportError:  # a version before run_loop (to measure it): asyncio's loop, as it ran
        run_loop = asyncio.run

    for line in sys.stdin:
        cpu, tokens = run_loop(_loop_runs(name, port, json.loads(line)))
        sys.stdout.write(json.dumps({"cpu": cpu, "tokens": tokens}) + "\n")
        sys.stdout.flush()


def _start_worker(name: str, port: int, src: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.Popen(
        [sys.executable, str(BENCH), "--worker", name, "--port", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ask(proc: subprocess.Popen[str], cmd: dict[str, int]) -> tuple[float, int]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(cmd) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a worker ended (exit {proc.wait()})")
    answer = json.loads(line)
    return float(answer["cpu"]), int(answer["tokens"])


# --------------------------------------------------------------------------------------------------
# the measurement


def _versions(args: argparse.Namespace) -> dict[str, Path]:
    """The mtpverdict source trees measured: this one, and the --baseline tree when given."""
    found = {"this tree": ROOT / "src"}
    if args.baseline:
        found["baseline"] = args.baseline
    return found


def _measure(port: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every measurement of every version, in turn within each round (so the machine's load hits all)."""
    versions = _versions(args)
    workers = {
        (version, name): _start_worker(name, port, src)
        for version, src in versions.items()
        for name in ("stream-loop", "floor")
    }
    found: dict[str, Any] = {v: {"startup": [], "fixed": [], "cells": {}} for v in versions}
    try:
        for proc in workers.values():
            _ask(proc, {"c": 4, "tokens": 8, "runs": 1})  # warm-up: imports, code paths
        for _ in range(args.rounds):
            for version, src in versions.items():
                mine = found[version]
                mine["startup"].append(_startup(src))
                mine["fixed"].append(_collect(src, port, 1, args, tmp, tokens=2)[0])
                for level in args.levels:
                    runs = 2 * (1 + args.reps)  # as many runs as the campaign's two boots send
                    cell = mine["cells"].setdefault(level, {"collect": [], "stream-loop": [], "floor": []})
                    cell["collect"].append(_collect(src, port, level, args, tmp))
                    for name in ("stream-loop", "floor"):
                        cmd = {"c": level, "tokens": args.tokens, "runs": runs}
                        cell[name].append(_ask(workers[(version, name)], cmd))
    finally:
        for proc in workers.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
    return found


def _us(pairs: list[tuple[float, int]]) -> float:
    cpu = sum(c for c, _ in pairs)
    tokens = sum(t for _, t in pairs)
    return cpu / tokens * 1e6 if tokens else float("nan")


def _table(found: dict[str, Any]) -> list[str]:
    lines = []
    for version, mine in found.items():
        startup, fixed = statistics.median(mine["startup"]), statistics.median(mine["fixed"])
        lines.append(
            f"{version}: start-up (python -m mtpverdict collect --help) {startup:.2f} s CPU; fixed part (the "
            f"campaign at c=1, 2 tokens per request) {fixed:.2f} s CPU (medians of {len(mine['fixed'])})"
        )
    lines += [
        "",
        "| c | version | measured | tokens | CPU us per token | over its floor | per round |",
        "|---|---|---|---|---|---|---|",
    ]
    levels = next(iter(found.values()))["cells"]
    for level in levels:
        for version, mine in found.items():
            lines += _rows(level, version, mine)
    return lines


def _rows(level: int, version: str, mine: dict[str, Any]) -> list[str]:
    cell = mine["cells"][level]
    fixed = statistics.median(mine["fixed"])
    floor = _us(cell["floor"])
    tokens = cell["collect"][0][1]
    rows = [
        ("collect (whole process)", cell["collect"]),
        ("collect without its fixed part", [(cpu - fixed, n) for cpu, n in cell["collect"]]),
        ("stream loop", cell["stream-loop"]),
        ("floor", cell["floor"]),
    ]
    lines = []
    for what, pairs in rows:
        each = ", ".join(f"{c / n * 1e6:.1f}" for c, n in pairs if n)
        us = _us(pairs)
        lines.append(f"| {level} | {version} | {what} | {tokens} | {us:.1f} | {us / floor:.2f} | {each} |")
    return lines


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--levels", type=_ints, default=(64, 256), help="concurrencies, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over every measurement")
    parser.add_argument("--reps", type=int, default=2, help="measured runs per boot of the campaign")
    parser.add_argument("--tokens", type=int, default=128, help="completion tokens per request")
    parser.add_argument("--tps", type=float, default=50.0, help="tokens per second per stream")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src/ of an earlier mtpverdict (`git archive` of a commit), measured in turn with this one",
    )
    parser.add_argument("--save", type=Path, help="write the measurements here (JSON)")
    parser.add_argument("--serve", action="store_true", help="run the server (internal)")
    parser.add_argument("--worker", choices=("stream-loop", "floor"), help="run one client (internal)")
    parser.add_argument("--port", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.serve:
        ca._run_server_loop(_serve(args))
        return 0
    if args.worker:
        _worker(args.worker, args.port)
        return 0
    print(f"$ python bench/collect_cpu.py {' '.join(argv or sys.argv[1:])}")
    print(
        f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"server: {args.tps:g} tok/s per stream, 1 token per delta, {args.tokens} tokens, first delta "
        f"{args.ttft_ms:g} ms; campaign: 2 arms x (1 warm-up + {args.reps} runs); {args.rounds} round(s)"
    )
    port = ca._free_port()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        server = subprocess.Popen(
            [sys.executable, str(BENCH), "--serve", "--port", str(port)]
            + [f"--tps={args.tps}", f"--tokens={args.tokens}", f"--ttft-ms={args.ttft_ms}"]
        )
        try:
            ca._wait_listening(port)
            found = _measure(port, args, tmp)
        finally:
            server.terminate()
            server.wait(timeout=10)
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"this driver's CPU {own.ru_utime + own.ru_stime:.1f} s\n"
    )
    print("\n".join(_table(found)))
    if args.save:
        args.save.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
