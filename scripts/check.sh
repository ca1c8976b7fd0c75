#!/usr/bin/env bash
# The static checks CI runs before the tests, each failing the run: ruff (lint, import order,
# complexity), the import layers (import-linter, contracts in pyproject.toml), mypy (strict on every module of the
# library and the worker) and the documentation site,
# built strictly (a broken link or reference fails it). Needs .venv with the test extra
# (scripts/setup.sh test).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "==> ruff"
.venv/bin/ruff check .
echo "==> import layers"
.venv/bin/lint-imports --no-cache
echo "==> mypy"
.venv/bin/mypy
echo "==> docs"
scripts/docs.sh  # not --quiet: mkdocs counts only the warnings it prints, and strict fails on those
