#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (parallel slots, continuous batching, prompt cache) once,
# from the llama.cpp sources vendored in the pinned llama-cpp-python sdist, into the user cache
# outside the checkout, keyed by that version and the build flags, so later runs and fresh clones
# on the same machine reuse it. Skipped when the binary is there and answers --version.
# Prints the binary's path as its last line. About 5-6 minutes on two cores, once.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-.venv/bin/python}"
VERSION="${PROMPTSLIM_LLAMA_CPP_VERSION:-0.3.36}"
# AVX2/FMA/F16C, not -march=native: the same reasoning as llama-cpp-python's build in setup.sh.
# Static libraries so the one binary can be copied into the cache and run from there.
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release"
HASH="$(printf '%s' "$FLAGS" | sha256sum | cut -c1-12)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/promptslim/llama-server/$VERSION-$HASH"
BIN="$CACHE/llama-server"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi

command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || {
    echo "build_llama_server: needs cmake and a C++ compiler" \
        "(Debian/Ubuntu: apt-get install -y cmake build-essential)" >&2
    exit 1
}

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PY" -m pip download --disable-pip-version-check -q --no-deps --no-binary llama-cpp-python \
    -d "$WORK" "llama-cpp-python==$VERSION" >&2
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
# the build's output also goes to a log keyed like the binary (bench_tools' traces draw on it)
LOG="${XDG_CACHE_HOME:-$HOME/.cache}/promptslim/logs/llama_server_build_$VERSION-$HASH.log"
mkdir -p "$(dirname "$LOG")"
{
    # shellcheck disable=SC2086  # FLAGS is a list of separate -D arguments
    cmake -S "$SRC" -B "$WORK/build" $FLAGS
    cmake --build "$WORK/build" --target llama-server -j "${PROMPTSLIM_BUILD_JOBS:-2}"
} 2>&1 | tee "$LOG.tmp" >&2
mv "$LOG.tmp" "$LOG"

mkdir -p "$CACHE"
cp "$WORK/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"  # atomic: a half-copied binary is never taken for a built one
"$BIN" --version >&2
echo "$BIN"
