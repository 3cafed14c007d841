#!/usr/bin/env bash
# Run Chatitego on its embedded defaults (local model, no key, no internet needed).
# Set-up (virtual environment, models, demo data) happens here on first run.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup_venv.sh
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
# The demo theme (Chatitego's own user guide) gives a first run something to ask about.
.venv/bin/python -m themes ensure-demo
exec .venv/bin/python -m engine chat --theme "${CHATITEGO_THEME:-demo}" "$@"
