"""A small llama.cpp-shaped test server: llama-server's flags, endpoints, metrics, timings and log lines.

It takes the llama-server flags the project's campaigns use (-m, --host, --port, -c, --parallel, -t,
--metrics, -lv, --no-slots, --spec-type, --spec-draft-model, --spec-draft-n-max, --spec-ngram-mod-*) and
answers as llama-server 0.5.0-dev (commit 0c1e570) does (tests/data/recorded/llamacpp-0.5.0-dev-0c1e570-cpu):
/health 503 while loading, then 200; /props, /slots (501 with --no-slots), /metrics (501 without
--metrics; the per-position series only once a draft was verified), /v1/models, no /version; streamed and
plain /v1/completions whose `timings` carry draft_n / draft_n_accepted when the request drafted. The log
prints what -lv shows: at 3 the slot setup line and, per request that drafted, `draft acceptance = ...`;
at 4 also the build line, the KV pool line, `acc per pos` and the cumulative `statistics` line. Each
request's lines are printed, and the counters updated, before its final response is sent, as
print_timings and release do in tools/server/server-context.cpp.

Speculation: a draft type without a draft model is not built (llama-server logs "failed to initialize
speculative decoding context" and serves without it); a draft model whose file name holds "random"
accepts nothing, any other accepts each position with probability 0.8 (seeded). Fault (not a
llama-server flag): --fake-fault drop-reused closes a kept-alive connection at its second request without
answering, as a server closing an idle connection while the client reuses it.

    python tests/fakellama.py --port P [-c 4096] [--parallel 4] [-lv 4] [--metrics] [--spec-type ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
BUILD = "b1-0c1e570"
DRAFT_TYPES = ("draft-simple", "draft-eagle3", "draft-mtp")
NGRAM_MOD = "ngram-mod"
DEFAULT_DRAFT_N_MAX = 3  # --spec-draft-n-max
DEFAULT_NGRAM_MOD_N_MAX = 64  # --spec-ngram-mod-n-max
ACCEPT = 0.8
STEP_SECONDS = 0.003  # one decode step


def log(text: str) -> None:
    print(text, flush=True)


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.tasks = 0
        self.ready_at = time.monotonic() + args.fake_boot_delay
        self.slots = args.parallel
        self.n_ctx_slot = args.ctx // args.parallel
        kind = args.spec_type or "none"
        draft = kind in DRAFT_TYPES
        self.speculating = (draft and args.spec_draft_model is not None) or kind == NGRAM_MOD
        self.kind = kind
        self.k = (args.spec_draft_n_max or DEFAULT_DRAFT_N_MAX) if draft else args.spec_ngram_mod_n_max
        random_draft = draft and "random" in Path(args.spec_draft_model or "").name
        self.accept = 0.0 if random_draft else ACCEPT
        self.rng = random.Random(7)
        self.drafts = self.draft_tokens = self.accepted = 0
        self.per_pos: list[int] = []  # exported once a draft was verified
        self.stats = [0, 0, 0]  # cumulative drafts, draft tokens, accepted (the `statistics` line)
        self.predicted = 0


def output_tokens(prompt: str, n: int) -> list[str]:
    """Greedy output: depends on the prompt without its nonce, the same whatever the speculation."""
    if prompt.startswith("[") and "] " in prompt:
        prompt = prompt.split("] ", 1)[1]
    digest = hashlib.sha256(prompt.encode()).digest()
    return [" " + WORDS[digest[i % len(digest)] % len(WORDS)] for i in range(n)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.served = 0

    def log_message(self, *args: object) -> None:
        return

    def handle_one_request(self) -> None:
        if self.state.args.fake_fault == "drop-reused" and self.served >= 1:
            self.raw_requestline = self.rfile.readline(65537)
            self.close_connection = True  # a request on a reused connection: closed, never answered
            return
        self.served += 1
        super().handle_one_request()

    def _send(self, code: int, body: object, ctype: str = "application/json") -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Keep-Alive", "timeout=5, max=100")
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self, message: str) -> None:
        self._send(501, {"error": {"code": 501, "message": message, "type": "not_supported_error"}})

    def do_GET(self) -> None:  # noqa: N802
        st = self.state
        if time.monotonic() < st.ready_at:
            self._send(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
        elif self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path == "/props":
            self._send(200, props(st))
        elif self.path == "/slots":
            if st.args.no_slots:
                self._refuse("This server does not support slots endpoint. Start it with `--slots`")
                return
            slot = {"n_ctx": st.n_ctx_slot, "speculative": st.speculating, "is_processing": False}
            self._send(200, [{"id": i, **slot} for i in range(st.slots)])
        elif self.path == "/metrics":
            if not st.args.metrics:
                self._refuse("This server does not support metrics endpoint. Start it with `--metrics`")
                return
            self._send(200, metrics_text(st), "text/plain; version=0.0.4")
        elif self.path == "/v1/models":
            name = st.args.model
            meta = {"n_ctx": st.n_ctx_slot, "n_ctx_train": 1024}
            self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "meta": meta}]})
        else:
            self._send(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

    def do_POST(self) -> None:  # noqa: N802
        st = self.state
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        with st.lock:
            st.tasks += 1
            task = st.tasks
        received = time.perf_counter()
        prompt = str(body.get("prompt", ""))
        tokens = output_tokens(prompt, int(body.get("max_tokens", 16)))
        pieces, rounds = self._decode(tokens)
        first = time.perf_counter()
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for piece in pieces:
                time.sleep(STEP_SECONDS)
                self._event({"choices": [{"text": piece, "index": 0, "finish_reason": None}]})
        else:
            time.sleep(STEP_SECONDS * len(pieces))
        choice: dict[str, object] = {"text": "" if body.get("stream") else "".join(pieces), "index": 0}
        final = {
            "choices": [choice],
            "system_fingerprint": BUILD,
            "object": "text_completion",
            "usage": {"completion_tokens": len(tokens), "prompt_tokens": len(prompt.split())},
            "timings": self._finish(task, len(tokens), rounds, received, first),
        }
        if body.get("stream"):
            choice["finish_reason"] = "length"
            self._event(final)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self._send(200, final)

    def _event(self, obj: object) -> None:
        self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
        self.wfile.flush()

    def _decode(self, tokens: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
        """Deltas of one request and its verification rounds (drafted, accepted)."""
        st = self.state
        pieces: list[str] = []
        rounds: list[tuple[int, int]] = []
        i = 0
        while i < len(tokens):
            drafted = min(st.k, len(tokens) - i - 1) if st.speculating else 0
            accepted = 0
            with st.lock:
                while accepted < drafted and st.rng.random() < st.accept:
                    accepted += 1
            if drafted:
                rounds.append((drafted, accepted))
            pieces.append("".join(tokens[i : i + 1 + accepted]))
            i += 1 + accepted
        return pieces, rounds

    def _finish(
        self, task: int, n: int, rounds: list[tuple[int, int]], received: float, first: float
    ) -> dict[str, object]:
        """Log the request's lines and count it (before its final response is sent, as llama-server)."""
        st = self.state
        now = time.perf_counter()
        timings: dict[str, object] = {
            "cache_n": 0,
            "prompt_n": 4,
            "prompt_ms": (first - received) * 1000,
            "predicted_n": n,
            "predicted_ms": (now - first) * 1000,
        }
        drafted = sum(d for d, _ in rounds)
        accepted = sum(a for _, a in rounds)
        with st.lock:
            st.predicted += n
            if drafted:
                timings.update(draft_n=drafted, draft_n_accepted=accepted)
                st.drafts += len(rounds)
                st.draft_tokens += drafted
                st.accepted += accepted
                if not st.per_pos:
                    st.per_pos = [0] * st.k
                for _, a in rounds:
                    for p in range(a):
                        st.per_pos[p] += 1
                self._log_lines(task, rounds, drafted, accepted)
        return timings

    def _log_lines(self, task: int, rounds: list[tuple[int, int]], drafted: int, accepted: int) -> None:
        st = self.state
        head = f"slot print_timing: id  0 | task {task} | "
        log(
            f"{head}draft acceptance = {accepted / drafted:0.5f} ({accepted:5d} accepted / {drafted:5d} "
            f"generated), mean len = {1 + accepted / len(rounds):5.2f}"
        )
        per_pos = [sum(1 for _, a in rounds if a > p) / len(rounds) for p in range(st.k)]
        if st.args.lv >= 4:
            log(f"{head}     acc per pos = ({', '.join(f'{r:.3f}' for r in per_pos)})")
            st.stats = [st.stats[0] + len(rounds), st.stats[1] + drafted, st.stats[2] + accepted]
            log(
                f"spec common_specu: statistics {st.kind:>16}: #calls(b,g,a) = {task:4d} {st.stats[0]:6d} "
                f"{st.stats[0]:6d}, #gen drafts = {st.stats[0]:6d}, #acc drafts = {st.stats[0]:6d}, "
                f"#gen tokens = {st.stats[1]:6d}, #acc tokens = {st.stats[2]:6d}"
            )


def props(st: State) -> dict[str, object]:
    return {
        "default_generation_settings": {"n_ctx": st.n_ctx_slot},
        "total_slots": st.slots,
        "model_path": st.args.model,
        "endpoint_slots": not st.args.no_slots,
        "endpoint_metrics": st.args.metrics,
        "build_info": BUILD,
    }


def metrics_text(st: State) -> str:
    with st.lock:
        values = {
            "tokens_predicted_total": st.predicted,
            "spec_decode_num_draft_tokens_total": st.draft_tokens,
            "spec_decode_num_accepted_tokens_total": st.accepted,
            "spec_decode_num_drafts_total": st.drafts,
        }
        per_pos = list(st.per_pos)
    lines = []
    for name, value in values.items():
        lines += [f"# TYPE llamacpp:{name} counter", f"llamacpp:{name} {value}"]
    if per_pos:
        lines.append("# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter")
        lines += [
            f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}'
            for i, v in enumerate(per_pos)
        ]
    return "\n".join(lines) + "\n"


def boot_lines(st: State) -> None:
    args = st.args
    if args.lv >= 4:
        log("0.00.003.931 I cmn  common_param: common_params_print_info: build 1 (0c1e570) with GNU 12.2.0")
        seqs = f"{st.slots}/{st.slots}"
        log(
            f"0.00.028.010 I llama_kv_cache: size =    8.00 MiB ({st.n_ctx_slot:6d} cells,   2 layers, "
            f"{seqs} seqs), K (f16):    4.00 MiB, V (f16):    4.00 MiB"
        )
    log(
        f"0.00.122.428 I srv    load_model: initializing, n_slots = {st.slots}, n_ctx_slot = "
        f"{st.n_ctx_slot}, kv_unified = 'false'"
    )
    if st.kind in DRAFT_TYPES and not st.speculating:
        log("0.00.122.500 E srv    load_model: failed to initialize speculative decoding context: no model")
    log(f"0.00.123.000 I main: server is listening on http://{args.host}:{args.port}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-m", "--model", default="target.gguf")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("-c", "--ctx-size", dest="ctx", type=int, default=4096)
    parser.add_argument("-np", "--parallel", type=int, default=4)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--no-slots", action="store_true")
    parser.add_argument("-lv", "--verbosity", dest="lv", type=int, default=3)
    parser.add_argument("--spec-type", default=None)
    parser.add_argument("-md", "--spec-draft-model", default=None)
    parser.add_argument("--spec-draft-n-max", type=int, default=None)
    parser.add_argument("--spec-ngram-mod-n-max", type=int, default=DEFAULT_NGRAM_MOD_N_MAX)
    parser.add_argument("--spec-ngram-mod-n-min", type=int, default=48)
    parser.add_argument("--spec-ngram-mod-n-match", type=int, default=24)
    parser.add_argument("--fake-fault", default=None, help="drop-reused")
    parser.add_argument("--fake-boot-delay", type=float, default=0.3, help="seconds /health answers 503")
    args = parser.parse_args()
    state = State(args)
    Handler.state = state
    boot_lines(state)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
