#!/usr/bin/env bash
# The browser tests drive Debian's chromium (playwright without a browser download):
# install it when missing. Idempotent.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -n "${CHROMIUM_PATH:-}" ]; then
    exit 0
fi
echo "==> Installing Debian's chromium for the browser tests (once)"
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "chromium is missing and this user cannot install it: run" >&2
    echo "  apt-get update && apt-get install -y chromium" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
