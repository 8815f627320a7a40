"""A small OpenAI-compatible test server with exact, known timing and vLLM-shaped metrics and logs.

It streams completions at a fixed per-stream token rate (several tokens per delta under speculation),
counts spec-decode drafts like vLLM v1, prints vLLM's KV and SpecDecoding log lines, and can be told to
misbehave (die mid-run, answer 5xx, stall a stream, send malformed SSE, reset its counters, hide
/metrics, fail to boot) so the collector's fault handling can be tested without a model. Hostile modes
(each from request N on): endless-content (content deltas past max_tokens, forever), keepalive (one
delta, then an SSE comment every 0.5 s, forever), endless-line (one SSE line that never ends),
huge-metrics (a 200 MB /metrics), endless-metrics (a /metrics that never ends), bad-usage (usage values
a server should never send, a different one per request: see BAD_USAGE). With --traffic R it serves
traffic of its own, R verify steps a second (R tokens a second without speculation), so a live-seat
watcher sees a good drafter (fake_accept near 1), a void one (fake_accept 0) or no drafting at all.

    python tests/fakeserver.py --port P [--speculative-config JSON] [--tps T] [--kv TOKENS] [--fault F:N]
        [--traffic R] [--hold-until PATH]

--hold-until PATH keeps the server from listening until PATH exists: a test holds a collect in its
boot (its results directory locked) for exactly as long as it needs, on a machine however busy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
MAX_MODEL_LEN = 1024
HUGE_METRICS_BYTES = 200 * 1024 * 1024
# usage blocks the bad-usage fault sends, one per request in turn (issue 15: each crashed or misled collect)
BAD_USAGE = (
    '{"prompt_tokens": -7, "completion_tokens": %(n)d}',
    '{"prompt_tokens": true, "completion_tokens": %(n)d}',
    '{"prompt_tokens": 5, "completion_tokens": true}',
    '{"prompt_tokens": 5, "completion_tokens": ' + "9" * 400 + "}",
    '{"prompt_tokens": 5, "completion_tokens": 1000000000000000}',
)


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.requests = 0
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.per_pos = [0] * args.k
        self.generated = 0  # vllm:generation_tokens_total
        self.window = [0, 0]  # drafted, accepted since the last log line
        self.rng = random.Random(7)
        fault, _, n = (args.fault or "none:0").partition(":")
        self.fault = fault
        self.fault_n = int(n or 0)
        self.models_asked = 0  # /v1/models answers so far (the readiness poll asks first)

    def count_request(self) -> int:
        with self.lock:
            self.requests += 1
            return self.requests


def output_tokens(prompt: str, n: int) -> list[str]:
    """Deterministic greedy output: depends on the prompt without its nonce, like a seeded model."""
    if prompt.startswith("[") and "] " in prompt:
        prompt = prompt.split("] ", 1)[1]
    digest = hashlib.sha256(prompt.encode()).digest()
    return [" " + WORDS[digest[i % len(digest)] % len(WORDS)] for i in range(n)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State

    def setup(self) -> None:
        super().setup()
        # stream each delta at once, as uvicorn does; Nagle would coalesce small SSE writes
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: object) -> None:  # quiet: the server log holds the vLLM-shaped lines
        return

    def _send(self, code: int, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        st = self.state
        if self.path == "/health":
            self._send(200, "")
        elif self.path == "/v1/models" and st.fault == "huge-models" and st.models_asked >= 1:
            self._send(
                200, '{"object": "list", "data": [' + " " * (17 << 20) + "]}"
            )  # 17 MiB: past the bound
        elif self.path == "/v1/models":
            st.models_asked += 1
            self._send(
                200,
                json.dumps(
                    {
                        "object": "list",
                        "data": [{"id": "fake-model", "object": "model", "max_model_len": MAX_MODEL_LEN}],
                    }
                ),
            )
        elif self.path == "/version":
            self._send(200, json.dumps({"version": "0.0.0-fake" + "".join(LEAKED)}))
        elif self.path == "/metrics":
            if st.fault == "no-metrics":
                self._send(404, "not found", "text/plain")
                return
            if st.fault in ("huge-metrics", "endless-metrics") and st.requests >= st.fault_n:
                self._hostile_metrics(st.fault == "endless-metrics")
                return
            leaked = "".join(f"# leaked {v}\n" for v in LEAKED)
            self._send(200, leaked + metrics_text(st), "text/plain; version=0.0.4")
        else:
            self._send(404, "{}")

    def _hostile_metrics(self, endless: bool) -> None:
        block = b'vllm:spec_decode_num_drafts_total{engine="0",model_name="fake-model"} 1.0\n' * 1000
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        if endless:
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(HUGE_METRICS_BYTES))
        self.end_headers()
        sent = 0
        try:
            while endless or sent < HUGE_METRICS_BYTES:
                self.wfile.write(block[: HUGE_METRICS_BYTES - sent] if not endless else block)
                sent += len(block)
        except OSError:
            pass  # the collector stopped reading
        self.close_connection = True

    def _hostile_stream(self, n: int, chat: bool) -> bool:
        """Stream a hostile answer for request n when its fault says so; True when it did."""
        st = self.state
        if st.fault not in ("endless-content", "keepalive", "endless-line") or n <= st.fault_n:
            return False
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        delta = {"delta": {"content": " tok"}} if chat else {"text": " tok"}
        content = f"data: {json.dumps({'choices': [{'index': 0, **delta}]})}\n\n".encode()
        try:
            self.wfile.write(content)
            if st.fault == "endless-line":
                self.wfile.write(b'data: {"choices": [{"index": 0, "text": "')
            while True:
                if st.fault == "endless-content":
                    self.wfile.write(content * 16)
                elif st.fault == "keepalive":
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    time.sleep(0.5)
                else:
                    self.wfile.write(b"a" * 65536)
        except OSError:
            pass  # the collector gave up on the stream, as it should
        self.close_connection = True
        return True

    def do_POST(self) -> None:  # noqa: N802
        st = self.state
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        n = st.count_request()
        if st.fault == "die" and n > st.fault_n:
            os._exit(3)
        if st.fault == "5xx" and n % max(st.fault_n, 1) == 0:
            # with --leak-env, the first value is quoted where an error text kept to 300 characters cuts it
            cut = "x" * (275 - len('{"error": "injected failure')) + LEAKED[0] if LEAKED else ""
            self._send(500, json.dumps({"error": "injected failure" + cut}))
            return
        if st.fault == "reset" and n == st.fault_n:
            with st.lock:
                st.drafts = st.draft_tokens = st.accepted = 0
                st.per_pos = [0] * st.args.k
        received = time.perf_counter()
        chat = self.path.endswith("/chat/completions")
        prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        max_tokens = int(body.get("max_tokens", 16))
        if st.args.eos_after and not body.get("ignore_eos"):  # the model emits EOS early
            max_tokens = min(max_tokens, st.args.eos_after)
        tokens = output_tokens(prompt, max_tokens)
        if body.get("stream") and self._hostile_stream(n, chat):
            return
        if body.get("prompt_logprobs") is not None:
            entries = [None] + [{str(i): {"logprob": -0.5 - (i % 3) * 0.25, "rank": 1}} for i in range(9)]
            self._send(200, json.dumps({"choices": [{"text": tokens[0], "prompt_logprobs": entries}]}))
            return
        if not body.get("stream"):
            text = "".join(tokens)
            choice = {"message": {"content": text}} if chat else {"text": text}
            obj = "chat.completion" if chat else "text_completion"
            usage_block = {"completion_tokens": max_tokens}
            self._send(200, json.dumps({"object": obj, "choices": [choice], "usage": usage_block}))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        step = 1.0 / st.args.tps
        i = 0
        sent_chunks = 0
        steps: list[tuple[int, int]] = []  # (accepted, drafted) per verify step, for per-request metrics
        written: list[float] = []
        while i < max_tokens:
            if st.fault == "stall" and n > st.fault_n and sent_chunks == 2:
                time.sleep(3600)
            if st.fault == "malformed" and n > st.fault_n and sent_chunks == 1:
                self.wfile.write(b"data: {not json\n\n")
                self.wfile.flush()
                return
            drafted = min(st.args.k, max_tokens - i - 1)
            take = 1 + self._draft_round(drafted) if st.args.k else 1
            if st.args.k and drafted > 0:
                steps.append((take - 1, drafted))
            time.sleep(step * (1 if not st.args.k else 1.1))  # a round costs a bit more than a step
            piece = "".join(tokens[i : i + take])
            i += take
            with st.lock:
                st.generated += len(tokens[i - take : i])
            delta = {"delta": {"content": piece}} if chat else {"text": piece}
            # vLLM names the object of every chunk (AIPerf and GuideLLM skip chunks that do not)
            obj = "chat.completion.chunk" if chat else "text_completion"
            event = {"object": obj, "choices": [{"index": 0, **delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            written.append(time.perf_counter())
            sent_chunks += 1
        usage = json.dumps(
            {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": max_tokens,
                "total_tokens": len(prompt.split()) + max_tokens,
            }
        )
        if st.fault == "bad-usage" and n > st.fault_n:
            usage = BAD_USAGE[n % len(BAD_USAGE)] % {"n": max_tokens}
        metrics = ""
        if st.args.enable_per_request_metrics:
            metrics = ', "metrics": ' + json.dumps(per_request_metrics(st.args.k, received, written, steps))
        obj = "chat.completion.chunk" if chat else "text_completion"
        self.wfile.write(
            f'data: {{"object": "{obj}", "choices": [], "usage": {usage}{metrics}}}\n\n'.encode()
        )
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _draft_round(self, k: int) -> int:
        """One speculation round of depth k: returns accepted tokens (positions accept in sequence)."""
        return draft_round(self.state, k)


def draft_round(st: State, k: int) -> int:
    """One speculation round of depth k: returns accepted tokens (positions accept in sequence)."""
    if k <= 0:
        return 0
    accepted = 0
    with st.lock:
        st.drafts += 1
        st.draft_tokens += k
        for pos in range(k):
            if st.rng.random() < st.args.accept:
                accepted += 1
                st.per_pos[pos] += 1
            else:
                break
        st.accepted += accepted
        st.window[0] += k
        st.window[1] += accepted
    return accepted


TRAFFIC_TICK = 0.01  # seconds between the steps of --traffic


def traffic_loop(st: State, steps_per_second: float) -> None:
    """Serve traffic of its own: verify steps (one plain step per token without speculation)."""
    due = 0.0
    while True:
        time.sleep(TRAFFIC_TICK)
        due += steps_per_second * TRAFFIC_TICK
        while due >= 1.0:
            due -= 1.0
            tokens = 1 + draft_round(st, st.args.k)
            with st.lock:
                st.generated += tokens


def per_request_metrics(
    k: int, received: float, written: list[float], steps: list[tuple[int, int]]
) -> dict[str, object]:
    """vLLM 0.32's per-request `metrics` (--enable-per-request-metrics, spec metrics at `detailed`)."""
    found: dict[str, object] = {
        "time_to_first_token_ms": (written[0] - received) * 1000,
        "generation_time_ms": (written[-1] - written[0]) * 1000,
        "queue_time_ms": 0.0,
    }
    if k:
        histogram = [0] * (k + 1)
        for accepted, _ in steps:
            histogram[accepted] += 1
        found["speculative_decoding"] = {
            "acceptance_histogram": histogram,
            "num_spec_steps": len(steps),
            "num_accepted_draft_tokens": sum(a for a, _ in steps),
            "num_draft_tokens": sum(d for _, d in steps),
            "num_spec_tokens": k,
            "per_step_accepted": [a for a, _ in steps],
            "per_step_drafted": [d for _, d in steps],
        }
    return found


def metrics_text(st: State) -> str:
    with st.lock:
        generated = st.generated
    lines = [
        "# TYPE vllm:generation_tokens counter",
        f'vllm:generation_tokens_total{{engine="0",model_name="fake-model"}} {float(generated)}',
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{block_size="16",engine="0",kv_cache_size_tokens="{st.args.kv}",'
        f'num_gpu_blocks="{st.args.kv // 16}"}} 1.0',
    ]
    if st.args.k:
        with st.lock:
            values = (st.drafts, st.draft_tokens, st.accepted, list(st.per_pos))
        labels = '{engine="0",model_name="fake-model"}'
        lines += [
            "# TYPE vllm:spec_decode_num_drafts counter",
            f"vllm:spec_decode_num_drafts_total{labels} {float(values[0])}",
            "# TYPE vllm:spec_decode_num_draft_tokens counter",
            f"vllm:spec_decode_num_draft_tokens_total{labels} {float(values[1])}",
            "# TYPE vllm:spec_decode_num_accepted_tokens counter",
            f"vllm:spec_decode_num_accepted_tokens_total{labels} {float(values[2])}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="fake-model",'
            f'position="{i}"}} {float(v)}'
            for i, v in enumerate(values[3])
        ]
    return "\n".join(lines) + "\n"


def log_loop(st: State) -> None:
    while True:
        time.sleep(0.5)
        with st.lock:
            drafted, accepted = st.window
            st.window = [0, 0]
        if drafted:
            rate = accepted / drafted * 100
            print(
                f"(APIServer pid={os.getpid()}) INFO 11-29 12:00:00 [metrics.py:101] SpecDecoding metrics: "
                f"Mean acceptance length: {1 + accepted / max(drafted // st.args.k, 1):.2f}, Accepted "
                f"throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: {accepted} tokens, "
                f"Drafted: {drafted} tokens, Per-position acceptance rate: "
                f"{', '.join('0.500' for _ in range(st.args.k))}, Avg Draft acceptance rate: {rate:.1f}%",
                flush=True,
            )


LEAKED: list[str] = []  # values --leak-env put in every answer


def leak_env(names: list[str]) -> None:
    """Print each value split over several writes (and reads, on the collector's side of the pipe)."""
    for name in names:
        value = os.environ.get(name, "")
        LEAKED.append(value)
        args = {"api_key": value, "argv": sys.argv}
        line = f"(APIServer pid={os.getpid()}) INFO non-default args: {args!r}\n"
        data = line.encode()
        for start in range(0, len(data), 3):
            os.write(sys.stdout.fileno(), data[start : start + 3])
            time.sleep(0.002)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--k", type=int, default=0)
    parser.add_argument("--accept", type=float, default=0.8)
    parser.add_argument("--tps", type=float, default=200.0)
    parser.add_argument("--kv", type=int, default=100_000)
    parser.add_argument("--boot-delay", type=float, default=0.2)
    parser.add_argument("--fault", default=None)
    parser.add_argument("--hold-until", default=None, help="listen only once this path exists")
    parser.add_argument(
        "--eos-after", type=int, default=0, help="end a request without ignore_eos after this many tokens"
    )
    parser.add_argument("--enable-per-request-metrics", action="store_true")
    parser.add_argument("--traffic", type=float, default=0.0, help="verify steps a second of its own traffic")
    parser.add_argument("--token", default=None, help="ignored: a secret on the command line")
    parser.add_argument(
        "--leak-env",
        action="append",
        default=[],
        help="print this environment variable's value (as vLLM prints its non-default args), a few bytes "
        "per write, and put it in /version and /metrics too",
    )
    parser.add_argument(
        "--speculative-config",
        default=None,
        help="vLLM-style JSON: num_speculative_tokens, and fake_accept (acceptance per position)",
    )
    args = parser.parse_args()
    if args.speculative_config:
        config = json.loads(args.speculative_config)
        args.k = int(config["num_speculative_tokens"])
        args.accept = float(config.get("fake_accept", args.accept))
    if args.fault == "boot-fail":
        print("RuntimeError: injected boot failure", flush=True)
        return 1
    time.sleep(args.boot_delay)
    leak_env(args.leak_env)
    while args.hold_until and not os.path.exists(args.hold_until):
        time.sleep(0.05)
    state = State(args)
    Handler.state = state
    print(
        f"(EngineCore pid={os.getpid()}) INFO 11-29 12:00:00 [kv_cache_utils.py:2327] CPU KV cache size: "
        f"{args.kv:,} tokens, Maximum concurrency for {MAX_MODEL_LEN:,} tokens per request: "
        f"{args.kv / MAX_MODEL_LEN:.2f}x",
        flush=True,
    )
    threading.Thread(target=log_loop, args=(state,), daemon=True).start()
    if args.traffic > 0:
        threading.Thread(target=traffic_loop, args=(state, args.traffic), daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
