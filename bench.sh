#!/usr/bin/env bash
# One command for the benchmarks: runs the cheap ones (scripted models, synthetic data,
# the packaged embedding model), then writes bench/results.json, bench/results.md (each
# figure against its target) and bench/scale.png (retrieval p50 vs corpus size).
#   ./bench.sh             engine overhead, embeddings, retrieval, ingest, chat page,
#                          load (8 browser sessions, both backends),
#                          scale (postgres / embedded / numpy at 1k, 10k, 100k chunks)
#   ./bench.sh --large     scale up to 1M chunks too (minutes; ~2 GB of memory)
#   ./bench.sh --answers   also the real-model benchmarks: answers (~30 min on 2 cores),
#                          injection and local_llm
#   ./bench.sh --only scale,retrieval   just those
# DATABASE_URL set: the scale benchmark uses that PostgreSQL (with pgvector); unset, it
# starts a throwaway local one and removes it after.
set -euo pipefail
cd "$(dirname "$0")"

large=() answers=0 only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --large) large=(--large) ;;
        --answers) answers=1 ;;
        --only) only="$2"; shift ;;
        *) echo "usage: ./bench.sh [--large] [--answers] [--only a,b]" >&2; exit 2 ;;
    esac
    shift
done

scripts/setup_venv.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
raw=bench/raw
rm -rf "$raw"
mkdir -p "$raw"

run() {  # run NAME MODULE [ARGS...]: its JSON to bench/raw/NAME.json, a failure to .error
    local name=$1 module=$2
    shift 2
    if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then return 0; fi
    echo "==> $name"
    local started=$SECONDS
    if .venv/bin/python -m "$module" "$@" >"$raw/$name.json" 2>"$raw/$name.log"; then
        echo "    $((SECONDS - started)) s"
    else
        echo "    failed after $((SECONDS - started)) s (see $raw/$name.log)"
        tail -n 5 "$raw/$name.log" >"$raw/$name.error"
        rm -f "$raw/$name.json"
    fi
}

run engine_overhead bench.engine_overhead
run embeddings bench.embeddings
run retrieval bench.retrieval
run ingest bench.ingest
if scripts/ensure_chromium.sh >/dev/null 2>&1; then
    run chat_page bench.chat_page
    run load bench.load
else
    echo "==> chat_page skipped: no chromium"
fi
run scale bench.scale "${large[@]}"
if [ "$answers" = 1 ]; then
    run answers bench.answers
    run injection bench.injection
    run local_llm bench.local_llm
fi
.venv/bin/python -m bench.report --raw "$raw" --out bench
