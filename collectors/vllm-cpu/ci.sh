#!/usr/bin/env bash
# The end-to-end stage of .ci/run: install vLLM for CPU in its own venv, build the tiny models, and run
# the real-server tests: tests/test_real_server.py collects the campaign in campaign.toml (killing its
# server and collect itself on the way, then resuming) and decides on it; tests/test_client_real_server.py
# checks the measuring client against the server's own per-request timing and acceptance;
# tests/test_real_watch.py runs `mtpverdict watch` against the e2e decision's n-gram arm on an n-gram
# server (the evidence holds) and on a server with the random draft (below break-even);
# tests/test_real_schedule.py derives a schedule with schedule-policy.toml from schedule-campaign.toml's
# results (fixed n-gram depths and an arm running a hand-written per-batch-size schedule; recorded on
# this server in tests/data/real/schedule-phase1, as thirty boots would take half of CI), writes the
# campaign again with an arm serving it (mtpverdict schedule-arm), collects that live at one boot per
# arm and decides on it;
# tests/test_real_load.py collects a small campaign beside a process burning a core, SIGTERMs collect
# while a server starts, resumes, and decides on the server's clock (collect turns it on itself);
# tests/test_real_compose.py collects compose-campaign.toml, whose arms come from the compose service in
# compose.yaml (launched natively, `sync` and a memory check before every boot) over the mixed prompt
# set of collectors/datasets/ (one workload per category), decides it per category, and gates its
# evidence against that compose file (accepted by hash) and against one with a changed
# --max-model-len (refused).
#   collectors/vllm-cpu/ci.sh --prepare      install and build only (.ci/run starts this early, in the
#                                            background, while the unit tests run)
#   collectors/vllm-cpu/ci.sh PROJECT_PYTHON install and build if not done yet, then run the tests
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${1:?usage: ci.sh --prepare | PROJECT_PYTHON}"
work="${MTPVERDICT_CI_WORK:-$root/ci-work}"
mkdir -p "$work"

export MTPVERDICT_VLLM_VENV="${MTPVERDICT_VLLM_VENV:-$root/.venv-vllm}"
vllm_python="$("$here/install.sh" | tail -n 1)"

if [[ ! -f "$work/models/MANIFEST.txt" ]]; then
    (cd "$work" && "$vllm_python" "$here/build_models.py" --out "$work/models")
fi
[[ "$target" == "--prepare" ]] && exit 0

export MTPVERDICT_VLLM_PYTHON="$vllm_python"
export MTPVERDICT_MODELS="$work/models"
export MTPVERDICT_CI_WORK="$work"
export MTPVERDICT_REQUIRE_REAL_SERVER=1
cd "$root"
"$target" -m pytest -m real_server -q -p no:cacheprovider --durations=8 tests/test_real_server.py tests/test_client_real_server.py \
    tests/test_real_watch.py
MTPVERDICT_SCHEDULE_PHASE1="$root/tests/data/real/schedule-phase1" MTPVERDICT_SCHEDULE_BOOTS=1 \
    "$target" -m pytest -m real_server -q -p no:cacheprovider --durations=8 tests/test_real_schedule.py
"$target" -m pytest -m real_server -q -p no:cacheprovider --durations=8 tests/test_real_load.py
"$target" -m pytest -m real_server -q -p no:cacheprovider --durations=8 tests/test_real_compose.py
