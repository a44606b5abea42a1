#!/usr/bin/env bash
# Instructions per decision, counted by callgrind inside `hot_loop` of benches/instructions.rs
# (direct limiters, every algorithm), benches/keyed_instructions.rs (keyed limiters, policies)
# benches/wait_instructions.rs (asynchronous waits) and benches/http_instructions.rs (the HTTP
# middleware).
# Usage: scripts/instructions.sh [N] [CASE...]   (default N = 1000000, all cases; algorithm cases
# are algorithm_NAME_allowed and algorithm_NAME_refused)
# Deterministic for a given binary: the figures in BENCHMARKS.md come from this script.
# FEATURES=metrics builds the benches with that feature (keyed_instructions then installs a
# recorder: the cost of metrics on). BY_FILE=K also prints, under each case, the K source files
# that execute the most instructions per iteration (exclusive counts).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}; shift || true
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
binary() {
  cargo bench -p flowgate-benches --bench "$1" ${FEATURES:+--features "$FEATURES"} --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]==sys.argv[1] and m.get("executable"): print(m["executable"])' "$1" | tail -1
}
bin=$(binary instructions)
keyed_bin=$(binary keyed_instructions)
wait_bin=$(binary wait_instructions)
http_bin=$(binary http_instructions)
list() { grep -oE '^    "[a-z0-9_]+",' "$1" | tr -d '", '; }
mapfile -t keyed_cases < <(list benches/keyed_instructions.rs)
mapfile -t wait_cases < <(grep -oE '"[a-z_]+_until_ready"' benches/wait_instructions.rs | tr -d '"' | sort -u)
mapfile -t http_cases < <(list benches/http_instructions.rs)
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  mapfile -t cases < <(list benches/instructions.rs)
  # One case per algorithm and outcome (benches/common: ALGORITHMS).
  for a in $(sed -n '/^pub const ALGORITHMS/,/^];/p' benches/common/mod.rs | grep -oE '"[a-z_]+"' | tr -d '"'); do
    cases+=("algorithm_${a}_allowed" "algorithm_${a}_refused")
  done
  cases+=("${keyed_cases[@]}" "${wait_cases[@]}" "${http_cases[@]}")
fi
out=$(mktemp -d)
printf '%-24s %14s\n' case instructions/iter
for c in "${cases[@]}"; do
  run=$bin
  for k in "${keyed_cases[@]}"; do [ "$c" = "$k" ] && run=$keyed_bin; done
  for k in "${wait_cases[@]}"; do [ "$c" = "$k" ] && run=$wait_bin; done
  for k in "${http_cases[@]}"; do [ "$c" = "$k" ] && run=$http_bin; done
  valgrind --tool=callgrind --callgrind-out-file="$out/$c.out" --toggle-collect='*hot_loop*' \
    "$run" "$c" "$n" >/dev/null 2>&1
  total=$(grep -E '^(summary|totals):' "$out/$c.out" | head -1 | awk '{print $2}')
  python3 -c "print(f'%-24s %14.1f' % ('$c', $total / $n))"
  if [ -n "${BY_FILE:-}" ]; then
    # Exclusive instructions per iteration summed by where they run: flowgate's own source files
    # by their path; code of other crates inlined into a flowgate function by that function;
    # the rest by file name. The largest first.
    callgrind_annotate --threshold=100 "$out/$c.out" 2>/dev/null | python3 -c '
import os, re, sys, collections
n, root, parts = int(sys.argv[1]), os.getcwd() + "/src/", collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S+?):(.*?)(?: \[.*)?$", line)
    if not m or m.group(2).startswith("PROGRAM"):
        continue
    file, function = m.group(2), m.group(3)
    if file.startswith(root):
        file = "src/" + file[len(root):]
    if file.startswith("src/"):
        name = file
    elif "flowgate::" in function:
        name = "inlined in " + function[:70]
    else:
        name = file.rsplit("/", 1)[-1]
    parts[name] += int(m.group(1).replace(",", "")) / n
for name, count in parts.most_common(int(sys.argv[2])):
    print(f"    {count:10.1f}  {name}")' "$n" "$BY_FILE"
  fi
done
rm -rf "$out"
