#!/usr/bin/env bash
# A virtualenv for bench/bfcl_bench.py: bfcl-eval (its data files and AST checker) without its
# dependencies, plus only the light packages the checker imports. No model is downloaded.
# Usage: bash bench/bfcl_setup.sh [VENV]   (default ~/.cache/toolplan/bfcl-venv)
set -euo pipefail
venv="${1:-$HOME/.cache/toolplan/bfcl-venv}"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --no-deps bfcl-eval==2026.3.23
"$venv/bin/pip" install --quiet tenacity==9.2.1 tree_sitter==0.21.3 tree-sitter-java==0.21.0 \
  tree-sitter-javascript==0.21.4 filelock==3.20.0
echo "$venv/bin/python bench/bfcl_bench.py --help"
