#!/usr/bin/env bash
# Set up a fresh virtual environment with everything the tests need, then run them all.
# Extra arguments go to pytest (e.g. scripts/test.sh -k snapshot).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
exec .venv/bin/python -m pytest "$@"
