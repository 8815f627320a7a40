"""Accuracy and CPU cost of measuring clients, side by side against one server whose write instants are known.

A local OpenAI-compatible streaming server (this file with --serve, its own process) answers each
request like vLLM's API server: chunked transfer encoding, vLLM 0.32's completion-event shape, the first
delta `--ttft-ms` after the request, then one delta every `tokens per delta / --tps` seconds, a usage
event and [DONE]. It logs the CLOCK_MONOTONIC instants (time.perf_counter, shared by every process of the
machine) at which it wrote each stream's first and last delta. Tokens per delta come from the model name
(`bench-tpd4`: 4 tokens in every delta, as under speculation).

Each client runs in its own long-lived worker process (this file with --worker NAME), so its CPU time
(user + system, time.process_time) is its own:
- `client`: mtpverdict.collect.client.run_concurrent, the measuring client;
- `previous`: the client before it (bench/_previous_client.py, from ecda5f1; httpx);
- `httpx-raw`: httpx at its cheapest, raw bytes (aiter_raw) cut and classified as the client does: what
  keeping httpx for the measured streams would cost;
- `vllm-bench`: `vllm bench serve`'s own request function, imported from the installed vLLM
  (vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions with an aiohttp session
  set up as vllm/benchmarks/serve.py does), run with the vLLM venv's Python (--vllm-python);
- `floor`: a bare asyncio buffered protocol that reads the stream and counts events (no HTTP or JSON
  parsing, no bounds): the cost of the event loop and the kernel alone, the floor of any asyncio client.

Every round sends the same command to every worker in turn (order shuffled per round), at each
concurrency and tokens per delta, so drift and the machine's noise hit all of them. Errors are against
the server's write instants: decode error = measured decode tok/s over the rate from the server's first
and last writes - 1; TTFT error = client's first-delta instant - server's first write.

    python bench/collector_accuracy.py --vllm-python /work/main/.venv-vllm/bin/python [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEVELS = (1, 8, 64, 256)
TOKENS_PER_DELTA = (1, 4)
WORKERS = ("client", "previous", "httpx-raw", "vllm-bench", "floor")
BENCH = Path(__file__).resolve()
ROOT = BENCH.parent.parent
# one completion event as vLLM 0.32 writes it (tests/data/recorded/vllm-0.32.0-cpu/sse-perreq-none.txt)
EVENT = (
    '{{"id":"cmpl-{id}","object":"text_completion","created":1796083059,"model":"{model}","choices":'
    '[{{"index":0,"text":"{text}","logprobs":null,"finish_reason":null,"stop_reason":null,'
    '"prompt_token_ids":null,"token_ids":null}}]}}'
)


# --------------------------------------------------------------------------------------------------
# the server


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def _read_request(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = json.loads(await reader.readexactly(length)) if length else {}
    return body if isinstance(body, dict) else None


async def _stream(
    writer: asyncio.StreamWriter, body: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    received = time.perf_counter()
    tokens = int(body.get("max_tokens", 128))
    model = str(body.get("model", "bench"))
    per = int(model.rsplit("tpd", 1)[1]) if "tpd" in model else 1
    prompt = str(body.get("prompt", ""))
    nonce = prompt[1:13] if prompt.startswith("[") else None
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    first_at = received + args.ttft_ms / 1000.0
    written: list[float] = []
    for i, start in enumerate(range(0, tokens, per)):
        delay = first_at + i * per / args.tps - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        text = " tok" * min(per, tokens - start)
        event = EVENT.format(id=nonce, model=model, text=text).encode()
        writer.write(_chunk(b"data: " + event + b"\n\n"))
        written.append(time.perf_counter())
    usage = {"prompt_tokens": 16, "total_tokens": tokens + 16, "completion_tokens": tokens}
    final = {"id": f"cmpl-{nonce}", "choices": [], "usage": usage}
    writer.write(_chunk(b"data: " + json.dumps(final).encode() + b"\n\n") + _chunk(b"data: [DONE]\n\n"))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return {"nonce": nonce, "received": received, "first": written[0], "last": written[-1], "n": tokens}


async def _serve(args: argparse.Namespace) -> None:
    with open(args.log, "a", encoding="utf-8") as log:

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            body = await _read_request(reader)
            if body is not None:
                log.write(json.dumps(await _stream(writer, body, args)) + "\n")
                log.flush()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", args.port, backlog=1024)
        async with server:
            await server.serve_forever()


def _run_server_loop(main: Any) -> None:
    """The server on uvloop where installed (vLLM's API server runs on it); clients keep plain asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


# --------------------------------------------------------------------------------------------------
# the workers: one process per client, commands on stdin, one JSON line per run on stdout

PROMPT = "count the tokens of this prompt"


def _nonce() -> str:
    return os.urandom(6).hex()


async def _ours(base: str, cmd: dict[str, int], state: dict[str, Any]) -> list[dict[str, Any]]:
    from mtpverdict.collect.client import Clock, run_concurrent

    clock = Clock()
    run = await run_concurrent(
        base,
        concurrency=cmd["c"],
        model=f"bench-tpd{cmd['tpd']}",
        prompt=PROMPT,
        max_tokens=cmd["tokens"],
        chat=False,
        ignore_eos=True,
        clock=clock,
        nonce=True,
        headers={},
    )
    epoch = clock.epoch_ns / 1e9
    return [
        {
            "nonce": s.nonce,
            "first": None if s.t_first is None else epoch + s.t_first,
            "last": None if s.t_end is None else epoch + s.t_end,
            "n": s.completion_tokens,
            "error": s.error,
        }
        for s in run.streams
    ]


async def _previous(base: str, cmd: dict[str, int], state: dict[str, Any]) -> list[dict[str, Any]]:
    import httpx

    sys.path.insert(0, str(BENCH.parent))
    import _previous_client as prev

    if "client" not in state:  # set up as the runner at ecda5f1 did, once for the whole benchmark
        limits = httpx.Limits(max_connections=max(LEVELS) + 4, max_keepalive_connections=max(LEVELS) + 4)
        timeout = httpx.Timeout(connect=30.0, read=120.0, write=60.0, pool=None)
        state["client"] = httpx.AsyncClient(limits=limits, timeout=timeout)
    clock = prev.Clock()
    streams = await prev.run_concurrent(
        state["client"],
        base,
        concurrency=cmd["c"],
        model=f"bench-tpd{cmd['tpd']}",
        prompt=PROMPT,
        max_tokens=cmd["tokens"],
        chat=False,
        ignore_eos=True,
        clock=clock,
        nonce=True,
        headers={},
    )
    epoch = clock.epoch_ns / 1e9
    return [
        {
            "nonce": s.nonce,
            "first": None if s.t_first is None else epoch + s.t_first,
            "last": None if s.t_end is None else epoch + s.t_end,
            "n": s.completion_tokens,
            "error": s.error,
        }
        for s in streams
    ]


async def _httpx_raw(base: str, cmd: dict[str, int], state: dict[str, Any]) -> list[dict[str, Any]]:
    """httpx at its cheapest: raw bytes (aiter_raw) cut into events and classified as the client does."""
    import httpx

    from mtpverdict.collect import sse

    if "client" not in state:
        limits = httpx.Limits(max_connections=max(LEVELS) + 4, max_keepalive_connections=max(LEVELS) + 4)
        state["client"] = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0))

    async def one() -> dict[str, Any]:
        nonce = _nonce()
        body = {
            "model": f"bench-tpd{cmd['tpd']}",
            "prompt": f"[{nonce}] {PROMPT}",
            "max_tokens": cmd["tokens"],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        first = last = None
        splitter = sse.EventSplitter(1 << 20)
        async with state["client"].stream("POST", base + "/v1/completions", json=body) as response:
            async for raw in response.aiter_raw():
                now = time.perf_counter()
                for event in splitter.feed(raw):
                    data = sse.event_data(event)
                    if data is not None and sse.has_content(data, False):
                        first = first or now
                        last = now
        return {"nonce": nonce, "first": first, "last": last, "n": cmd["tokens"], "error": None}

    return list(await asyncio.gather(*(one() for _ in range(cmd["c"]))))


async def _vllm_bench(base: str, cmd: dict[str, int], state: dict[str, Any]) -> list[dict[str, Any]]:
    import importlib

    funcs: Any = importlib.import_module("vllm.benchmarks.lib.endpoint_request_func")
    if "session" not in state:  # as vllm/benchmarks/serve.py builds it, once for the whole benchmark
        aiohttp: Any = importlib.import_module("aiohttp")
        connector = aiohttp.TCPConnector(
            limit=0,
            limit_per_host=0,
            ttl_dns_cache=300,
            use_dns_cache=True,
            keepalive_timeout=60,
            enable_cleanup_closed=True,
            force_close=False,
        )
        state["session"] = aiohttp.ClientSession(
            connector=connector, trust_env=True, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)
        )
    nonces = [_nonce() for _ in range(cmd["c"])]
    inputs = [
        funcs.RequestFuncInput(
            prompt=f"[{n}] {PROMPT}",
            api_url=base + "/v1/completions",
            prompt_len=16,
            output_len=cmd["tokens"],
            model=f"bench-tpd{cmd['tpd']}",
            ignore_eos=True,
        )
        for n in nonces
    ]
    outs = await asyncio.gather(
        *(funcs.async_request_openai_completions(i, state["session"]) for i in inputs)
    )
    return [
        {
            "nonce": n,
            "first": o.start_time + o.ttft if o.success else None,
            "last": o.start_time + o.latency if o.success else None,
            "n": o.output_tokens,
            "error": None if o.success else str(o.error)[-300:],
        }
        for n, o in zip(nonces, outs, strict=True)
    ]


class _Floor(asyncio.BufferedProtocol):
    """The least an asyncio client can do: send, read into a buffer, note reads that carry text."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request = request
        self.done = done
        self.buffer = memoryview(bytearray(32 * 1024))
        self.first: float | None = None
        self.last: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.request)  # type: ignore[attr-defined]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        now = time.perf_counter()
        if b'"text":"' in self.buffer[:nbytes].tobytes():
            self.first = self.first or now
            self.last = now

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(None)


async def _floor(base: str, cmd: dict[str, int], state: dict[str, Any]) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    host, port = base.rsplit("/", 1)[1].split(":")

    async def one() -> dict[str, Any]:
        nonce = _nonce()
        body = json.dumps(
            {
                "model": f"bench-tpd{cmd['tpd']}",
                "prompt": f"[{nonce}] {PROMPT}",
                "max_tokens": cmd["tokens"],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        request = b"POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s" % (
            base.encode(),
            len(body),
            body,
        )
        done: asyncio.Future[None] = loop.create_future()
        proto = _Floor(request, done)
        await loop.create_connection(lambda: proto, host, int(port))
        await done
        return {"nonce": nonce, "first": proto.first, "last": proto.last, "n": cmd["tokens"], "error": None}

    return list(await asyncio.gather(*(one() for _ in range(cmd["c"]))))


RUNNERS = {
    "client": _ours,
    "previous": _previous,
    "httpx-raw": _httpx_raw,
    "vllm-bench": _vllm_bench,
    "floor": _floor,
}


async def _work(name: str, port: int) -> None:
    runner = RUNNERS[name]
    base = f"http://127.0.0.1:{port}"
    state: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        cpu, wall = time.process_time(), time.perf_counter()
        streams = await runner(base, cmd, state)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        sys.stdout.write(json.dumps({"cpu": cpu, "wall": wall, "streams": streams}) + "\n")
        sys.stdout.flush()
    for held in state.values():  # the httpx client or the aiohttp session
        await (held.aclose() if hasattr(held, "aclose") else held.close())


# --------------------------------------------------------------------------------------------------
# the measurement


@dataclass(frozen=True, slots=True)
class Cell:
    """One client at one concurrency and tokens per delta, over every round."""

    decode_errors: tuple[float, ...]  # measured decode tok/s / rate from the server's writes - 1
    ttft_errors_ms: tuple[float, ...]  # client's first-delta instant - server's first write
    failed: int
    cpu_seconds: float
    tokens: int

    @property
    def us_per_token(self) -> float:
        return self.cpu_seconds / self.tokens * 1e6 if self.tokens else float("nan")


def _errors(
    streams: list[dict[str, Any]], truth: dict[str, dict[str, Any]]
) -> tuple[list[float], list[float], int, int]:
    decode: list[float] = []
    ttft: list[float] = []
    failed = tokens = 0
    for s in streams:
        t = truth.get(str(s["nonce"]))
        if s["error"] or s["first"] is None or s["last"] is None or t is None or not s["n"]:
            failed += 1
            continue
        tokens += int(s["n"])
        ttft.append((s["first"] - t["first"]) * 1000.0)
        if s["last"] > s["first"] and t["last"] > t["first"]:
            decode.append((t["last"] - t["first"]) / (s["last"] - s["first"]) - 1.0)
    return decode, ttft, failed, tokens


class _Truth:
    """The server's log of write instants, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.by_nonce: dict[str, dict[str, Any]] = {}

    def refresh(self) -> dict[str, dict[str, Any]]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            rec = json.loads(line)
            self.by_nonce[str(rec["nonce"])] = rec
        return self.by_nonce


def _start_worker(name: str, port: int, args: argparse.Namespace) -> subprocess.Popen[str]:
    python = args.vllm_python if name == "vllm-bench" else sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [python, str(BENCH), "--worker", name, "--port", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    _ask(proc, {"c": 4, "tokens": 8, "tpd": 1})  # warm-up: imports, connections, code paths
    return proc


def _ask(proc: subprocess.Popen[str], cmd: dict[str, int]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(cmd) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a worker ended (exit {proc.wait()})")
    answer = json.loads(line)
    assert isinstance(answer, dict)
    return answer


def _measure(port: int, log: Path, args: argparse.Namespace) -> dict[tuple[str, int, int], Cell]:
    truth = _Truth(log)
    workers = {name: _start_worker(name, port, args) for name in args.workers}
    found: dict[tuple[str, int, int], list[Any]] = {}
    rng = random.Random(args.seed)
    try:
        for _ in range(args.rounds):
            for tpd in args.tpd:
                for level in args.levels:
                    for name in rng.sample(list(workers), len(workers)):
                        answer = _ask(workers[name], {"c": level, "tokens": args.tokens, "tpd": tpd})
                        time.sleep(0.2)  # the server logs a stream once its last bytes are written
                        decode, ttft, failed, tokens = _errors(answer["streams"], truth.refresh())
                        cell = found.setdefault((name, tpd, level), [[], [], 0, 0.0, 0])
                        cell[0] += decode
                        cell[1] += ttft
                        cell[2] += failed
                        cell[3] += answer["cpu"]
                        cell[4] += tokens
    finally:
        for proc in workers.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
    return {k: Cell(tuple(v[0]), tuple(v[1]), v[2], v[3], v[4]) for k, v in found.items()}


def _median_max(values: tuple[float, ...], scale: float, unit: str) -> str:
    if not values:
        return "-"
    worst = max(values, key=abs)
    return f"{statistics.median(values) * scale:+.2f}{unit} / {worst * scale:+.2f}{unit}"


def _table(cells: dict[tuple[str, int, int], Cell], args: argparse.Namespace) -> list[str]:
    lines = [
        "| tokens/delta | c | client | streams (failed) | decode error: median / worst | TTFT error ms: "
        "median / worst | CPU us per token | CPU vs vllm-bench |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tpd in args.tpd:
        for level in args.levels:
            ref = cells.get(("vllm-bench", tpd, level))
            for name in args.workers:
                cell = cells[(name, tpd, level)]
                ratio = f"{cell.us_per_token / ref.us_per_token:.2f}" if ref and ref.tokens else "-"
                lines.append(
                    f"| {tpd} | {level} | {name} | {len(cell.ttft_errors_ms)} ({cell.failed}) | "
                    f"{_median_max(cell.decode_errors, 100, '%')} | "
                    f"{_median_max(cell.ttft_errors_ms, 1, '')} | "
                    f"{cell.us_per_token:.1f} | {ratio} |"
                )
    return lines


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the bench server did not start")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tps", type=float, default=50.0, help="tokens per second per stream")
    parser.add_argument("--tokens", type=int, default=128, help="completion tokens per request")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every cell and client")
    parser.add_argument("--levels", type=_ints, default=LEVELS, help="concurrencies, comma-separated")
    parser.add_argument(
        "--tpd", type=_ints, default=TOKENS_PER_DELTA, help="tokens per delta, comma-separated"
    )
    parser.add_argument("--workers", type=lambda t: tuple(t.split(",")), default=WORKERS)
    parser.add_argument(
        "--vllm-python",
        default=os.environ.get("MTPVERDICT_VLLM_PYTHON"),
        help="Python of a venv with vLLM, for the vllm-bench client (default $MTPVERDICT_VLLM_PYTHON)",
    )
    parser.add_argument("--seed", type=int, default=1, help="order of the clients in each round")
    parser.add_argument("--save", type=Path, help="write every cell's numbers here (JSON)")
    parser.add_argument("--serve", action="store_true", help="run the timed server (internal)")
    parser.add_argument("--worker", choices=sorted(RUNNERS), help="run one client (internal)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.serve:
        _run_server_loop(_serve(args))
        return 0
    if args.worker:
        asyncio.run(_work(args.worker, args.port))
        return 0
    if "vllm-bench" in args.workers and not args.vllm_python:
        parser_error = "the vllm-bench client needs --vllm-python (or MTPVERDICT_VLLM_PYTHON)"
        print(parser_error, file=sys.stderr)
        return 2
    print(f"$ python bench/collector_accuracy.py {' '.join(argv or sys.argv[1:])}")
    print(
        f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"server: {args.tps:g} tok/s per stream, {args.tokens} tokens, first delta {args.ttft_ms:g} ms after "
        f"the request; {args.rounds} round(s); clients {', '.join(args.workers)}"
    )
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.jsonl"
        log.touch()
        server = subprocess.Popen(
            [sys.executable, str(BENCH), "--serve", "--port", str(port), "--log", str(log)]
            + [f"--tps={args.tps}", f"--tokens={args.tokens}", f"--ttft-ms={args.ttft_ms}"]
        )
        try:
            _wait_listening(port)
            cells = _measure(port, log, args)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("\n".join(_table(cells, args)))
    if args.save:
        args.save.write_text(
            json.dumps(
                {f"{k[0]} tpd{k[1]} c{k[2]}": _cell_json(v) for k, v in cells.items()},
                indent=1,
            )
        )
    return 0


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "decode_errors": cell.decode_errors,
        "ttft_errors_ms": cell.ttft_errors_ms,
        "failed": cell.failed,
        "cpu_seconds": cell.cpu_seconds,
        "tokens": cell.tokens,
    }


if __name__ == "__main__":
    sys.exit(main())
