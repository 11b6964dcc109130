#!/usr/bin/env bash
# Runs toolplan's benchmarks and writes the results to bench/results/:
#
#   engine.txt          criterion output of crates/toolplan-core/benches/engine.rs
#                       (engine overhead per step: chain / fan-out / random DAG of 10..10,000 no-op steps,
#                       with and without the default step timeout; plan validation of 1,000 / 10,000 steps)
#   engine-summary.txt  the same figures as one table: time per run and per step
#   makespan.txt        output of crates/toolplan-core/benches/makespan.rs
#                       (makespan ÷ critical path: dependency-driven vs wave barrier vs sequential)
#
# Usage: bench/run.sh [--quick]
#   --quick   smoke run: shorter criterion measurement, 4 DAGs × 1 repetition for makespan.
#
# Needs: cargo, awk. Builds in release (`cargo bench`). CARGO_TARGET_DIR defaults to
# ~/.cache/toolplan/target. The numbers depend on the machine and on what else runs on it: close other
# heavy work (compiles) for stable figures; every result file starts with the machine it ran on.
set -euo pipefail

cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplan/target}"
out=bench/results
mkdir -p "$out"

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

if [ "$quick" = 1 ]; then
  criterion_args=(--warm-up-time 0.5 --measurement-time 1)
  makespan_args=(--quick)
else
  criterion_args=(--warm-up-time 1 --measurement-time 3)
  makespan_args=()
fi

header() {
  echo "# $1"
  echo "# date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "# rustc:   $(rustc --version)"
  echo "# cpu:     $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)"
  echo "# load:    $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown) (1/5/15 min, before the run)"
  echo "# command: $2"
  echo
}

# Build first so that compile output does not end up in the result files.
cargo bench -p toolplan-core --bench engine --bench makespan --no-run

engine_cmd="cargo bench -p toolplan-core --bench engine -- ${criterion_args[*]}"
echo ">> $engine_cmd"
{
  header "engine overhead and validation (criterion)" "$engine_cmd"
  cargo bench -p toolplan-core --bench engine -- "${criterion_args[@]}" 2>&1
} | tee "$out/engine.txt"

# One line per benchmark: the median estimate of the time per iteration, and that divided by the
# number of steps (the last component of the benchmark id).
awk '
  function us(v, unit) {
    if (unit == "ps") return v / 1e6
    if (unit == "ns") return v / 1e3
    if (unit == "µs" || unit == "us") return v
    if (unit == "ms") return v * 1e3
    if (unit == "s") return v * 1e6
    return -1
  }
  /^[a-z_]+\/[a-z]+\/[0-9]+/ { name = $1 }
  /time:/ && name != "" {
    line = $0; sub(/.*time: *\[/, "", line); split(line, f, " ")
    t = us(f[3], f[4]); n = name; sub(/.*\//, "", n)
    printf "%-34s %12.1f µs/run %10.3f µs/step\n", name, t, t / n
    name = ""
  }
' "$out/engine.txt" > "$out/engine-summary.tmp"
{
  echo "# per-run and per-step time (criterion median estimate), from engine.txt"
  echo "# target: run/*/10000 ≤ 5 µs/step; compile/*/10000 < 50 ms/run"
  echo
  cat "$out/engine-summary.tmp"
} > "$out/engine-summary.txt"
rm -f "$out/engine-summary.tmp"
cat "$out/engine-summary.txt"

makespan_cmd="cargo bench -p toolplan-core --bench makespan -- ${makespan_args[*]:-}"
echo ">> $makespan_cmd"
{
  header "makespan vs critical path" "$makespan_cmd"
  cargo bench -p toolplan-core --bench makespan -- "${makespan_args[@]}" 2>&1 | grep -v '^ *\(Finished\|Running\|Compiling\)'
} | tee "$out/makespan.txt"

echo ">> results in $out/"
