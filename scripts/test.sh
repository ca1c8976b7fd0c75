#!/usr/bin/env bash
# Set up a fresh virtual environment with everything the tests need, run the static checks
# (scripts/check.sh: ruff, mypy, the docs site built strictly), then run every test,
# NBSTREAM_TEST_WORKERS (default 3) modules at a time. Extra arguments go to pytest
# (e.g. scripts/test.sh -k snapshot, or -n 0 to run in one process); NBSTREAM_SKIP_CHECKS=1
# skips the static checks for a quick local run (CI always runs them). In CI the unit tests run
# again on the newest Python supported (NBSTREAM_NEWEST_PYTHON, default python3.13), against the
# wheel installed there (scripts/other_pythons.sh); a machine without it says so and goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
if [[ -n "${CI:-}" || -z "${NBSTREAM_SKIP_CHECKS:-}" ]]; then
    scripts/check.sh
fi
.venv/bin/python -m pytest -n "${NBSTREAM_TEST_WORKERS:-3}" --dist loadfile "$@"
if [[ -n "${CI:-}" ]]; then
    newest="${NBSTREAM_NEWEST_PYTHON:-python3.13}"
    if command -v "$newest" >/dev/null && "$newest" -c '' 2>/dev/null; then
        scripts/other_pythons.sh "$newest"
    else
        echo "warning: no $newest here: the unit tests ran on $(python3 --version) only" >&2
    fi
fi
