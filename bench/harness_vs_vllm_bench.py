"""Our measuring client against vLLM's own `vllm bench serve`, on one real vLLM CPU server, side by side.

Both drive the same server with the same shape of work: N requests of a short prompt, 48 output tokens
(EOS ignored), temperature 0, at most C in flight; each run alternates the two harnesses so drift hits
both. Printed: median TTFT and output throughput (completion tokens / wall clock) per harness, our
client's CPU per token, and how its decode window compares with the server's own per-request generation
time (the server runs with --enable-per-request-metrics).

    python bench/harness_vs_vllm_bench.py --vllm-python .venv-vllm/bin/python --models ci-work/models
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from mtpverdict.collect import client as cl
from mtpverdict.stats.runs import BURST_MIN_CHUNKS

ROOT = Path(__file__).resolve().parent.parent
SERVE = ROOT / "collectors" / "vllm-cpu" / "serve.sh"
STOP = ROOT / "collectors" / "vllm-cpu" / "stop.sh"
BENCH = ROOT / "collectors" / "vllm-cpu" / "bench_serve.py"
OUTPUT_TOKENS = 48
INPUT_TOKENS = 64


WORDS = "the river runs past the old city and the bridges".split()


async def fit_prompt(base: str, model: str) -> tuple[str, int]:
    """A prompt that, with the nonce in front, is INPUT_TOKENS long, as the server counts (usage)."""
    clock = cl.Clock()
    words = INPUT_TOKENS
    for _ in range(8):
        prompt = " ".join(WORDS[i % len(WORDS)] for i in range(words))
        probe = await cl.stream_one(
            base,
            model=model,
            prompt=prompt,
            max_tokens=1,
            chat=False,
            ignore_eos=True,
            clock=clock,
            stream_index=0,
            nonce=cl.make_nonce(),
            headers={},
        )
        counted = probe.prompt_tokens or INPUT_TOKENS
        if counted == INPUT_TOKENS:
            break
        words = max(1, words + INPUT_TOKENS - counted)
    return prompt, counted


async def ours(base: str, model: str, prompt: str, n: int, c: int) -> tuple[float, float, float, list[float]]:
    """(median TTFT ms, output tok/s, client CPU us per token, client decode window / server generation
    time of each stream not read in a burst) with the collector's client, C requests kept in flight."""
    clock = cl.Clock()
    gate = asyncio.Semaphore(c)

    async def one(i: int) -> cl.StreamResult:
        async with gate:
            return await cl.stream_one(
                base,
                model=model,
                prompt=prompt,
                max_tokens=OUTPUT_TOKENS,
                chat=False,
                ignore_eos=True,
                clock=clock,
                stream_index=i,
                nonce=cl.make_nonce(),
                headers={},
            )

    start, cpu = clock.now(), time.process_time()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    wall, cpu = clock.now() - start, time.process_time() - cpu
    ok = [r for r in results if r.status == "ok" and r.t_first is not None]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    ttft = statistics.median((r.t_first - r.t_start) * 1000 for r in ok if r.t_first)
    ratios = [  # streams not read in a burst (the rule of stats/runs.py): only those were timed
        (r.t_end - r.t_first) * 1000 / r.timing.generation_ms
        for r in ok
        if r.t_end is not None and r.t_first is not None and r.timing and r.timing.generation_ms
        if r.chunks < BURST_MIN_CHUNKS or r.bunched * 2 <= r.chunks - 1
    ]
    return ttft, tokens / wall, cpu / tokens * 1e6, ratios


def theirs(py: str, port: int, model: str, tokenizer: str, n: int, c: int) -> tuple[float, float]:
    """(median TTFT ms, output tok/s) as `vllm bench serve` reports them; its random dataset sends
    INPUT_TOKENS-token prompts."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                py,
                str(BENCH),
                "--backend",
                "vllm",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--model",
                model,
                "--tokenizer",
                tokenizer,
                "--dataset-name",
                "random",
                "--random-input-len",
                str(INPUT_TOKENS),
                "--random-output-len",
                str(OUTPUT_TOKENS),
                "--num-prompts",
                str(n),
                "--max-concurrency",
                str(c),
                "--temperature",
                "0",
                "--ignore-eos",
                "--save-result",
                "--result-dir",
                tmp,
            ],
            check=True,
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "VLLM_TARGET_DEVICE": "cpu",
                "HF_HUB_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
            },
        )
        result = json.loads(next(Path(tmp).glob("*.json")).read_text())
    return float(result["median_ttft_ms"]), float(result["output_throughput"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--port", type=int, default=8131)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model_dir = str(Path(args.models) / "target")
    log = Path(tempfile.mkdtemp()) / "server.log"
    env = {**os.environ, "MTPVERDICT_VLLM_PYTHON": args.vllm_python}
    subprocess.run(
        [str(SERVE), model_dir, str(args.port), str(log), "--enforce-eager", "--enable-per-request-metrics"],
        check=True,
        env=env,
        capture_output=True,
    )
    base = f"http://127.0.0.1:{args.port}"
    try:
        model = httpx.get(base + "/v1/models").json()["data"][0]["id"]
        prompt, counted = asyncio.run(fit_prompt(base, model))
        print(
            f"server: {model} on vLLM {httpx.get(base + '/version').json()['version']}, "
            f"{args.requests} requests x {OUTPUT_TOKENS} tokens per measurement, {args.repeats} repeats; "
            f"prompt tokens: {counted} (ours, nonce included), {INPUT_TOKENS} (vllm bench random dataset)",
            flush=True,
        )
        print(f"{'c':>3} {'harness':<20} {'median TTFT ms':>16} {'output tok/s':>14}")
        for c in (1, 4):
            mine: list[tuple[float, float, float, list[float]]] = []
            vllm: list[tuple[float, float]] = []
            for _ in range(args.repeats):
                mine.append(asyncio.run(ours(base, model, prompt, args.requests, c)))
                vllm.append(theirs(args.vllm_python, args.port, model, model_dir, args.requests, c))
            cpu = statistics.median(r[2] for r in mine)
            ratios = [x for r in mine for x in r[3]]
            ratio = f"{statistics.median(ratios):.4f}" if ratios else "-"
            print(
                f"{c:>3} mtpverdict client CPU: {cpu:.0f} us per streamed token (median); client decode "
                f"window / server generation time (--enable-per-request-metrics): {ratio} (median over "
                f"the {len(ratios)} of {args.requests * args.repeats} streams not read in a burst)",
                flush=True,
            )
            for label, rows in (("mtpverdict collect", mine), ("vllm bench serve", vllm)):
                ttft = statistics.median(r[0] for r in rows)
                tps = statistics.median(r[1] for r in rows)
                print(
                    f"{c:>3} {label:<20} {ttft:>16.1f} {tps:>14.1f}   runs: "
                    + ", ".join(f"{r[0]:.0f} ms/{r[1]:.0f}" for r in rows),
                    flush=True,
                )
    finally:
        subprocess.run([str(STOP), str(log) + ".pid"], check=False, capture_output=True)
        time.sleep(1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
