#!/usr/bin/env bash
# The Python package's tests: builds and installs bindings/python (the engine as a Python module,
# PyO3 + maturin) into a virtualenv with the pinned test dependencies, then runs its pytest suite.
#
#   bash scripts/python-tests.sh [pytest arguments]
#
# The virtualenv is $TOOLPLAN_PY_VENV (default ~/.cache/toolplan/py-venv); the Rust build shares
# $CARGO_TARGET_DIR with the rest of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplan/target}"
venv="${TOOLPLAN_PY_VENV:-$HOME/.cache/toolplan/py-venv}"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r bindings/python/requirements-test.txt
# The README's install command, as a user runs it.
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps ./bindings/python
cd bindings/python/tests
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
