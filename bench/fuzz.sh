#!/usr/bin/env bash
# Fuzzes toolplan for a fixed time budget and writes the figures to bench/results/fuzz.txt:
#
#   fuzz_plans   the plan parser, validator, reference resolver and scheduler, in process
#                (crates/toolplan-core/examples/fuzz_plans.rs: mutated seed plans, bytes and JSON)
#   fuzz_mcp     toolplan mcp's JSON-RPC input over stdio and streamable HTTP (bench/fuzz_mcp.py)
#
# Usage: bench/fuzz.sh [SECONDS_EACH] [SEED]     (default 300 s each, seed 1)
#
# Findings (inputs that panicked, hung or stopped the server) are saved under fuzz-findings/ and
# make the script exit 1. Builds in release without the local model (no llama.cpp needed).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplan/target}"
seconds="${1:-300}"
seed="${2:-1}"
out=bench/results/fuzz.txt

cargo build --release --quiet -p toolplan-cli --no-default-features
cargo build --release --quiet -p toolplan-core --example fuzz_plans

{
  echo "# bench/fuzz.sh $seconds $seed"
  echo "# date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# cpu:     $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)"
  echo
} > "$out"
status=0
"$CARGO_TARGET_DIR/release/examples/fuzz_plans" --seconds "$seconds" --seed "$seed" --out fuzz-findings \
  | tee -a "$out" || status=1
python3 bench/fuzz_mcp.py --seconds "$seconds" --seed "$seed" --out fuzz-findings \
  --binary "$CARGO_TARGET_DIR/release/toolplan" | tee -a "$out" || status=1
exit "$status"
