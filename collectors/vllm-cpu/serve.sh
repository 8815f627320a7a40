#!/usr/bin/env bash
# Start one vLLM CPU server in the background and wait until it answers /health.
#
#   collectors/vllm-cpu/serve.sh MODEL_DIR PORT LOG_FILE [EXTRA_VLLM_ARG ...]
#
# Example (n-gram speculation, depth 2):
#   collectors/vllm-cpu/serve.sh models/target 8000 server.log \
#       --speculative-config '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":4,"prompt_lookup_min":2}'
#
# Extra arguments are passed to the server as they are (an argv list; nothing is re-parsed).
# The server runs in its own process group (setsid); its pid, which is also the group id, is written to
# LOG_FILE.pid and printed as `pid=N`. Stop it with collectors/vllm-cpu/stop.sh LOG_FILE.pid.
# Python: $MTPVERDICT_VLLM_PYTHON, else $MTPVERDICT_VLLM_VENV/bin/python, else ./.venv-vllm/bin/python.
# The boot wait is $MTPVERDICT_VLLM_BOOT_TIMEOUT seconds (default 300); on timeout or an early exit the
# server is stopped, the log tail is printed and the exit status is 1.
set -euo pipefail

if [[ $# -lt 3 ]]; then
    echo "usage: $0 MODEL_DIR PORT LOG_FILE [EXTRA_VLLM_ARG ...]" >&2
    exit 2
fi
MODEL_DIR="$1"
PORT="$2"
LOG_FILE="$3"
shift 3

PYTHON="${MTPVERDICT_VLLM_PYTHON:-${MTPVERDICT_VLLM_VENV:-$PWD/.venv-vllm}/bin/python}"
BOOT_TIMEOUT="${MTPVERDICT_VLLM_BOOT_TIMEOUT:-300}"

if [[ ! -x "$PYTHON" ]]; then
    echo "$PYTHON: not found; run collectors/vllm-cpu/install.sh first" >&2
    exit 2
fi
if [[ ! -f "$MODEL_DIR/config.json" ]]; then
    echo "$MODEL_DIR: no config.json; run collectors/vllm-cpu/build_models.py --out DIR first" >&2
    exit 2
fi

export VLLM_TARGET_DEVICE=cpu
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export VLLM_NO_USAGE_STATS=1
export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-$PWD/.cache-vllm}"
mkdir -p "$VLLM_CACHE_ROOT"

started=$(date +%s.%N)
setsid "$PYTHON" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL_DIR" \
    --host 127.0.0.1 \
    --port "$PORT" \
    --max-model-len 1024 \
    "$@" \
    >"$LOG_FILE" 2>&1 </dev/null &
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
    sleep 1
done
ready=$(date +%s.%N)
echo "boot_s=$(awk -v a="$started" -v b="$ready" 'BEGIN { printf "%.1f", b - a }')"
