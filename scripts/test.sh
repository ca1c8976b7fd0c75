#!/usr/bin/env bash
# Set up a fresh virtual environment with everything the tests need, run the static checks
# (scripts/check.sh: ruff, mypy, the docs site built strictly), then run every test,
# NBSTREAM_TEST_WORKERS (default 3) modules at a time. Extra arguments go to pytest
# (e.g. scripts/test.sh -k snapshot, or -n 0 to run in one process); NBSTREAM_SKIP_CHECKS=1
# skips the static checks for a quick local run (CI always runs them). In CI the unit tests run
# again on the newest Python supported (NBSTREAM_NEWEST_PYTHON, else python3.13 on PATH or in
# pyenv), against the wheel installed there (scripts/other_pythons.sh); a machine without it says
# so and goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
if [[ -n "${CI:-}" || -z "${NBSTREAM_SKIP_CHECKS:-}" ]]; then
    scripts/check.sh
fi
.venv/bin/python -m pytest -n "${NBSTREAM_TEST_WORKERS:-3}" --dist loadfile "$@"
if [[ -n "${CI:-}" ]]; then
    # the newest Python: as given, else python3.13 on PATH, else one pyenv installed
    newest=""
    for candidate in "${NBSTREAM_NEWEST_PYTHON:-}" python3.13 "$HOME"/.pyenv/versions/3.13*/bin/python3.13; do
        if [[ -n $candidate ]] && "$candidate" -c '' 2>/dev/null; then newest=$candidate; break; fi
    done
    if [[ -n $newest ]]; then
        scripts/other_pythons.sh "$newest"
    else
        echo "warning: no Python 3.13 here: the unit tests ran on $(python3 --version) only" >&2
    fi
fi
