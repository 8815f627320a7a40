#!/usr/bin/env bash
# Start one llama-server in the background and wait until /health answers 200.
#
#   collectors/llamacpp-cpu/serve.sh GGUF_DIR PORT LOG_FILE [EXTRA_LLAMA_SERVER_ARG ...]
#
# Example (a draft model that is a copy of the target, depth 2):
#   collectors/llamacpp-cpu/serve.sh ci-work/gguf 8210 server.log \
#       --spec-type draft-simple --spec-draft-model ci-work/gguf/draft-copy.gguf --spec-draft-n-max 2
#
# It runs `llama-server -m GGUF_DIR/target.gguf --host 127.0.0.1 --port PORT` with the settings every arm
# shares (the campaign's command): 4 slots of 1024 tokens each (-c 4096 --parallel 4), 2 threads,
# /metrics on, log verbosity 4 (the KV cache, build and per-position acceptance lines are printed only
# from level 4 on), then the extra arguments as they are (an argv list; nothing is re-parsed).
# The server runs niced in its own process group (setsid); its pid, which is also the group id, is
# written to LOG_FILE.pid and printed as `pid=N`. Stop it with collectors/vllm-cpu/stop.sh LOG_FILE.pid.
# Binary: $MTPVERDICT_LLAMA_SERVER, else what install.sh prints. While the model loads /health answers
# 503 ("Loading model"); on a timeout ($MTPVERDICT_LLAMACPP_BOOT_TIMEOUT s, default 120) or an early exit
# the server is stopped, the log tail is printed and the exit status is 1.
set -euo pipefail

if [[ $# -lt 3 ]]; then
    echo "usage: $0 GGUF_DIR PORT LOG_FILE [EXTRA_LLAMA_SERVER_ARG ...]" >&2
    exit 2
fi
GGUF_DIR="$1"
PORT="$2"
LOG_FILE="$3"
shift 3

here="$(cd "$(dirname "$0")" && pwd)"
BIN="${MTPVERDICT_LLAMA_SERVER:-$("$here/install.sh" | tail -n 1)}"
BOOT_TIMEOUT="${MTPVERDICT_LLAMACPP_BOOT_TIMEOUT:-120}"

if [[ ! -f "$GGUF_DIR/target.gguf" ]]; then
    echo "$GGUF_DIR: no target.gguf; run collectors/llamacpp-cpu/convert_models.py first" >&2
    exit 2
fi

started=$(date +%s.%N)
setsid nice -n 10 "$BIN" -m "$GGUF_DIR/target.gguf" --host 127.0.0.1 --port "$PORT" \
    -c 4096 --parallel 4 -t 2 --metrics -lv 4 "$@" >"$LOG_FILE" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$LOG_FILE.pid"
echo "pid=$pid"

deadline=$(( $(date +%s) + BOOT_TIMEOUT ))
while true; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "server exited during boot; last lines of $LOG_FILE:" >&2
        tail -n 30 "$LOG_FILE" >&2
        exit 1
    fi
    if curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null; then
        break
    fi
    if (( $(date +%s) >= deadline )); then
        echo "server not healthy after ${BOOT_TIMEOUT}s; stopping it; last lines of $LOG_FILE:" >&2
        tail -n 30 "$LOG_FILE" >&2
        kill -TERM -- "-$pid" 2>/dev/null || true
        exit 1
    fi
    sleep 0.2
done
ready=$(date +%s.%N)
echo "boot_s=$(awk -v a="$started" -v b="$ready" 'BEGIN { printf "%.1f", b - a }')"
