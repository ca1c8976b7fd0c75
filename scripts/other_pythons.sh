#!/usr/bin/env bash
# The wheel on other Pythons: build nbstream's wheel once, install it with the test extras in a fresh
# virtual environment of each Python given (a path or a name on PATH), and run the unit tests there
# against the installed wheel (pytest's append import mode puts the checkout after site-packages, so
# `import nbstream` finds the wheel; the tests and their helpers come from the checkout).
#   scripts/other_pythons.sh python3.13 [python3.12 ...]     (extra pytest arguments after --)
set -euo pipefail
cd "$(dirname "$0")/.."
pythons=()
while [[ $# -gt 0 && $1 != -- ]]; do pythons+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
[[ ${#pythons[@]} -gt 0 ]] || { echo "usage: scripts/other_pythons.sh PYTHON... [-- PYTEST_ARGS]" >&2; exit 2; }
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
python3 -m pip wheel --quiet --no-deps --wheel-dir "$dist" .
wheel=$(ls "$dist"/nbstream-*.whl)
for python in "${pythons[@]}"; do
    version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    venv="$PWD/.venv-$version"
    echo "==> Python $version: $wheel"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "${wheel}[test]"
    installed=$(cd "$dist" && "$venv/bin/python" -c 'import nbstream, os; print(os.path.dirname(nbstream.__file__))')
    [[ $installed == */site-packages/* ]] || { echo "nbstream came from $installed, not the wheel" >&2; exit 1; }
    "$venv/bin/worker" --version
    # (pytest's own program, not python -m pytest, which would put the checkout first on the path)
    "$venv/bin/pytest" --import-mode=append -p no:cacheprovider -o addopts="-ra" \
        -n "${NBSTREAM_TEST_WORKERS:-3}" --dist loadfile tests/unit "$@"
done
