#!/usr/bin/env bash
# Build llama.cpp's server (llama-server) for CPU from the llama-cpp-python 0.3.36 source distribution,
# which vendors the whole llama.cpp tree (server, GGUF converter, gguf-py), for the real-server tests.
#
#   collectors/llamacpp-cpu/install.sh
#
# Everything goes to $MTPVERDICT_LLAMACPP_DIR (default: ./ci-work/llamacpp): the downloaded archive, the
# unpacked source, and the build directory. Idempotent: when the binary already exists it exits at once
# (so a CI cache of that directory skips the build). A fresh build downloads 77 MB and takes about
# 6-7 minutes on two busy cores (niced, -j2). Only the llama-server target is built.
# Prints the binary's path last, so a caller can do: BIN=$(collectors/llamacpp-cpu/install.sh | tail -n1)
# The vendored tree (for the converter) is then at $(dirname "$BIN")/../../vendor/llama.cpp.
set -euo pipefail

DIR="${MTPVERDICT_LLAMACPP_DIR:-$PWD/ci-work/llamacpp}"
SDIST_SPEC="llama-cpp-python==0.3.36"
SDIST_NAME="llama_cpp_python-0.3.36"
SRC="$DIR/$SDIST_NAME"
BUILD="$SRC/build"
BIN="$BUILD/bin/llama-server"
JOBS="${MTPVERDICT_LLAMACPP_JOBS:-2}"
PIP_PYTHON="${MTPVERDICT_PIP_PYTHON:-python3}"

if [[ -x "$BIN" ]]; then
    echo "llama-server already built in $BUILD" >&2
    echo "$BIN"
    exit 0
fi

mkdir -p "$DIR"
if [[ ! -f "$DIR/$SDIST_NAME.tar.gz" ]]; then
    echo "downloading the $SDIST_SPEC source distribution to $DIR" >&2
    "$PIP_PYTHON" -m pip download --no-deps --no-binary :all: --dest "$DIR" "$SDIST_SPEC" >&2
fi
if [[ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]]; then
    tar -xzf "$DIR/$SDIST_NAME.tar.gz" -C "$DIR"
fi

# Server only, no tests or examples, no OpenSSL, no prebuilt web UI.
nice -n 19 cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
nice -n 19 cmake --build "$BUILD" --target llama-server -j "$JOBS" >&2
"$BIN" --version >&2
echo "$BIN"
