#!/usr/bin/env bash
# The test suite: installs what is missing, fetches the small local model (the end-to-end tests run a
# real model) and the real MCP servers and clients the MCP tests use, then runs every test: the
# workspace's, then the Python package's (scripts/python-tests.sh).
#
#   bash scripts/test.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplan/target}"

bash scripts/setup.sh
bash scripts/fetch-model.sh small
bash scripts/mcp-servers.sh >/dev/null
cargo test --workspace "$@"
bash scripts/python-tests.sh
