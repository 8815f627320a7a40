"""Exercise a running llama-server and record what it returns (standard library only).

    python collectors/llamacpp-cpu/probe.py --base-url http://127.0.0.1:8210 --arm draft-copy \\
        --record-dir tests/data/recorded/llamacpp-0.5.0-dev-0c1e570-cpu [--record-info]

Workload, in order: /props, /slots and /metrics (before); one non-streamed and one streamed greedy
``/v1/completions`` of the same prompt (temperature 0, ``stream_options.include_usage``); four streamed
completions sent together (the four slots busy at once); /slots and /metrics (after). With
--record-info also /health, /v1/models and one native ``/completion`` response (whose ``timings``
object is the one users paste). Every body is saved as received, under the names the recorded
directory's README lists; a JSON summary (outputs, usage, timings) is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Prompts copied from collectors/vllm-cpu/corpus.txt; the target continues them from memory.
PROMPTS = (
    "The capital of Spain is Madrid, a city in the middle of the country.\n",
    "def fibonacci(n):\n",
    "The baker starts work before the sun rises.\n",
    "The capital of France is Paris. The capital of Japan is Tokyo.",
)
RECORDED_PROMPT = PROMPTS[0]
RECORDED_MAX_TOKENS = 48
PARALLEL_MAX_TOKENS = 64
TIMEOUT_S = 600


def fetch(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    """One HTTP exchange; an error status is returned with its body, not raised."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def completion_body(prompt: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def stream_summary(raw: bytes) -> dict[str, Any]:
    """Text, usage, the last timings object and the number of content deltas of an SSE body."""
    text: list[str] = []
    usage = timings = None
    deltas = 0
    for line in raw.decode("utf-8").splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[len("data: ") :])
        for choice in chunk.get("choices") or ():
            if choice.get("text"):
                text.append(choice["text"])
                deltas += 1
        usage = chunk.get("usage") or usage
        timings = chunk.get("timings") or timings
    return {"text": "".join(text), "usage": usage, "timings": timings, "deltas": deltas}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--arm", required=True, help="names the recorded files: metrics-ARM-before.txt, ...")
    parser.add_argument("--record-dir", type=Path, required=True)
    parser.add_argument("--record-info", action="store_true", help="also /health, /v1/models, /completion")
    args = parser.parse_args()
    base, arm, out = args.base_url.rstrip("/"), args.arm, args.record_dir
    out.mkdir(parents=True, exist_ok=True)

    def save(name: str, url_path: str, method: str = "GET", body: dict[str, Any] | None = None) -> bytes:
        status, data = fetch(method, base + url_path, body)
        (out / name).write_bytes(data)
        print(f"{name}: HTTP {status}, {len(data)} bytes", file=sys.stderr)
        return data

    summary: dict[str, Any] = {"arm": arm}
    if args.record_info:
        save("health.json", "/health")
        save("models.json", "/v1/models")
    save(f"props-{arm}.json", "/props")
    save(f"slots-{arm}-before.json", "/slots")
    save(f"metrics-{arm}-before.txt", "/metrics")
    plain = json.loads(
        save(
            f"completion-{arm}.json",
            "/v1/completions",
            "POST",
            completion_body(RECORDED_PROMPT, RECORDED_MAX_TOKENS, stream=False),
        )
    )
    summary["completion"] = {
        "text": plain["choices"][0]["text"],
        "usage": plain["usage"],
        "timings": plain.get("timings"),
    }
    streamed = save(
        f"sse-{arm}.txt",
        "/v1/completions",
        "POST",
        completion_body(RECORDED_PROMPT, RECORDED_MAX_TOKENS, stream=True),
    )
    summary["stream"] = stream_summary(streamed)
    with ThreadPoolExecutor(max_workers=len(PROMPTS)) as pool:
        bodies = [completion_body(p, PARALLEL_MAX_TOKENS, stream=True) for p in PROMPTS]
        results = list(pool.map(lambda b: fetch("POST", base + "/v1/completions", b), bodies))
    summary["parallel"] = [dict(stream_summary(data), status=status) for status, data in results]
    if args.record_info:
        native = json.loads(
            save(
                f"completion-native-{arm}.json",
                "/completion",
                "POST",
                {"prompt": RECORDED_PROMPT, "n_predict": RECORDED_MAX_TOKENS, "temperature": 0},
            )
        )
        summary["native_timings"] = native.get("timings")
    save(f"slots-{arm}-after.json", "/slots")
    save(f"metrics-{arm}-after.txt", "/metrics")
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
