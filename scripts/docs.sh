#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) into site/ with .venv's MkDocs, strictly: any
# warning (a broken link or anchor, a reference mkdocstrings cannot resolve, a docstring it
# cannot render) fails the build with a non-zero exit status. The site opens from the file system
# (site/index.html). Installs the docs extra into .venv first when it is missing.
#
#   scripts/docs.sh [ARGS]            build; ARGS go to `mkdocs build` (e.g. --quiet, --site-dir /tmp/site)
#   scripts/docs.sh --serve [ARGS]    serve it at http://127.0.0.1:8000/nbstream/, rebuilt on every change;
#                                     ARGS go to `mkdocs serve` (e.g. --dev-addr 127.0.0.1:8001)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import mkdocs, material, mkdocstrings_handlers.python, ruff" 2>/dev/null; then
    scripts/setup.sh docs
fi
export NO_MKDOCS_2_WARNING=1  # Material's notice about MkDocs' future, printed on every build
if [[ "${1:-}" == --serve ]]; then
    shift
    exec .venv/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000 "$@"
fi
exec .venv/bin/mkdocs build --strict --site-dir site "$@"
