#!/usr/bin/env bash
# Set up a virtual environment with ragwatch and run the demo on the embedded (in-process) backend.
# Usage: bash scripts/demo.sh [ragwatch demo options, e.g. --serve --port 8000]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[pretty,serve]'
exec .venv/bin/ragwatch demo "$@"
