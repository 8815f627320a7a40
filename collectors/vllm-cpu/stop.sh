#!/usr/bin/env bash
# Stop a server started by serve.sh: SIGTERM to its process group, SIGKILL after 30 s.
#
#   collectors/vllm-cpu/stop.sh LOG_FILE.pid
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 LOG_FILE.pid" >&2
    exit 2
fi
pid="$(cat "$1")"
if ! kill -0 "$pid" 2>/dev/null; then
    echo "pid $pid is not running" >&2
    exit 0
fi
kill -TERM -- "-$pid" 2>/dev/null || true
for _ in $(seq 30); do
    if ! kill -0 -- "-$pid" 2>/dev/null; then
        echo "stopped $pid"
        exit 0
    fi
    sleep 1
done
kill -KILL -- "-$pid" 2>/dev/null || true
echo "killed $pid after 30 s" >&2
