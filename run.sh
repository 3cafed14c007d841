#!/usr/bin/env bash
# Run Chatitego on its embedded defaults (local model, no key, no internet needed):
# the chat page on http://localhost:8501 and the RAG Manager on http://localhost:8502.
# Set-up (virtual environment, models, demo data) happens here on first run.
#   ./run.sh --terminal [options]   the terminal chat instead (python -m engine chat)
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup_venv.sh
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
# The demo theme (Chatitego's own user guide) gives a first run something to ask about.
.venv/bin/python -m themes ensure-demo

if [ "${1:-}" = "--terminal" ]; then
    shift
    exec .venv/bin/python -m engine chat --theme "${CHATITEGO_THEME:-demo}" "$@"
fi

CHAT_PORT="${CHATITEGO_PORT:-8501}"
MANAGER_PORT="${CHATITEGO_MANAGER_PORT:-$((CHAT_PORT + 1))}"
ADDRESS="${CHATITEGO_ADDRESS:-localhost}"
details=()
if [ "${CHATITEGO_MODE:-production}" = "development" ]; then
    details=(--client.showErrorDetails=full)
fi
streamlit_run() {
    .venv/bin/python -m streamlit run "$1" --server.port "$2" --server.address "$ADDRESS" \
        --server.headless true "${details[@]}"
}

mkdir -p data
streamlit_run rag_manager.py "$MANAGER_PORT" > data/rag_manager.log 2>&1 &
manager=$!
trap 'kill "$manager" 2>/dev/null || true' EXIT INT TERM
echo "==> Chatitego: http://$ADDRESS:$CHAT_PORT/?theme=${CHATITEGO_THEME:-demo}"
echo "==> RAG Manager: http://$ADDRESS:$MANAGER_PORT  (log: data/rag_manager.log)"
streamlit_run chatitego.py "$CHAT_PORT"
