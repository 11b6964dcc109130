#!/usr/bin/env bash
# Query-DSL planning benchmark: execution accuracy of the DSL the local default model writes for the
# 44 questions of bench/dsl_eval/questions.json (iris, books, tickets), with OpenSearch's plain
# algorithm (first `{`, no checks, no repair) and with toolplan's planner (first valid object,
# deterministic corrections, mapping checks and a dry run on the index, one repair by the model).
# Same model, same prompts, side by side; both read the same first reply (greedy decoding).
#
# Writes bench/results/dsl_eval.txt (the table) and bench/results/dsl_eval.jsonl (per question:
# both bodies, errors, every reply with its corrections and problems).
#
# Usage: bench/dsl_eval.sh [--only q1,q7] [--model SPEC]
# Needs: the local model (bash scripts/fetch-model.sh default), cargo. About 15-25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplan/target}"
mkdir -p bench/results
cargo build --release -q -p toolplan-search --features local --example dsl_eval
{
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git rev-parse --short HEAD); $(nproc) cores; command: bench/dsl_eval.sh $*"
  "$CARGO_TARGET_DIR/release/examples/dsl_eval" --out bench/results/dsl_eval.jsonl "$@"
} 2>&1 | tee bench/results/dsl_eval.txt
