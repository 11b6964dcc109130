#!/usr/bin/env bash
# The offline agent demo: installs what is missing, fetches the default local model, builds toolplan,
# and asks a sample question (two cities' weather, compared) with the demo tools. With the local
# model, ask offers execute_tool_plan alone by default and answers with the plan (its answer field,
# else its results): one plan, often one model call; --verbose shows the plan and its result.
#
#   bash scripts/demo.sh ["ANOTHER QUESTION"]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplan/target}"

bash scripts/setup.sh
bash scripts/fetch-model.sh default
cargo build --release -q -p toolplan-cli
question="${1:-Compare the weather in Tokyo and London}"
exec "$CARGO_TARGET_DIR/release/toolplan" ask "$question" --tools demo --verbose
