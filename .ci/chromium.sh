#!/bin/sh
# Install headless Chromium and chromedriver for the browser test (tests/test_browser.py) when missing.
# Idempotent: does nothing when both are already on PATH. Debian/Ubuntu (apt-get); needs root or sudo.
set -eu
if command -v chromedriver >/dev/null 2>&1 \
    && { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium.sh: apt-get not found; install chromium and chromedriver yourself" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-dejavu-core
command -v chromedriver >/dev/null
