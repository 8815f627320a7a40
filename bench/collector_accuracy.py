"""Accuracy of the measuring client: decode tok/s and TTFT against a server whose token instants are known.

A local OpenAI-compatible streaming server (this file run with --serve, in its own process) answers
each request by writing its first token `--ttft-ms` after receiving it and then one token every
1 / `--tps` seconds, one token per SSE delta, then a usage block. It logs, per request, the instants
(time.perf_counter, CLOCK_MONOTONIC, shared by every process of the machine) at which it wrote the
first and the last token. The real client, mtpverdict.collect.client.run_concurrent, runs at
concurrency 1, 8, 32 and 64; each stream's measured decode rate and TTFT are compared with the
server's actual write instants (the harness's own error) and with the nominal schedule (which adds
the server's scheduling jitter). The harness's CPU time per streamed token is this process's CPU
time over the tokens it received.

    python bench/collector_accuracy.py [--tps 50] [--tokens 128] [--ttft-ms 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEVELS = (1, 8, 32, 64)
NS = 1e9


# --------------------------------------------------------------------------------------------------
# the server


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, args: argparse.Namespace, log: Any
) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.close()
        return
    received = time.perf_counter()
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = json.loads(await reader.readexactly(length)) if length else {}
    if method != "POST" or not path.endswith("/completions"):
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        return
    chat = path.endswith("/chat/completions")
    tokens = int(body.get("max_tokens", args.tokens))
    prompt = body["messages"][0]["content"] if chat else body.get("prompt", "")
    nonce = prompt[1:13] if prompt.startswith("[") else None
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Connection: close\r\n\r\n"
    )
    await writer.drain()
    first_at = received + args.ttft_ms / 1000.0
    written: list[float] = []
    for i in range(tokens):
        delay = first_at + i / args.tps - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        choice = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
        writer.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
        written.append(time.perf_counter())
        await writer.drain()
    usage = {"prompt_tokens": 16, "completion_tokens": tokens, "total_tokens": tokens + 16}
    writer.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
    await writer.drain()
    writer.close()
    log.write(
        json.dumps(
            {"nonce": nonce, "received": received, "first": written[0], "last": written[-1], "n": tokens}
        )
        + "\n"
    )
    log.flush()


async def _serve(args: argparse.Namespace) -> None:
    with open(args.log, "a", encoding="utf-8") as log:

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _handle(reader, writer, args, log)

        server = await asyncio.start_server(handle, "127.0.0.1", args.port, backlog=256)
        async with server:
            await server.serve_forever()


# --------------------------------------------------------------------------------------------------
# the measurement


@dataclass(frozen=True, slots=True)
class StreamError:
    """One stream: measured against the server's write instants and against the nominal schedule."""

    decode_error: float  # measured decode tok/s / rate from the server's write instants - 1
    decode_vs_nominal: float  # measured decode tok/s / nominal tps - 1
    ttft_error_ms: float  # measured TTFT - (server's first write - client send)
    ttft_relative: float  # ttft_error_ms / true TTFT
    ttft_vs_nominal_ms: float  # measured TTFT - nominal --ttft-ms


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _measure(
    port: int, log_path: Path, args: argparse.Namespace
) -> dict[int, tuple[list[StreamError], float, int]]:
    import httpx

    from mtpverdict.collect.client import Clock, run_concurrent

    clock = Clock()
    epoch = clock.epoch_ns / NS
    base = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=max(LEVELS) + 4, max_keepalive_connections=max(LEVELS) + 4)
    timeout = httpx.Timeout(connect=30.0, read=60.0, write=60.0, pool=None)
    out: dict[int, tuple[list[StreamError], float, int]] = {}
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        await run_concurrent(  # warm-up: connections, imports, code paths
            client,
            base,
            concurrency=4,
            model="bench",
            prompt="warm up",
            max_tokens=8,
            chat=True,
            ignore_eos=True,
            clock=clock,
            nonce=True,
            headers={},
        )
        for level in LEVELS:
            errors: list[StreamError] = []
            cpu = 0.0
            tokens = 0
            for _ in range(args.runs):
                cpu_start = time.process_time()
                streams = await run_concurrent(
                    client,
                    base,
                    concurrency=level,
                    model="bench",
                    prompt="count the tokens",
                    max_tokens=args.tokens,
                    chat=True,
                    ignore_eos=True,
                    clock=clock,
                    nonce=True,
                    headers={},
                )
                cpu += time.process_time() - cpu_start
                await asyncio.sleep(0.2)  # let the server flush its log lines
                truth = _truth(log_path)
                for s in streams:
                    if (
                        s.status != "ok"
                        or s.t_first is None
                        or s.t_end is None
                        or s.completion_tokens is None
                    ):
                        raise RuntimeError(f"stream failed at c={level}: {s.error}")
                    tokens += s.completion_tokens
                    t = truth[str(s.nonce)]
                    measured = (s.completion_tokens - 1) / (s.t_end - s.t_first)
                    actual = (t["n"] - 1) / (t["last"] - t["first"])
                    ttft = (s.t_first - s.t_start) * 1000.0
                    true_ttft = (t["first"] - (epoch + s.t_start)) * 1000.0
                    errors.append(
                        StreamError(
                            decode_error=measured / actual - 1.0,
                            decode_vs_nominal=measured / args.tps - 1.0,
                            ttft_error_ms=ttft - true_ttft,
                            ttft_relative=(ttft - true_ttft) / true_ttft,
                            ttft_vs_nominal_ms=ttft - args.ttft_ms,
                        )
                    )
            out[level] = (errors, cpu, tokens)
    return out


def _truth(path: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        found[str(rec["nonce"])] = rec
    return found


def _pct(values: list[float]) -> str:
    return f"{statistics.median(values) * 100:+.3f}% / {max(abs(v) for v in values) * 100:.3f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tps", type=float, default=50.0, help="tokens per second per stream")
    parser.add_argument("--tokens", type=int, default=128, help="completion tokens per request")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=3, help="runs per concurrency level")
    parser.add_argument("--serve", action="store_true", help="run the timed server (internal)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args))
        return 0
    print(f"$ python bench/collector_accuracy.py {' '.join(argv or sys.argv[1:])}")
    print(
        f"date {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"server: {args.tps:g} tok/s per stream, {args.tokens} tokens, first token {args.ttft_ms:g} ms after "
        f"the request; {args.runs} run(s) per level"
    )
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.jsonl"
        log_path.touch()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--port", str(port), "--log", str(log_path)]
            + [f"--tps={args.tps}", f"--tokens={args.tokens}", f"--ttft-ms={args.ttft_ms}"]
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            results = asyncio.run(_measure(port, log_path, args))
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(
        "\n| concurrency | streams | decode error vs server writes: median / max abs | decode vs nominal "
        "rate: median / max abs | TTFT error ms: median / max abs | TTFT error relative: median / max abs "
        "| harness CPU us per token |"
    )
    print("|---|---|---|---|---|---|---|")
    for level, (errors, cpu, tokens) in results.items():
        ttft_ms = [e.ttft_error_ms for e in errors]
        print(
            f"| {level} | {len(errors)} | {_pct([e.decode_error for e in errors])} | "
            f"{_pct([e.decode_vs_nominal for e in errors])} | "
            f"{statistics.median(ttft_ms):+.2f} / {max(abs(v) for v in ttft_ms):.2f} | "
            f"{_pct([e.ttft_relative for e in errors])} | {cpu / tokens * 1e6:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
