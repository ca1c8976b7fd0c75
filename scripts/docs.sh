#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) into site/ with .venv's MkDocs, strictly: any
# warning (a broken link or anchor, a reference mkdocstrings cannot resolve, a docstring it
# cannot render) fails the build with a non-zero exit status. Installs the docs extra into .venv
# first when it is missing. Extra arguments go to `mkdocs build` (e.g. --site-dir /tmp/site).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import mkdocs, material, mkdocstrings_handlers.python" 2>/dev/null; then
    scripts/setup.sh docs
fi
export NO_MKDOCS_2_WARNING=1  # Material's notice about MkDocs' future, printed on every build
exec .venv/bin/mkdocs build --strict --site-dir site "$@"
