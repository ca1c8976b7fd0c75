#!/usr/bin/env bash
# Set up a fresh virtual environment with everything the tests need, then run them all,
# NBSTREAM_TEST_WORKERS (default 3) modules at a time. Extra arguments go to pytest
# (e.g. scripts/test.sh -k snapshot, or -n 0 to run in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest -n "${NBSTREAM_TEST_WORKERS:-3}" --dist loadfile "$@"
