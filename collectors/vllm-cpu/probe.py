"""Exercise a running vLLM server and record what it returns (standard library only).

    python collectors/vllm-cpu/probe.py --base-url http://127.0.0.1:8000 --arm ngram \
        --record-dir tests/data/recorded/vllm-0.32.0-cpu --work-dir work --likelihood models/likelihood.txt

Workload, in order: /metrics (before); streamed greedy completions of the coherence prompts and a few
corpus prompts (temperature 0, `stream_options.include_usage`), one of them kept as a raw SSE body;
aggregate throughput at concurrency 1 and 4; a `prompt_logprobs` and an `echo`+`logprobs` request on
the likelihood passage; /metrics (after). Recorded text goes to --record-dir (metrics before/after, the
SSE body, and with --record-info also /version, /v1/models and the logprob responses); a JSON summary
with greedy outputs, timings and the spec-decode counter deltas goes to --work-dir/probe-<arm>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import tomllib
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
COHERENCE = HERE / "coherence.toml"

# Prompts copied from corpus.txt; the target continues them from memory, so n-gram lookup has material.
CORPUS_PROMPTS = (
    "The capital of Spain is Madrid, a city in the middle of the country.\n",
    "def fibonacci(n):\n",
    "The baker starts work before the sun rises.\n",
)
SSE_PROMPT = CORPUS_PROMPTS[0]
IDENTITY_MAX_TOKENS = 48
THROUGHPUT_MAX_TOKENS = 64
THROUGHPUT_REQUESTS = {1: 8, 4: 16}
SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
)
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)")


def request(method: str, url: str, body: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=600) as resp:
        return resp.status, resp.read()


def stream_completion(base: str, model: str, prompt: str, max_tokens: int, ignore_eos: bool) -> dict:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": ignore_eos,
    }
    req = urllib.request.Request(
        f"{base}/v1/completions",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    raw = bytearray()
    text_parts: list[str] = []
    delta_times: list[float] = []
    usage = None
    finish = None
    with urllib.request.urlopen(req, timeout=600) as resp:
        for line in resp:
            raw += line
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            event = json.loads(line[len(b"data: ") :])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                if choice.get("text"):
                    text_parts.append(choice["text"])
                    delta_times.append(time.perf_counter() - started)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
    return {
        "prompt": prompt,
        "text": "".join(text_parts),
        "usage": usage,
        "finish_reason": finish,
        "content_deltas": len(delta_times),
        "ttft_s": delta_times[0] if delta_times else None,
        "latency_s": time.perf_counter() - started,
        "raw": bytes(raw),
    }


def spec_counters(metrics_text: str) -> dict[str, float]:
    """Sum each spec-decode counter over engines; per-position counters keyed by position."""
    totals: dict[str, float] = {}
    for line in metrics_text.splitlines():
        match = SAMPLE.match(line)
        if not match:
            continue
        name = match["name"].removesuffix("_total")
        if name not in SPEC_COUNTERS or match["name"].endswith("_created"):
            continue
        key = name
        position = re.search(r'position="(\d+)"', match["labels"] or "")
        if position:
            key = f"{name}[{position[1]}]"
        totals[key] = totals.get(key, 0.0) + float(match["value"])
    return totals


def throughput(base: str, model: str, concurrency: int, requests: int) -> dict:
    prompts = [f"[{concurrency}-{i}] {CORPUS_PROMPTS[i % len(CORPUS_PROMPTS)]}" for i in range(requests)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(
            pool.map(lambda p: stream_completion(base, model, p, THROUGHPUT_MAX_TOKENS, True), prompts)
        )
    wall = time.perf_counter() - started
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    return {
        "concurrency": concurrency,
        "requests": requests,
        "completion_tokens": tokens,
        "wall_s": wall,
        "aggregate_tok_s": tokens / wall,
        "mean_ttft_s": sum(r["ttft_s"] for r in results) / len(results),
    }


def mean_nll_prompt_logprobs(response: dict) -> tuple[float, int]:
    entries = response["choices"][0]["prompt_logprobs"]
    values = [next(iter(entry.values()))["logprob"] for entry in entries if entry is not None]
    return -sum(values) / len(values), len(values)


def mean_nll_echo(response: dict, prompt_tokens: int) -> tuple[float, int]:
    values = response["choices"][0]["logprobs"]["token_logprobs"][:prompt_tokens]
    values = [v for v in values if v is not None]
    return -sum(values) / len(values), len(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--arm", required=True, help="name used in the recorded file names")
    parser.add_argument("--record-dir", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--likelihood", type=Path, required=True)
    parser.add_argument(
        "--record-info", action="store_true", help="also record /version, /v1/models and logprobs"
    )
    args = parser.parse_args(argv)
    base = args.base_url.rstrip("/")
    args.record_dir.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    summary: dict = {"arm": args.arm}

    status, version = request("GET", f"{base}/version")
    _, models = request("GET", f"{base}/v1/models")
    health_status, health_body = request("GET", f"{base}/health")
    model = json.loads(models)["data"][0]["id"]
    summary |= {
        "version": json.loads(version),
        "model": model,
        "health": {"status": health_status, "body": health_body.decode()},
    }
    if args.record_info:
        (args.record_dir / "version.json").write_bytes(version)
        (args.record_dir / "models.json").write_bytes(models)

    _, before = request("GET", f"{base}/metrics")
    (args.record_dir / f"metrics-{args.arm}-before.txt").write_bytes(before)

    with COHERENCE.open("rb") as handle:
        coherence = tomllib.load(handle)["prompt"]
    outputs = []
    for prompt in [c["prompt"] for c in coherence] + list(CORPUS_PROMPTS):
        result = stream_completion(base, model, prompt, IDENTITY_MAX_TOKENS, False)
        if prompt == SSE_PROMPT:
            (args.record_dir / f"sse-{args.arm}.txt").write_bytes(result["raw"])
        del result["raw"]
        outputs.append(result)
    summary["outputs"] = outputs
    summary["coherence"] = {c["id"]: c["expected"] in outputs[i]["text"] for i, c in enumerate(coherence)}

    summary["throughput"] = [throughput(base, model, c, n) for c, n in THROUGHPUT_REQUESTS.items()]

    passage = args.likelihood.read_text(encoding="utf-8")
    _, plp = request(
        "POST",
        f"{base}/v1/completions",
        {
            "model": model,
            "prompt": passage,
            "max_tokens": 1,
            "temperature": 0,
            "prompt_logprobs": 0,
        },
    )
    _, echo = request(
        "POST",
        f"{base}/v1/completions",
        {
            "model": model,
            "prompt": passage,
            "max_tokens": 1,
            "temperature": 0,
            "echo": True,
            "logprobs": 0,
        },
    )
    plp_json, echo_json = json.loads(plp), json.loads(echo)
    summary["nll_prompt_logprobs"] = mean_nll_prompt_logprobs(plp_json)
    summary["nll_echo"] = mean_nll_echo(echo_json, echo_json["usage"]["prompt_tokens"])
    if args.record_info:
        (args.record_dir / "prompt-logprobs.json").write_bytes(plp)
        (args.record_dir / "echo-logprobs.json").write_bytes(echo)

    _, after = request("GET", f"{base}/metrics")
    (args.record_dir / f"metrics-{args.arm}-after.txt").write_bytes(after)
    b, a = spec_counters(before.decode()), spec_counters(after.decode())
    summary["spec_delta"] = {k: a[k] - b.get(k, 0.0) for k in sorted(a)}
    d = summary["spec_delta"]
    if d.get("vllm:spec_decode_num_draft_tokens"):
        summary["acceptance_rate"] = (
            d["vllm:spec_decode_num_accepted_tokens"] / d["vllm:spec_decode_num_draft_tokens"]
        )
        summary["mean_acceptance_length"] = (
            1 + d["vllm:spec_decode_num_accepted_tokens"] / d["vllm:spec_decode_num_drafts"]
        )

    out = args.work_dir / f"probe-{args.arm}.json"
    out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    brief = {
        k: summary[k] for k in ("coherence", "throughput", "spec_delta", "nll_prompt_logprobs", "nll_echo")
    }
    brief |= {k: summary.get(k) for k in ("acceptance_rate", "mean_acceptance_length")}
    print(json.dumps(brief, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
