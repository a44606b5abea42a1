#!/usr/bin/env bash
# Instructions per decision, counted by callgrind inside `hot_loop` of benches/instructions.rs.
# Usage: scripts/instructions.sh [N] [CASE...]   (default N = 1000000, all cases; algorithm cases
# are algorithm_NAME_allowed and algorithm_NAME_refused)
# Deterministic for a given binary: the figures in BENCHMARKS.md come from this script.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}; shift || true
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
bin=$(cargo bench --bench instructions --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="instructions" and m.get("executable"): print(m["executable"])' | tail -1)
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  mapfile -t cases < <(grep -oE '^    "[a-z_]+",' benches/instructions.rs | tr -d '", ')
  # One case per algorithm and outcome (benches/common: ALGORITHMS).
  for a in $(sed -n '/^pub const ALGORITHMS/,/^];/p' benches/common/mod.rs | grep -oE '"[a-z_]+"' | tr -d '"'); do
    cases+=("algorithm_${a}_allowed" "algorithm_${a}_refused")
  done
fi
out=$(mktemp -d)
printf '%-24s %14s\n' case instructions/iter
for c in "${cases[@]}"; do
  valgrind --tool=callgrind --callgrind-out-file="$out/$c.out" --toggle-collect='*hot_loop*' \
    "$bin" "$c" "$n" >/dev/null 2>&1
  total=$(grep -E '^(summary|totals):' "$out/$c.out" | head -1 | awk '{print $2}')
  python3 -c "print(f'%-24s %14.1f' % ('$c', $total / $n))"
done
rm -rf "$out"
