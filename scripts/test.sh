#!/usr/bin/env bash
# Set up a fresh virtual environment with everything the tests need, then run them all.
# Extra arguments go to pytest (e.g. scripts/test.sh -k snapshot).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
