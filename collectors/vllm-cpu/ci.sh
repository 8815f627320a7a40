#!/usr/bin/env bash
# The end-to-end stage of .ci/run: install vLLM for CPU in its own venv, build the tiny models, and run
# the real-server tests (tests/test_real_server.py), which collect the campaign in campaign.toml and
# decide on it. Usage: collectors/vllm-cpu/ci.sh PROJECT_PYTHON
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
project_python="${1:?usage: ci.sh PROJECT_PYTHON}"
work="${MTPVERDICT_CI_WORK:-$root/ci-work}"
mkdir -p "$work"

export MTPVERDICT_VLLM_VENV="${MTPVERDICT_VLLM_VENV:-$root/.venv-vllm}"
vllm_python="$("$here/install.sh" | tail -n 1)"

if [[ ! -f "$work/models/MANIFEST.txt" ]]; then
    (cd "$work" && "$vllm_python" "$here/build_models.py" --out "$work/models")
fi

export MTPVERDICT_VLLM_PYTHON="$vllm_python"
export MTPVERDICT_MODELS="$work/models"
export MTPVERDICT_CI_WORK="$work"
export MTPVERDICT_REQUIRE_REAL_SERVER=1
cd "$root"
"$project_python" -m pytest -m real_server -q -p no:cacheprovider tests/test_real_server.py
