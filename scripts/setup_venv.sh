#!/usr/bin/env bash
# Create or refresh .venv/ from requirements.txt. Idempotent: does nothing when
# requirements.txt has not changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON_BIN="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "==> Creating the virtual environment in .venv/"
    "$PYTHON_BIN" -m venv .venv
fi

stamp=.venv/.requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$wanted" ]; then
    exit 0
fi

echo "==> Installing dependencies into .venv/ (pinned in requirements.txt)"
.venv/bin/python -m pip install --quiet --upgrade pip
# torch alone first: the CPU build of 2.13.0. A looser pin drags a multi-GB CUDA build.
.venv/bin/python -m pip install --progress-bar on "torch==2.13.0"
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
    echo "==> llama-cpp-python has no wheel on PyPI: it compiles now (about 5-10 min on"
    echo "    2 cores, once; pip's wheel cache makes later installs fast)."
fi
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" .venv/bin/python -m pip install --progress-bar on -r requirements.txt
echo "$wanted" > "$stamp"
echo "==> Dependencies ready."
