#!/usr/bin/env bash
# Set up a fresh virtual environment with everything the tests need, run the static checks
# (scripts/check.sh: ruff, mypy, the docs site built strictly), then run every test,
# NBSTREAM_TEST_WORKERS (default 3) modules at a time. Extra arguments go to pytest
# (e.g. scripts/test.sh -k snapshot, or -n 0 to run in one process); NBSTREAM_SKIP_CHECKS=1
# skips the static checks for a quick local run (CI always runs them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
if [[ -n "${CI:-}" || -z "${NBSTREAM_SKIP_CHECKS:-}" ]]; then
    scripts/check.sh
fi
exec .venv/bin/python -m pytest -n "${NBSTREAM_TEST_WORKERS:-3}" --dist loadfile "$@"
