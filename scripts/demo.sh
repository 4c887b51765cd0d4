#!/usr/bin/env bash
# Set up a virtual environment with ragwatch and run the quickstart example.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/python examples/quickstart.py
