#!/usr/bin/env bash
# A/B of the engine benchmark between two builds of crates/toolplan-core/benches/engine.rs on the
# same machine, alternating runs so that load changes hit both alike: the median of each build's
# per-round medians, for the 10,000-step groups (run and compile).
#
#   bench/ab_engine.sh BASE_BINARY NEW_BINARY [ROUNDS]      (default 5 rounds)
#
# Build each binary with `cargo bench -p toolplan-core --bench engine --no-run` on the commit to
# compare, and copy it from target/release/deps/engine-*.
set -euo pipefail
base="$1"; new="$2"; rounds="${3:-5}"
filter='^(run|compile)/(chain|fanout|random)/10000$'
tmp="$(mktemp -d)"
for r in $(seq "$rounds"); do
  for v in base new; do
    bin="$base"; [ "$v" = new ] && bin="$new"
    # bencher format: "test ID ... bench: 12,345 ns/iter (+/- 67)", one line per benchmark.
    "$bin" --bench --warm-up-time 1 --measurement-time 3 --output-format bencher "$filter" 2>/dev/null \
      | awk '/bench:/ {gsub(",", "", $5); print $2, $5 / 1e6}' >> "$tmp/$v"
  done
done
printf "%-22s %10s %10s %8s\n" bench "base ms" "new ms" change
for id in $(awk '{print $1}' "$tmp/base" | sort -u); do
  b=$(awk -v id="$id" '$1 == id {print $2}' "$tmp/base" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  n=$(awk -v id="$id" '$1 == id {print $2}' "$tmp/new" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v id="$id" -v b="$b" -v n="$n" 'BEGIN {printf "%-22s %10.2f %10.2f %+7.1f%%\n", id, b, n, (n - b) / b * 100}'
done
rm -rf "$tmp"
