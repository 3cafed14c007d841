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
# Streamlit refuses uploads above this before the page sees them: the configured limit.
UPLOAD_MB="$(.venv/bin/python -c 'from config.settings import get_config as c; print(c().max_upload_mb)')"
flags=(--server.headless true --server.maxUploadSize "$UPLOAD_MB")
if [ "$ADDRESS" = "localhost" ] || [ "$ADDRESS" = "127.0.0.1" ]; then
    # DNS rebinding: a page of another site whose name resolves to 127.0.0.1 may not open
    # the app's WebSocket (set server.allowedHosts yourself when serving a network name).
    flags+=(--server.allowedHosts localhost --server.allowedHosts 127.0.0.1)
fi
if [ "${CHATITEGO_MODE:-production}" = "development" ]; then
    flags+=(--client.showErrorDetails=full --server.fileWatcherType auto)
fi
streamlit_run() {
    # Browsers still holding the cookies of earlier versions (one per theme) may send a
    # Cookie header over websockets' 8 KB line limit (431, page stuck): 16 KB lets them
    # load once, and the chat page deletes those cookies (issue 11 finding 2).
    # serve.py is "streamlit run" that may first load the models in the background.
    WEBSOCKETS_MAX_LINE_LENGTH=16384 .venv/bin/python serve.py "$1" \
        --server.port "$2" --server.address "$ADDRESS" "${flags[@]}"
}

mkdir -p data
streamlit_run rag_manager.py "$MANAGER_PORT" > data/rag_manager.log 2>&1 &
manager=$!
trap 'kill "$manager" 2>/dev/null || true' EXIT INT TERM
echo "==> Chatitego: http://$ADDRESS:$CHAT_PORT/?theme=${CHATITEGO_THEME:-demo}"
echo "==> RAG Manager: http://$ADDRESS:$MANAGER_PORT  (log: data/rag_manager.log)"
# The chat page's server loads the model and reads the demo theme's prompt at start, so
# the first question does not pay for them.
CHATITEGO_WARM_THEME="${CHATITEGO_THEME:-demo}" streamlit_run chatitego.py "$CHAT_PORT"
