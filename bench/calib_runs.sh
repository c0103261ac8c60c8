#!/usr/bin/env bash
# A calibration set's three runs (issue 39; validation.CALIB_SETS: calib, calib2, calib3), on one GPU alone, from
# the repository root after `pip install --no-build-isolation .`:
#   bench/calib_runs.sh SET [LIMIT_S]
# Each run keeps the driver's fault events and each program's per-entry table; the first is kept as SET, the two
# repeats as rep-SET and rep2-SET (the names data/sim-traces uses). Each run is cut at LIMIT_S seconds (default
# 900). Writes $OUT/SET.tar.gz, $OUT/rep-SET.tar.gz, $OUT/rep2-SET.tar.gz (unpack with `tar -xzf FILE -C
# data/sim-traces`), $OUT/<run>.log, and $OUT/SET-runs.tar with all of them (one file to bring back); prints each
# run's table of the driver's GPU faults, then a summary. Measured: calib2's nine programs 21-22 s a run (H100,
# session 15), calib3's six 9-12 s (H200, session 21).
# Then, on any machine (no GPU), the document with the set among the calibration programs:
#   python3 bench/sim_validate.py <the command in docs/simulator-validation.md's header> \
#     --calib data/sim-traces/SET --repeat data/sim-traces/rep-SET --repeat data/sim-traces/rep2-SET
set -uo pipefail
set_name=${1:-}
limit=${2:-900}
if ! python3 -c 'import sys; from umscope.model.validation import CALIB_SETS; sys.exit(sys.argv[1] not in CALIB_SETS)' \
    "$set_name" 2>/dev/null || ! [[ "$limit" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bench/calib_runs.sh SET [LIMIT_S]: SET one of umscope.model.validation.CALIB_SETS, LIMIT_S seconds" >&2
  exit 2
fi
OUT=${OUT:-/tmp/$set_name-out}; mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=()
runs=("$set_name" "rep-$set_name" "rep2-$set_name")
for r in "${runs[@]}"; do
  t0=$(date +%s)
  timeout "$limit" python3 bench/sim_validate.py --set "$set_name" --uvm-events --runs-only --keep "$work/$r" \
    > "$OUT/$r.log" 2>&1
  rc=$?
  s=$(( $(date +%s) - t0 ))
  [ -d "$work/$r" ] && tar -czf "$OUT/$r.tar.gz" -C "$work" "$r"
  sed -n '/^| program/,$p' "$OUT/$r.log"
  [ $rc -eq 0 ] || tail -5 "$OUT/$r.log"
  summary+=("| $r | $rc | $s | $(ls "$work/$r" 2>/dev/null | grep -c '\.counts\.json$') | $(ls "$work/$r" 2>/dev/null | grep -c '\.entries\.txt\.gz$') | $(du -h "$OUT/$r.tar.gz" 2>/dev/null | cut -f1) |")
done
(cd "$OUT" && tar -cf "$set_name-runs.tar" $(for r in "${runs[@]}"; do ls "$r.tar.gz" "$r.log" 2>/dev/null; done))
echo
echo "| run | exit | s | programs kept | entry tables | tar |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${summary[@]}"
